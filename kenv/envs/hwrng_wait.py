"""kenv/HwrngWait-v2: how bcm2835_rng_read() waits for its FIFO."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..drivers.hwrng import WaitStrategy
from ..drivers.random import InputPool
from ..kernel.core import PREEMPT_MODELS, Kernel
from ..kernel.jiffies import ALLOWED_HZ
from ..platforms import get_platform
from ..schema import check_phases
from ..sim.engine import NSEC_PER_SEC, Engine
from ..subsystems.common import kernel_reports_info
from ..subsystems.hwrng import WAIT, HwrngSubsystem, pool_info
from ..subsystems.phases import READER_SCHEDULES, PhaseSchedule
from .base import FastForwardMemory, KenvEnv
from .info import (
    BITS_CREDITED, HWRNG, HWRNG_STEP, MACHINE, POOL, READER_PHASE, SHELL, SIM_TIME, STEP_SIM, kernel_reports,
)
from .observation import (
    CRNG_INIT, CRNG_PROGRESS, HWRNG_LAST, HWRNG_NO_BYTE, HWRNG_STATE, KERNEL_CONFIG, Obs, platform_one_hot,
)
from .versions import Version

PLATFORMS = ("rpi3bplus", "bcm2835-kernelci")
#: a step ends when the reader's read(2) returns, or after this much simulated time
STEP_LIMIT_NS = 5 * NSEC_PER_SEC


class _HwrngEpisode:
    """One boot of a bcm2835 board with the rng, the hwrng kthread and a reader."""

    def __init__(self, scenario: dict, rng: np.random.Generator, ff: FastForwardMemory | None,
                 phase_rng: np.random.Generator | None = None):
        plat = get_platform(scenario["platform"])
        preempt = plat.preempt if scenario["preempt"] == "platform" else scenario["preempt"]
        hz = plat.hz if scenario["hz"] == "platform" else int(scenario["hz"])
        params = plat.hwrng
        if scenario["silent_s"] != "platform":
            silent = float(scenario["silent_s"])
            params = dataclasses.replace(params, silent_until_ns=int(silent * NSEC_PER_SEC) if silent > 0 else None)
        self.plat, self.preempt, self.hz = plat, preempt, hz
        self.k = Kernel(Engine(), nr_cpus=plat.nr_cpus, hz=hz, preempt=preempt, costs=plat.sched,
                        rng=rng, name=plat.name)
        self.pool = InputPool(self.k)
        self._kernels = (self.k,)
        self.hw = HwrngSubsystem(self.k, self.pool, params, smp_cache_bytes=plat.smp_cache_bytes,
                                 bs=int(scenario["reader_bs"]), reads_per_step=1,
                                 learned=ff and ff.hwrng,
                                 schedule=None if phase_rng is None else PhaseSchedule(scenario["reader_phases"], phase_rng))
        # boot until the rng has registered and discarded its warm-up numbers:
        # the first step starts with the hwrng kthread and the reader at
        # /dev/hwrng and the generator running (unless the board keeps it silent)
        self.hw.boot(params.probe_ns + params.warmup_ns)
        # the entries of info that an episode never changes
        self._info_head = {"platform": plat.name, "preempt": preempt, "hz": hz}

    @property
    def now_s(self) -> float:
        return self.k.now / NSEC_PER_SEC

    def step(self, wait: WaitStrategy) -> dict:
        k = self.k
        limit = k.now + STEP_LIMIT_NS
        bits0, stalls0, bugs0 = self.pool.init_bits, len(k.rcu_stalls), len(k.bugs)
        self.hw.begin_step(wait, limit)
        k.run(until=limit)     # or until the step's read(2) returns (HwrngCore.stop_at_read)
        m = self.hw.end_step()
        bits = self.pool.init_bits - bits0
        m.update(entropy=bits / 256.0, rcu_stall=float(len(k.rcu_stalls) - stalls0),
                 bug=float(len(k.bugs) - bugs0))
        m["raw"].update(bits_credited=bits, step_sim_s=(k.now - self.hw._t0) / NSEC_PER_SEC)
        return m

    def info(self) -> dict:
        return {**self._info_head, "sim_time_s": self.now_s, **self.hw.info(), **pool_info(self.pool),
                **kernel_reports_info(self._kernels, self._kernels)}

    def raw_at_reset(self) -> dict:
        return {**HwrngSubsystem.RAW_AT_RESET, "bits_credited": 0, "step_sim_s": 0.0}


#: kenv/HwrngWait-v2
BASE = Version(
    "kenv/HwrngWait-v2", max_episode_steps=48, default_scenario="hwrng",
    scenario_fields={
        "platform": PLATFORMS,
        "preempt": ("platform",) + PREEMPT_MODELS,
        "hz": ("platform",) + ALLOWED_HZ,
        "silent_s": ("platform", 0, 5, 10, 25, 30, 60),
        "reader_bs": (4, 16, 32, 64, 128, 256, 512, 1024, 4096),
    },
    observation=KERNEL_CONFIG + (
        platform_one_hot(PLATFORMS),
        Obs(("1 / nr_cpus",), "1 / number of CPUs", lambda ep: [1.0 / ep.plat.nr_cpus], source="nr_cpu_ids",
            fixed=True),
        HWRNG_NO_BYTE,
        Obs(("time since boot / 60 s",), "time since boot / 60 s (capped at 1)",
            lambda ep: [min(1.0, ep.k.now / (60 * NSEC_PER_SEC))]),
        HWRNG_LAST,
        CRNG_PROGRESS,
    ),
    info=SHELL + MACHINE + (SIM_TIME,) + HWRNG + POOL + (BITS_CREDITED,) + kernel_reports() + HWRNG_STEP + (STEP_SIM,))
#: a /dev/hwrng reader that comes and goes within an episode (scenario field
#: ``reader_phases``, issue #31), and what the driver could read observed
PHASED = BASE.extended(
    "kenv/HwrngWaitPhased-v0", kwargs={"phases": True}, default_scenario="hwrng-v1",
    phase_fields={"reader_phases": tuple(READER_SCHEDULES)}, observation=(HWRNG_STATE, CRNG_INIT),
    info=(READER_PHASE,))
#: the controls of ``kenv discover`` (issue #40 item 2; docs/discover.md, Controls):
#: HwrngWait's dynamics on a scenario mix where, under the ``throughput`` profile,
#: the best wait flips with an observed row (positive), or does not (negative)
CONTROL = dataclasses.replace(BASE, id="kenv/HwrngWaitControl-v0", kwargs={"scenario": "hwrng-control"})
NULL_CONTROL = dataclasses.replace(BASE, id="kenv/HwrngWaitNullControl-v0",
                                   kwargs={"scenario": "hwrng-null-control"})


class HwrngWaitEnv(KenvEnv):
    """
    ## Description

    The bcm2835 hwrng driver polls a small FIFO; when it is empty,
    ``bcm2835_rng_read()`` must wait.  Linux <= 6.0 spun (``cpu_relax()``),
    which a non-preemptible kernelci board reported as an RCU stall; 6.1
    slept ``hwrng_msleep(rng, 1000)``, which made ``dd`` from /dev/hwrng take
    minutes on Raspberry Pi 0-3; 6.7 (the seed, Stefan Wahren) sleeps one
    jiffy with ``hwrng_yield()``.  Here the agent chooses the wait at every
    step, on a simulated board that boots, probes the rng, runs the ``hwrng``
    kthread (which credits the input pool) and a reader of /dev/hwrng.

    ## Action Space

    ``Discrete(n)`` over the ``<wait>`` of ``bcm2835_rng_read``.  Default:
    ``0: cpu_relax`` (<= 6.0), ``1: hwrng_msleep(1000)`` (6.1), ``2: hwrng_yield``
    (the patch).  ``actions=`` takes any list of kernel-style strings:
    ``cpu_relax``, ``hwrng_yield``, ``hwrng_msleep(MS)``, ``usleep_range(MIN,MAX)``.

    ## Observation Space

    ``Box(float32)``:

    <!-- observation: kenv/HwrngWait-v2 -->
    | index | meaning | min | max | kernel source |
    |---|---|---|---|---|
    | 0-3 | preemption model one-hot: none, voluntary, full, rt | 0 | 1 | ``CONFIG_PREEMPT_*`` |
    | 4 | HZ / 1000 | 0.1 | 1 | ``CONFIG_HZ`` |
    | 5-6 | platform one-hot: rpi3bplus, bcm2835-kernelci | 0 | 1 | |
    | 7 | 1 / number of CPUs | 0 | 1 | ``nr_cpu_ids`` |
    | 8 | the reader has not had a byte from /dev/hwrng yet | 0 | 1 | ``drivers/char/hw_random/core.c rng_dev_read()`` |
    | 9 | time since boot / 60 s (capped at 1) | 0 | 1 | |
    | 10 | previous step's throughput component (capped at 1: a step that only reads words already in the FIFO lasts under a microsecond, and its rate reaches about 1.5) | 0 | 1 | |
    | 11 | previous step's spin component (capped at 1) | 0 | 1 | |
    | 12 | crng progress: credited bits / 256 | 0 | 1 | ``drivers/char/random.c input_pool.init_bits`` |
    | 13.. | previous action one-hot (all zero after reset) | 0 | 1 | |
    <!-- end -->

    With ``phases=True`` (HwrngWaitPhased-v0) what the driver could read at the
    step's end comes before the previous action:

    <!-- observation: kenv/HwrngWaitPhased-v0 -->
    | index | meaning | min | max | kernel source |
    |---|---|---|---|---|
    | 13 | ``RNG_STATUS >> 24`` / FIFO depth: words in the FIFO now | 0 | 1 | ``drivers/char/hw_random/bcm2835-rng.c, core.c`` |
    | 14 | readers in ``rng_dev_read()`` (the reader's next read(2) has begun) | 0 | 1 | ``drivers/char/hw_random/bcm2835-rng.c, core.c`` |
    | 15 | tasks asleep on ``reading_mutex`` / 2 (capped at 1) | 0 | 1 | ``drivers/char/hw_random/bcm2835-rng.c, core.c`` |
    | 16 | time since words were last read from ``RNG_DATA``, log10(1 + us) / 7 | 0 | 1 | ``drivers/char/hw_random/bcm2835-rng.c, core.c`` |
    | 17-19 | ``crng_init`` one-hot: CRNG_EMPTY, CRNG_EARLY (128 bits credited), CRNG_READY (256) | 0 | 1 | ``drivers/char/random.c crng_init`` |
    | 20.. | previous action one-hot (all zero after reset) | 0 | 1 | |
    <!-- end -->

    ## Rewards

    Components per step: ``throughput`` = log10(1 + reader bytes/s) /
    log10(1 + 4 x the generator's word rate) (so ``cpu_relax`` on an idle
    board is about 1, ``hwrng_yield`` about 0.66, ``hwrng_msleep(1000)`` about
    0.25); ``spin`` = CPU time burned in ``cpu_relax()`` loops / step time;
    ``entropy`` = bits the hwrng kthread credited / 256; ``rcu_stall`` = RCU
    stall reports.  ``latency`` and ``bug`` are 0 here.

    ## Info

    The same keys with the same types at every ``reset()`` and ``step()`` (a
    vector env stacks them; checked by tests/test_clients.py).
    Before the first step, step-only entries hold the value in the last column;
    ``-1.0`` (``NO_VALUE``) stands for a float that has no value yet (not NaN:
    Gymnasium's ``check_env`` compares infos with ``==`` and Tianshou rejects NaN).

    <!-- info: kenv/HwrngWait-v2 -->
    | key | type | meaning | at reset |
    |---|---|---|---|
    | ``scenario`` | dict | the episode's scenario fields (see Arguments): ``int`` where every allowed choice is an integer, else ``str`` (e.g. ``hz``: ``"platform"`` or ``"250"``) | |
    | ``profile`` | str | reward profile name | |
    | ``reward_components`` | dict of float | the step's components (see Rewards) | all 0.0 |
    | ``action_name`` | str | the action taken | ``""`` |
    | ``platform``, ``preempt`` | str | the machine and its preemption model (resolved) | |
    | ``hz`` | int | CONFIG_HZ (resolved) | |
    | ``sim_time_s`` | float | simulated time since boot | |
    | ``wait`` | str | the bcm2835 wait in force | |
    | ``reader_bytes`` | int | bytes the /dev/hwrng reader has read | |
    | ``crng_init`` | int | crng state: 0 EMPTY, 1 EARLY, 2 READY | |
    | ``bits_credited_total`` | int | bits credited to the input pool so far | |
    | ``crng_ready_s`` | float | when the crng became READY | -1.0 until then |
    | ``bits_credited`` | int | bits credited in the step | 0 |
    | ``bugs`` | int | kernel BUG reports so far | |
    | ``last_bug`` | str | the last one | ``""`` before any |
    | ``rcu_stalls`` | int | RCU stall reports so far | |
    | ``last_rcu_stall_t_s``, ``last_rcu_stall_cpu`` | float, int | time and CPU of the last one | -1.0, -1 before any |
    | ``hwrng_bytes`` | int | bytes read in the step | 0 |
    | ``hwrng_bytes_per_s`` | float | the reader's rate over the step | -1.0 |
    | ``spin_cpu_s`` | float | CPU time spun in ``cpu_relax()`` in the step | 0.0 |
    | ``step_sim_s`` | float | simulated time of the step | 0.0 |
    <!-- end -->

    With ``phases=True`` (HwrngWaitPhased-v0) info also has:

    <!-- info: kenv/HwrngWaitPhased-v0 -->
    | key | type | meaning | at reset |
    |---|---|---|---|
    | ``reader_phase`` | str | the reader's phase in the step, ``reader`` or ``idle`` | the first step's (the boot runs in it) |
    <!-- end -->

    ## Starting State

    A board drawn from the mix (``configs/scenarios/hwrng.yaml``), booted
    until the rng has registered and discarded its warm-up numbers: the
    ``hwrng`` kthread and a reader are at /dev/hwrng, the crng is not READY yet
    (on bcm2835-kernelci the generator stays silent until 30 s after boot).

    With ``phases=True`` the reader comes and goes (scenario field ``reader_phases``,
    mix ``configs/scenarios/hwrng-v1.yaml``; kenv.subsystems.phases names the
    source of each schedule): ``none`` a reader throughout (v0), ``rngd``
    rng-tools' rngd reading in bursts of 2-16 reads with 1-4 idle steps
    between (asleep in ``poll()``), ``boot`` one burst of 8-24 reads then
    idle, ``idle`` no reader at all (the ``hwrng`` kthread is the only
    consumer of the FIFO).  Segment lengths are drawn at reset from the
    episode's seed.  An idle reader finishes a read(2) in progress, then
    sleeps until a step with a reader begins; an idle step has no read to
    end it and lasts 5 s.

    ## Episode End

    No terminal state; truncated at 48 steps by the TimeLimit.  A step lasts
    until the reader's ``read(bs)`` returns, or 5 s of simulated time.

    ## Arguments

    ``gym.make("kenv/HwrngWait-v2", actions=None, scenario=None,
    profile="balanced", reward_weights=None, render_mode=None,
    fast_forward=True, phases=False)``; scenario fields: ``platform``, ``preempt``, ``hz``,
    ``silent_s``, ``reader_bs`` (and ``reader_phases`` with ``phases=True``).  ``fast_forward=False`` simulates every poll
    and read in detail (the same trajectories, slower).

    ## Version History

    * v2: same dynamics as v0 (same fingerprint).  The id moved up when the
      variant below took a name of its own, so that the recommended id is the
      newest version of its name and ``gym.make`` does not warn;
      ``kenv/HwrngWait-v0`` stays registered (Gymnasium's notice names v2).
    * ``kenv/HwrngWaitPhased-v0``, was ``kenv/HwrngWait-v1`` (still registered, same
      dynamics; ``phases=True``, kenv.envs.hwrng_wait.PHASED): workloads that change within an episode
      (issue #31): the /dev/hwrng reader comes and goes by a schedule drawn
      at reset (scenario field ``reader_phases``), and the observation gains the
      FIFO level, readers in ``rng_dev_read()``, ``reading_mutex`` waiters,
      time since the last FIFO read and the ``crng_init`` one-hot (entries
      13-19; the previous action moves to 20..).  ``reader_phases: none`` is v0's
      workload.
    * v0, info: every key present with one type at every reset and step (was:
      ``bugs`` and ``rcu_stalls`` lists, now counts with the last report;
      ``None`` for no value yet, now -1.0; step-only keys missing from reset's
      info; raid6's ``window`` None in steps without a window); trajectories
      unchanged.
    * v0: initial version.

    ## References

    * seed 001: 6ca5ebb4f456 "hwrng: bcm2835: Fix hwrng throughput regression"
      (Stefan Wahren), introducing ``hwrng_yield()``.
    * 96cb9d055445 "hwrng: bcm2835 - use hwrng_msleep() instead of cpu_relax()".
    """

    DECISION = WAIT
    VERSIONS = (BASE, PHASED, CONTROL, NULL_CONTROL)

    def __init__(self, *, phases: bool = False, **kwargs):
        super().__init__({"phases": check_phases(phases, BASE.id)}, **kwargs)

    def _make_episode(self, scenario: dict, rng: np.random.Generator) -> _HwrngEpisode:
        return _HwrngEpisode(scenario, rng, self.ff_memory, self._phase_rng)
