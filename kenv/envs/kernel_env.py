"""kenv/Kernel-v3 and its variants: the three decisions on one machine, sharing its CPUs and input pool."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import numpy as np

from ..drivers.raid6 import raid6_behaviour
from ..platforms import get_platform
from ..schema import check_bool, check_phases
from ..sim.engine import NSEC_PER_MSEC, NSEC_PER_SEC
from ..subsystems.common import kernel_reports_info
from ..subsystems.hwrng import WAIT, HwrngSubsystem, pool_info
from ..subsystems.phases import LOAD_SCHEDULES, READER_SCHEDULES, TRAFFIC_SCHEDULES, PhaseSchedule
from ..subsystems.qperf import DEFERRAL, QPERF_SCENARIO_FIELDS, QperfSubsystem, resolve_machine
from ..subsystems.raid6 import BENCHMARK_MODE, LOADS, Raid6Subsystem
from .base import FastForwardMemory, KenvEnv
from .info import (
    BITS_CREDITED, HWRNG, HWRNG_STEP, LOAD_PHASE, MACHINE, MSG_SIZE, POOL, QPERF_STEP, RAID6, READER_PHASE, SHELL,
    SIM_TIME, STEP_SIM, TRAFFIC_PHASE, WINDOW, WORST_WAKEUP, kernel_reports,
)
from .observation import (
    CRNG_INIT, CRNG_PROGRESS, HWRNG_LAST, HWRNG_NO_BYTE, HWRNG_STATE, KERNEL_CONFIG, QPERF_CONFIG, QPERF_REGRESSION,
    QPERF_STATE, RAID6_LOAD, RAID6_PROGRESS, RAID6_STATE,
)
from .versions import Version

#: the decisions, in the order of the MultiDiscrete action
_DECISIONS = MappingProxyType({"deferral": DEFERRAL, "wait": WAIT, "raid6": BENCHMARK_MODE})
DIMENSIONS = tuple(_DECISIONS)

#: The hwrng is a bcm2835-compatible block with rpi3bplus's parameters,
#: transplanted onto the x86 host (no x86 server has one); it probes 5 ms into
#: the episode.  The raid6 table, cyclictest and modprobe parameters are
#: x86-avx512-32's (the X7-2's Xeon Platinum 8160 has AVX-512).
HWRNG_FROM = "rpi3bplus"
RAID6_FROM = "x86-avx512-32"
HWRNG_PROBE_AFTER_NS = 5 * NSEC_PER_MSEC
#: after the warm-up, time for the first reads before the first step
STARTUP_MARGIN_NS = 5 * NSEC_PER_MSEC
#: CPUs: qperf and its NIC interrupts on 0 (numactl -N0), modprobe starts from
#: a shell on 1, the rng reader and the hwrng kthread (taskset) share 2.  Keeping
#: the kthread off qperf's CPU is a choice: a kthread spinning next to qperf is
#: another experiment, and it forces every round trip to be simulated in detail.
RAID6_CPU = 1
READER_CPU = 2

#: KernelBoot-v0's starting states (scenario field ``start``): ``ready`` as in
#: Kernel-v3 (the hwrng kthread has made the crng READY), ``boot``: the episode
#: starts STARTUP_MARGIN_NS after the rng's probe, while the generator still
#: discards its warm-up numbers and nothing has credited the input pool yet
START = ("ready", "boot")


class _KernelEpisode:
    def __init__(self, scenario: dict, rng: np.random.Generator, ff: FastForwardMemory | None,
                 load_balance: bool = False, irq_threads: bool = False,
                 phase_rng: np.random.Generator | None = None):
        self.plat, self.preempt = resolve_machine(scenario)
        self.hz = self.plat.hz
        self.step_ns = int(float(scenario["step_ms"]) * NSEC_PER_MSEC)
        # each part's schedule has its own generator: their draws interleave
        # in no order that depends on the simulation
        traffic_rng, reader_rng, load_rng = (
            (None, None, None) if phase_rng is None else
            tuple(np.random.default_rng(int(phase_rng.integers(0, 2**63 - 1))) for _ in range(3)))
        self.q = QperfSubsystem(self.plat, preempt=self.preempt, rng=rng, msg_size=scenario["msg_size"],
                                threshold=int(scenario["threshold"]), step_ns=self.step_ns,
                                learned=ff and ff.qperf, load_balance=load_balance, irq_threads=irq_threads,
                                schedule=None if phase_rng is None
                                else PhaseSchedule(scenario["traffic_phases"], traffic_rng, TRAFFIC_SCHEDULES))
        k = self.k = self.q.client_kernel
        self.pool = self.q.client_pool
        self._stall_kernels = (k,)
        hw_params = get_platform(HWRNG_FROM).hwrng
        silent = float(scenario["silent_s"])
        hw_params = dataclasses.replace(
            hw_params, probe_ns=k.now + HWRNG_PROBE_AFTER_NS,
            silent_until_ns=int(silent * NSEC_PER_SEC) if silent > 0 else None)
        self.hw = HwrngSubsystem(k, self.pool, hw_params, smp_cache_bytes=self.plat.smp_cache_bytes,
                                 bs=int(scenario["reader_bs"]), reader_cpus=(READER_CPU,),
                                 kthread_cpus=(READER_CPU,),
                                 learned=ff and ff.hwrng,
                                 schedule=None if phase_rng is None else PhaseSchedule(scenario["reader_phases"], reader_rng))
        if scenario.get("start", "ready") == "boot":
            # Boot until just after the probe: the hwrng kthread and the reader
            # wait for the generator's warm-up, and the crediting rules decide
            # from the first step on when the crng becomes READY.
            self.hw.boot(hw_params.probe_ns + STARTUP_MARGIN_NS)
        else:
            # Boot until the rng has warmed up (RNG_WARMUP_COUNT numbers discarded)
            # and the hwrng kthread has filled the pool: from the first step on, all
            # three decisions act, and modprobe raid6_pq starts with the episode.
            self.hw.boot(hw_params.probe_ns + hw_params.warmup_ns + STARTUP_MARGIN_NS)
            k.run(until=k.now + NSEC_PER_SEC, stop=lambda: self.hw.reader_bytes > 0)  # first bytes read
        r6_plat = get_platform(RAID6_FROM)
        self.kernel_version = raid6_behaviour(self.plat.kernel_version)
        self.r6 = Raid6Subsystem(k, r6_plat, cpu=RAID6_CPU, kernel_version=self.kernel_version,
                                 load=scenario["load"],
                                 interval_us=int(scenario["cyclictest_interval_us"]),
                                 t0=k.now + int(rng.integers(0, k.TICK_NSEC)),
                                 schedule=None if phase_rng is None
                                 else PhaseSchedule(scenario["load_phases"], load_rng, LOAD_SCHEDULES))
        # the entries of info that an episode never changes
        self._info_head = {"platform": self.plat.name, "preempt": self.preempt, "hz": self.hz}

    @property
    def now_s(self) -> float:
        return self.k.now / NSEC_PER_SEC

    def step(self, action: tuple) -> dict:
        deferral, wait, mode = action
        k = self.k
        t0 = k.now
        bits0, stalls0, bugs0 = self.pool.init_bits, len(k.rcu_stalls), self.q.bugs()
        self.hw.begin_step(wait, t0 + self.step_ns)
        r6_active = not self.r6.done
        if r6_active:
            self.r6.begin_step(mode)
        mq = self.q.step(deferral)            # runs the shared engine for step_ns
        mh = self.hw.end_step()
        mr = (self.r6.end_step() if r6_active
              else {"latency": 0.0, "throughput": 0.0, "raw": Raid6Subsystem.raw_at_reset()})
        bits = self.pool.init_bits - bits0
        bugs = self.q.bugs() - bugs0
        raw = {**mq["raw"], **mh["raw"], **mr["raw"], "bits_credited": bits,
               "step_sim_s": (k.now - t0) / NSEC_PER_SEC}
        return {
            "entropy": bits / 256.0,
            "throughput": mq["throughput"] + mh["throughput"] + mr["throughput"],
            "latency": mq["latency"] + mr["latency"],
            "spin": mh["spin"],
            "rcu_stall": float(len(k.rcu_stalls) - stalls0),
            "bug": float(bugs),
            # the episode is the module load: it ends when modprobe exits (or on a BUG)
            "terminated": bugs > 0 or self.r6.done,
            "raw": raw,
        }

    def info(self) -> dict:
        return {**self._info_head, "sim_time_s": self.now_s, "msg_size": self.q.msg_size_label, **self.q.phase_info(),
                **self.hw.info(), **self.r6.info(), **pool_info(self.pool),
                # RCU stalls of this machine (the client); BUGs of both hosts
                **kernel_reports_info(self._stall_kernels, self.q.kernels)}

    def raw_at_reset(self) -> dict:
        return {**QperfSubsystem.RAW_AT_RESET, **HwrngSubsystem.RAW_AT_RESET, **Raid6Subsystem.raw_at_reset(),
                "bits_credited": 0, "step_sim_s": 0.0}


#: kenv/Kernel-v3
BASE = Version(
    "kenv/Kernel-v3", max_episode_steps=48, default_scenario="kernel",
    scenario_fields={
        **QPERF_SCENARIO_FIELDS,
        "reader_bs": (4, 16, 64, 256),
        "silent_s": (0, 1, 5),
        "load": LOADS,
        "cyclictest_interval_us": (1000, 5000, 10000),
    },
    observation=KERNEL_CONFIG + (
        QPERF_CONFIG, QPERF_REGRESSION,
        HWRNG_NO_BYTE.renamed(("hwrng reader has had no byte yet",), "the hwrng reader has not had a byte yet"),
        HWRNG_LAST.renamed(("previous hwrng throughput", "previous hwrng spin"),
                           ("previous hwrng throughput component (capped at 1, as HwrngWait's row 10)",
                            "previous hwrng spin component (capped at 1)")),
        RAID6_LOAD.renamed(("continuous hog on the modprobe CPU", "periodic job on the modprobe CPU"),
                           ("a continuous hog on the modprobe CPU", "a periodic job on the modprobe CPU")),
        RAID6_PROGRESS.renamed(("raid6 benchmark progress", "previous worst wakeup (log scale)",
                                "previous raid6 window's lost calls"),
                               ("raid6 benchmark progress: windows / 18",
                                "previous worst cyclictest wakeup, log10(1 + us) / 6 (up to 1.5)",
                                "share of the previous raid6 window's calls lost")),
        CRNG_PROGRESS,
    ),
    info=(SHELL + MACHINE + (SIM_TIME, MSG_SIZE) + HWRNG + RAID6
          + (POOL[0], POOL[1].with_meaning("bits credited to the shared input pool so far"), POOL[2], BITS_CREDITED)
          + kernel_reports("both qperf hosts", "this machine") + QPERF_STEP + HWRNG_STEP
          + (WORST_WAKEUP.with_meaning("the step's worst cyclictest wakeup (-1.0 once modprobe has exited)"),
             WINDOW, STEP_SIM)))
#: boot-time starting states before crng READY (scenario field ``start``; issue #30
#: part 2), the crng state observed.  Not load balancing: the fast-forwards cannot
#: skip a balancing kernel exactly and decline it, which makes Kernel steps about
#: 30x slower (``gym.make(..., load_balance=True)`` still gives it)
BOOT = BASE.extended("kenv/KernelBoot-v0", kwargs={"boot_states": True}, default_scenario="kernel-v1",
                     scenario_fields={"start": START}, observation=(CRNG_INIT,))
#: the boot-time states, PREEMPT_RT's interrupt threads on the rt scenarios, and
#: the three phased workloads (issue #31), each observed
PHASED = BOOT.extended(
    "kenv/KernelPhased-v0", kwargs={"boot_states": True, "irq_threads": True, "phases": True},
    default_scenario="kernel-v2",
    phase_fields={"traffic_phases": tuple(TRAFFIC_SCHEDULES), "reader_phases": tuple(READER_SCHEDULES),
                  "load_phases": tuple(LOAD_SCHEDULES)},
    observation=(QPERF_STATE, HWRNG_STATE, RAID6_STATE), info=(TRAFFIC_PHASE, READER_PHASE, LOAD_PHASE))


class KernelEnv(KenvEnv):
    """
    ## Description

    The three decisions of kenv on one simulated machine: an x86-ib40g host
    (qperf ``tcp_lat`` to a peer over IPoIB, its NIC interrupts feeding the
    random.c fast pools), a bcm2835-compatible hwrng with the ``hwrng``
    kthread and a reader of /dev/hwrng, and ``modprobe raid6_pq`` under a
    cyclictest probe.  They share the kernel (CPUs, scheduler, timer wheel,
    RCU) and one input pool: the crng becomes READY from interrupt mixes and
    hwrng bytes together.  The hwrng block's parameters come from rpi3bplus and
    the raid6 table from x86-avx512-32 (see the module constants); this
    machine is a composite, not a measured one.

    ## Action Space

    ``MultiDiscrete([n_deferral, n_wait, n_raid6])``: the fast-pool mix
    deferral (default ``workqueue``, ``timer``), the bcm2835 wait (default
    ``cpu_relax``, ``hwrng_msleep(1000)``, ``hwrng_yield``) and the raid6
    benchmark mode of windows that start in the step (default
    ``preempt_disable``, ``migrate_disable``).  ``actions={"deferral": [...],
    "wait": [...], "raid6": [...]}`` opens the extended sets of the single envs.

    ## Observation Space

    ``Box(float32)``:

    <!-- observation: kenv/Kernel-v3 -->
    | index | meaning | min | max | kernel source |
    |---|---|---|---|---|
    | 0-3 | preemption model one-hot: none, voluntary, full, rt | 0 | 1 | ``CONFIG_PREEMPT_*`` |
    | 4 | HZ / 1000 | 0.1 | 1 | ``CONFIG_HZ`` |
    | 5 | log2(msg_size / 4 KiB) / 8 | 0 | 1 | |
    | 6 | mix threshold is 64 (before 534d2eaf1970) | 0 | 1 | |
    | 7 | previous step's tcp_lat regression x 5 (capped at 1) | 0 | 1 | |
    | 8 | the hwrng reader has not had a byte yet | 0 | 1 | ``drivers/char/hw_random/core.c rng_dev_read()`` |
    | 9 | previous hwrng throughput component (capped at 1, as HwrngWait's row 10) | 0 | 1 | |
    | 10 | previous hwrng spin component (capped at 1) | 0 | 1 | |
    | 11 | a continuous hog on the modprobe CPU | 0 | 1 | |
    | 12 | a periodic job on the modprobe CPU | 0 | 1 | |
    | 13 | raid6 benchmark progress: windows / 18 | 0 | 1 | ``lib/raid6/algos.c raid6_choose_gen(); cyclictest`` |
    | 14 | previous worst cyclictest wakeup, log10(1 + us) / 6 (up to 1.5) | 0 | 1.5 | ``lib/raid6/algos.c raid6_choose_gen(); cyclictest`` |
    | 15 | share of the previous raid6 window's calls lost | 0 | 1 | ``lib/raid6/algos.c raid6_choose_gen(); cyclictest`` |
    | 16 | crng progress: credited bits / 256 | 0 | 1 | ``drivers/char/random.c input_pool.init_bits`` |
    | 17.. | previous action, one-hot per dimension | 0 | 1 | |
    <!-- end -->

    KernelBoot-v0 inserts the crng state before the previous action:

    <!-- observation: kenv/KernelBoot-v0 -->
    | index | meaning | min | max | kernel source |
    |---|---|---|---|---|
    | 17-19 | ``crng_init`` one-hot: CRNG_EMPTY, CRNG_EARLY (128 bits credited), CRNG_READY (256) | 0 | 1 | ``drivers/char/random.c crng_init`` |
    | 20.. | previous action, one-hot per dimension | 0 | 1 | |
    <!-- end -->

    KernelPhased-v0 (``phases=True``) then adds the NIC's recent interrupt rate
    and mixes (RandomMixPhased-v0's) and what the hwrng driver could read at the
    step's end (HwrngWaitPhased-v0's) and the modprobe CPU's runqueue length
    (Raid6BenchPhased-v0's):

    <!-- observation: kenv/KernelPhased-v0 -->
    | index | meaning | min | max | kernel source |
    |---|---|---|---|---|
    | 20 | NIC receive interrupts on the client's qperf CPU in the last step (its round trips x the message's interrupts), log10(1 + per ms) / 3 | 0 | 1 | ``drivers/char/random.c add_interrupt_randomness()`` |
    | 21 | fast-pool mixes in the last step (both hosts) / 4, capped at 1 | 0 | 1 | ``drivers/char/random.c add_interrupt_randomness()`` |
    | 22 | ``RNG_STATUS >> 24`` / FIFO depth: words in the FIFO now | 0 | 1 | ``drivers/char/hw_random/bcm2835-rng.c, core.c`` |
    | 23 | readers in ``rng_dev_read()`` (the reader's next read(2) has begun) | 0 | 1 | ``drivers/char/hw_random/bcm2835-rng.c, core.c`` |
    | 24 | tasks asleep on ``reading_mutex`` / 2 (capped at 1) | 0 | 1 | ``drivers/char/hw_random/bcm2835-rng.c, core.c`` |
    | 25 | time since words were last read from ``RNG_DATA``, log10(1 + us) / 7 | 0 | 1 | ``drivers/char/hw_random/bcm2835-rng.c, core.c`` |
    | 26 | runqueue length of the CPU modprobe runs on / 4 (capped at 1) at the step's end: modprobe, the cyclictest thread if woken, the job if running or runnable | 0 | 1 | ``kernel/sched rq->nr_running`` |
    | 27.. | previous action, one-hot per dimension | 0 | 1 | |
    <!-- end -->

    ## Rewards

    The components of the three single envs, summed per component:
    ``throughput`` = qperf (messages vs undisturbed) + hwrng (log-scaled
    bytes/s) + raid6 (chosen/fastest x benchmark steps, once, when modprobe
    exits); ``latency`` = tcp_lat regression + cyclictest worst wakeup (log
    scale); ``spin`` = CPU burned in ``cpu_relax()``; ``entropy`` = bits
    credited to the shared input pool / 256; ``rcu_stall``; ``bug``.

    ## Info

    The same keys with the same types at every ``reset()`` and ``step()`` (a
    vector env stacks them; checked by tests/test_clients.py).
    Before the first step, step-only entries hold the value in the last column;
    ``-1.0`` (``NO_VALUE``) stands for a float that has no value yet (not NaN:
    Gymnasium's ``check_env`` compares infos with ``==`` and Tianshou rejects NaN).

    <!-- info: kenv/Kernel-v3 -->
    | key | type | meaning | at reset |
    |---|---|---|---|
    | ``scenario`` | dict | the episode's scenario fields (see Arguments): ``int`` where every allowed choice is an integer, else ``str`` (e.g. ``hz``: ``"platform"`` or ``"250"``) | |
    | ``profile`` | str | reward profile name | |
    | ``reward_components`` | dict of float | the step's components (see Rewards) | all 0.0 |
    | ``action_name`` | str | the action taken | ``""`` |
    | ``platform``, ``preempt`` | str | the machine and its preemption model (resolved) | |
    | ``hz`` | int | CONFIG_HZ (resolved) | |
    | ``sim_time_s`` | float | simulated time since boot | |
    | ``msg_size`` | str | qperf message size | |
    | ``wait`` | str | the bcm2835 wait in force | |
    | ``reader_bytes`` | int | bytes the /dev/hwrng reader has read | |
    | ``bench_cpu`` | int | the CPU modprobe and cyclictest run on | |
    | ``windows_done`` | int | benchmark windows done | |
    | ``chosen``, ``best`` | str | the algorithm raid6_choose_gen() chose, and the fastest | ``""`` until modprobe exits |
    | ``chosen_gen_mb_s``, ``best_gen_mb_s`` | float | their gen() speeds | -1.0 until then |
    | ``throughput_lost`` | float | 1 - chosen/fastest speed | -1.0 until then |
    | ``dmesg`` | str | the benchmark's dmesg lines, newline-separated | ``""`` until then |
    | ``load_s`` | float | modprobe's run time | -1.0 until then |
    | ``crng_init`` | int | crng state: 0 EMPTY, 1 EARLY, 2 READY | |
    | ``bits_credited_total`` | int | bits credited to the shared input pool so far | |
    | ``crng_ready_s`` | float | when the crng became READY | -1.0 until then |
    | ``bits_credited`` | int | bits credited in the step | 0 |
    | ``bugs`` | int | kernel BUG reports so far (both qperf hosts) | |
    | ``last_bug`` | str | the last one | ``""`` before any |
    | ``rcu_stalls`` | int | RCU stall reports so far (this machine) | |
    | ``last_rcu_stall_t_s``, ``last_rcu_stall_cpu`` | float, int | time and CPU of the last one | -1.0, -1 before any |
    | ``latency_us`` | float | the step's mean tcp_lat | -1.0 |
    | ``clean_latency_us`` | float | the undisturbed tcp_lat of the size | -1.0 |
    | ``round_trips`` | int | qperf round trips completed in the step | 0 |
    | ``mixes`` | int | fast-pool mixes in the step (both hosts) | 0 |
    | ``hwrng_bytes`` | int | bytes read in the step | 0 |
    | ``hwrng_bytes_per_s`` | float | the reader's rate over the step | -1.0 |
    | ``spin_cpu_s`` | float | CPU time spun in ``cpu_relax()`` in the step | 0.0 |
    | ``worst_wakeup_us`` | float | the step's worst cyclictest wakeup (-1.0 once modprobe has exited) | -1.0 |
    | ``window`` | dict | the benchmark window that ended in the step: ``algo``, ``kind`` (gen/xor) str; ``perf``, ``mb_s`` int; ``lost_fraction`` float | ``""``, ``""``, -1, -1, -1.0 (also in a step without a window) |
    | ``step_sim_s`` | float | simulated time of the step | 0.0 |
    <!-- end -->

    With ``phases=True`` (KernelPhased-v0) info also has:

    <!-- info: kenv/KernelPhased-v0 -->
    | key | type | meaning | at reset |
    |---|---|---|---|
    | ``traffic_phase`` | str | the step's message size (``64 KiB``) or ``pause`` | the first step's |
    | ``reader_phase`` | str | the reader's phase in the step, ``reader`` or ``idle`` | the first step's (the boot runs in it) |
    | ``load_phase`` | str | the job's phase in the step, ``job`` or ``off`` | the first step's |
    <!-- end -->

    ## Starting State

    Both hosts booted and qperf connected; the rng probed 5 ms after boot and
    has finished its warm-up (``RNG_WARMUP_COUNT`` numbers, ~0.24 s), so the
    ``hwrng`` kthread has already made the shared crng READY (the fast pools
    still mix into it, but credit nothing more: ``entropy`` is ~0 here; it
    matters in RandomMix-v2 and HwrngWait-v2).  ``modprobe raid6_pq`` starts
    with the first step.  Scenario mix: ``configs/scenarios/kernel.yaml``.

    KernelBoot-v0 (scenario field ``start``, mix ``configs/scenarios/kernel-v1.yaml``)
    starts at boot (``boot``): 5 ms after the rng's probe, while the generator
    discards its warm-up numbers, with nothing credited (``crng_init`` EMPTY).
    The crediting rules of random.c (6.x, as backported to
    5.15-stable: ``credit_init_bits()``, EARLY at 128 bits, READY at 256) then
    decide when READY comes: each fast-pool mix credits ``clamp((count &
    0xffff) / 64, 1, 128)`` bits, the hwrng kthread ``rc * 8 * quality /
    1024`` bits per read (quality 1024, the core's ``default_quality``), and
    ``add_hwgenerator_randomness()`` sleeps a reseed interval only once READY
    (or when it credited nothing).  So the wait decides when the kthread's
    reads come (``hwrng_msleep(1000)``: a second after the empty FIFO it
    finds), and the deferral how many interrupts qperf's round trips bring
    (the workqueue's regression costs round trips).  Assumed: the host does
    not credit its CPU's RDRAND/RDSEED (``random.trust_cpu=off``) nor a
    bootloader seed, and qperf's traffic (NIC interrupts) runs from the
    first step.  ``start: ready`` is Kernel-v3's starting state.

    KernelPhased-v0 (``phases=True``, mix ``configs/scenarios/kernel-v2.yaml``):
    KernelBoot-v0 with qperf's traffic changing size or pausing (``traffic_phases``,
    see RandomMixPhased-v0), the /dev/hwrng reader coming and going by a schedule
    drawn at reset (scenario field ``reader_phases``; see HwrngWaitPhased-v0 and
    kenv.subsystems.phases): an idle reader finishes its read(2) in
    progress and sleeps until a step with a reader begins; and the job on
    the modprobe CPU starting and stopping by another (``load_phases``, see
    Raid6BenchPhased-v0).

    ## Episode End

    Terminated when ``modprobe`` exits (after its last benchmark window: about
    31 steps at HZ=1000 on v5.16) or on a kernel BUG; truncated at 48 steps.
    Every decision acts at every step of the episode.

    ## Arguments

    ``gym.make("kenv/Kernel-v3", actions=None, scenario=None, profile="balanced",
    reward_weights=None, render_mode=None, fast_forward=True, load_balance=False,
    irq_threads=False)``;
    ``kenv/KernelBoot-v0`` is ``KernelEnv(boot_states=True)`` (its declaration
    ``BOOT`` in kenv/envs/kernel_env.py); ``phases=True`` (with
    ``boot_states=True``: a KernelPhased-v0) adds the phased workloads.  ``load_balance=True`` runs
    the kernel with CFS load balancing (kenv.kernel.balance; no registered id
    sets it yet, see Version History).
    ``fast_forward=False`` simulates every round trip, poll and read in detail
    (the same trajectories, slower).

    ## Version History

    * v3: same dynamics as v0 (same fingerprint).  The id moved up when the
      variants below took names of their own, so that the recommended id is
      the newest version of its name and ``gym.make`` does not warn;
      ``kenv/Kernel-v0`` stays registered (Gymnasium's notice names v3).
    * ``kenv/KernelPhased-v0``, was ``kenv/Kernel-v2`` (still registered, same
      dynamics; ``boot_states=True, irq_threads=True, phases=True``,
      kenv.envs.kernel_env.PHASED): KernelBoot-v0's boot-time states; PREEMPT_RT's
      interrupt threads on the ``rt`` scenarios (see ``irq_threads`` below);
      and workloads that change within an episode (issue #31): qperf's traffic changes size or pauses
      (scenario field ``traffic_phases``), the hwrng reader comes and goes by a
      schedule drawn at reset (scenario field ``reader_phases``), the job on
      the modprobe CPU starts and stops by another (``load_phases``), and the
      observation gains the NIC interrupt rate and mixes of the last step,
      the FIFO level, readers in ``rng_dev_read()``, ``reading_mutex``
      waiters, the time since the last FIFO read and the modprobe CPU's
      runqueue length (entries 20-26; the previous action moves to 27..).
    * ``kenv/KernelBoot-v0``, was ``kenv/Kernel-v1`` (still registered, same
      dynamics): boot-time starting states (issue #30): every episode of the default
      mix starts before crng READY (scenario field ``start``: ``boot``; ``ready``
      is v0's start), and the observation gains the ``crng_init`` one-hot
      (entries 17-19; the previous action moves to 20..).  Dynamics of a
      ``ready`` start are v0's.
    * ``load_balance=True`` (an argument, in no registered id): the kernel
      balances load (kenv.kernel.balance, ``kernel/sched/fair.c``: newidle and
      idle CPUs' periodic balance; ``can_migrate_task()`` refuses cache-hot,
      pinned and migrate-disabled tasks).  What is pinned in reality stays
      pinned (qperf under ``taskset``, the per-CPU kworkers, cyclictest ``-a``,
      the reader and, as in v0, the hwrng kthread on CPU 2 -- a placement of
      this env: Linux's ``hwrng_fillfn`` kthread is unbound); modprobe is not,
      and when it waits behind the background load outside a window it is
      pulled to an idle CPU.  The fast-forwards are off with it (a skipped
      stretch would hide the moments a CPU goes idle, where a newidle balance
      pulls a waiting task, and they may only skip what they compute
      exactly): steps are about 30x slower, which is why no Kernel id turns
      it on yet (kenv/Raid6BenchBalanced-v0 does).
    * ``irq_threads=True`` (in KernelPhased-v0): on the
      scenarios with ``preempt`` "rt" the kernels run PREEMPT_RT's forced
      interrupt threads (kenv.kernel.irq): the NIC's handler and NET_RX in
      ``irq/N-mlx4-ib0`` (SCHED_FIFO 50), timer_list timers -- the mix timer,
      the hwrng kthread's ``msleep()`` -- in ``ksoftirqd/N`` (5.15-rt has no
      ``ktimers``); cyclictest's hrtimer wakeups stay in hard IRQ (RT tasks
      are woken from there).  On those scenarios the hwrng fast-forward is
      off and the qperf one replays only steady round trips.

    * v0, info: every key present with one type at every reset and step (was:
      ``bugs`` and ``rcu_stalls`` lists, now counts with the last report;
      ``None`` for no value yet, now -1.0; step-only keys missing from reset's
      info; raid6's ``window`` None in steps without a window); trajectories
      unchanged.
    * v0: initial version.  Before the first release the qperf ping-pong was
      made to run on across steps (as in RandomMix-v2), and a scheduler fix
      stopped charging CPU time to a task preempted before it was switched in.
      The qperf latency reference is known from the first step on (see
      RandomMix-v2).

    ## References

    The three seeds: 748bc4dd9e66 (random.c timer), 6ca5ebb4f456 (hwrng_yield),
    and "lib/raid6: Reduce high latency by using migrate instead of preempt".
    """

    DECISIONS = _DECISIONS
    KERNEL_OPTIONS = ("load_balance", "irq_threads")
    VERSIONS = (BASE, BOOT, PHASED)
    PREVIOUS_ACTION = "previous action, one-hot per dimension"

    def __init__(self, *, boot_states: bool = False, phases: bool = False, **kwargs):
        boot_states = check_bool(boot_states, "boot_states", f"True ({BOOT.id}) or False ({BASE.id})")
        super().__init__({"boot_states": boot_states, "phases": check_phases(phases, BASE.id)}, **kwargs)

    def _make_episode(self, scenario: dict, rng: np.random.Generator) -> _KernelEpisode:
        # With load balancing the fast-forwards decline everything: a skipped
        # stretch of qperf round trips or hwrng reads hides the moments its CPU
        # goes idle, where a newidle balance would pull a waiting task, so
        # they could not give the detailed simulation's trajectory.
        # (With the interrupt threads on rt, _KernelEpisode turns the hwrng one
        # off; the qperf one replays only steady round trips there.)
        ff = None if self.load_balance else self.ff_memory
        return _KernelEpisode(scenario, rng, ff, load_balance=self.load_balance,
                              irq_threads=self.irq_threads, phase_rng=self._phase_rng)
