"""kenv/RandomMix-v2: where random.c runs the fast-pool mix, under qperf tcp_lat."""

from __future__ import annotations

import numpy as np

from ..schema import check_phases
from ..sim.engine import NSEC_PER_MSEC, NSEC_PER_SEC
from ..subsystems.phases import TRAFFIC_SCHEDULES, PhaseSchedule
from ..subsystems.qperf import DEFERRAL, QPERF_SCENARIO_FIELDS, QperfSubsystem, resolve_machine
from .base import FastForwardMemory, KenvEnv
from .info import (
    BITS_CREDITED, HOSTS_POOL, MACHINE, MSG_SIZE, QPERF_STEP, SHELL, SIM_TIME, STEP_SIM, TRAFFIC_PHASE, kernel_reports,
)
from .observation import KERNEL_CONFIG, QPERF_CONFIG, QPERF_REGRESSION, QPERF_STATE, Obs
from .versions import Version


class _RandomMixEpisode:
    def __init__(self, scenario: dict, rng: np.random.Generator, ff: FastForwardMemory | None,
                 irq_threads: bool = False, phase_rng: np.random.Generator | None = None):
        self.plat, self.preempt = resolve_machine(scenario)
        self.hz = self.plat.hz
        self.q = QperfSubsystem(self.plat, preempt=self.preempt, rng=rng, msg_size=scenario["msg_size"],
                                threshold=int(scenario["threshold"]),
                                step_ns=int(float(scenario["step_ms"]) * NSEC_PER_MSEC),
                                learned=ff and ff.qperf, irq_threads=irq_threads,
                                schedule=None if phase_rng is None
                                else PhaseSchedule(scenario["traffic_phases"], phase_rng, TRAFFIC_SCHEDULES))
        self.last_bug = 0.0
        self.bits = self.q.bits()   # bits credited on both hosts so far (the simulation runs in step())
        # the entries of info that an episode never changes
        self._info_head = {"platform": self.plat.name, "preempt": self.preempt, "hz": self.hz}

    @property
    def now_s(self) -> float:
        return self.q.wl.engine.now / NSEC_PER_SEC

    def step(self, deferral: str) -> dict:
        bits0, bugs0, t0 = self.bits, self.q.bugs(), self.q.wl.engine.now
        m = self.q.step(deferral)
        n_hosts = len(self.q.randoms)
        self.bits = self.q.bits()
        bits, bugs = self.bits - bits0, self.q.bugs() - bugs0
        self.last_bug = float(bugs > 0)
        m.update(entropy=bits / (256.0 * n_hosts), bug=float(bugs), terminated=bugs > 0)
        m["raw"].update(bits_credited=bits, step_sim_s=(self.q.wl.engine.now - t0) / NSEC_PER_SEC)
        return m

    def info(self) -> dict:
        return {**self._info_head, "sim_time_s": self.now_s, **self.q.info()}

    def raw_at_reset(self) -> dict:
        return {**QperfSubsystem.RAW_AT_RESET, "bits_credited": 0, "step_sim_s": 0.0}


#: kenv/RandomMix-v2
BASE = Version(
    "kenv/RandomMix-v2", max_episode_steps=32, default_scenario="randommix", scenario_fields=QPERF_SCENARIO_FIELDS,
    observation=KERNEL_CONFIG + (
        QPERF_CONFIG, QPERF_REGRESSION,
        Obs(("crng progress",), "crng progress: credited bits / 256, mean over both hosts",
            lambda ep: [min(1.0, ep.bits / (256.0 * len(ep.q.randoms)))],
            source="drivers/char/random.c input_pool.init_bits"),
        Obs(("previous step BUG",), "the previous step hit a kernel BUG", lambda ep: [ep.last_bug],
            source="BUG: sleeping function called from invalid context"),
    ),
    info=(SHELL + MACHINE + (SIM_TIME, MSG_SIZE) + HOSTS_POOL
          + (BITS_CREDITED.with_meaning("bits credited on both hosts in the step"),)
          + kernel_reports("client and server", "client and server") + QPERF_STEP + (STEP_SIM,)))
#: PREEMPT_RT's forced interrupt threads on the rt scenarios (kenv.kernel.irq; issue
#: #30 part 3), and traffic that changes size or pauses within an episode (scenario
#: field ``traffic_phases``, issue #31), the interrupt rate and the fast pool's
#: mixes observed
PHASED = BASE.extended(
    "kenv/RandomMixPhased-v0", kwargs={"irq_threads": True, "phases": True}, default_scenario="randommix-v1",
    phase_fields={"traffic_phases": tuple(TRAFFIC_SCHEDULES)}, observation=(QPERF_STATE,), info=(TRAFFIC_PHASE,))


class RandomMixEnv(KenvEnv):
    """
    ## Description

    Every device interrupt feeds a per-CPU ``fast_pool`` in random.c
    (``add_interrupt_randomness()``); after 1024 interrupts, or a second, the
    pool is mixed into the input pool and entropy is credited toward crng
    READY.  Where that mix runs is the decision: in the hard IRQ (the
    original; a BUG on PREEMPT_RT), in a high-priority kworker
    (``queue_work_on``, 58340f8e952b: a ~10% qperf ``tcp_lat`` regression on
    40 Gb/s IPoIB), or from the next timer tick (the patch, 748bc4dd9e66).
    Two simulated x86-ib40g hosts run a qperf ``tcp_lat`` ping-pong; their
    NIC interrupts feed the fast pools; each step is the next ``step_ms`` of
    that one ongoing run (a round trip in flight at a step boundary completes,
    and is counted, in the next step).

    ## Action Space

    ``Discrete(n)`` over the deferral of ``mix_interrupt_randomness``.
    Default: ``0: workqueue`` (before the patch), ``1: timer`` (the patch).
    ``actions=`` may add ``schedule_work`` (normal-priority system queue) and
    ``hardirq`` (the original).

    ## Observation Space

    ``Box(float32)``:

    <!-- observation: kenv/RandomMix-v2 -->
    | index | meaning | min | max | kernel source |
    |---|---|---|---|---|
    | 0-3 | preemption model one-hot: none, voluntary, full, rt | 0 | 1 | ``CONFIG_PREEMPT_*`` |
    | 4 | HZ / 1000 | 0.1 | 1 | ``CONFIG_HZ`` |
    | 5 | log2(msg_size / 4 KiB) / 8 | 0 | 1 | |
    | 6 | mix threshold is 64 (before 534d2eaf1970) | 0 | 1 | |
    | 7 | previous step's tcp_lat regression x 5 (capped at 1) | 0 | 1 | |
    | 8 | crng progress: credited bits / 256, mean over both hosts | 0 | 1 | ``drivers/char/random.c input_pool.init_bits`` |
    | 9 | the previous step hit a kernel BUG | 0 | 1 | ``BUG: sleeping function called from invalid context`` |
    | 10.. | previous action one-hot (all zero after reset) | 0 | 1 | |
    <!-- end -->

    With ``phases=True`` (RandomMixPhased-v0) the interrupt rate and the mixes come
    before the previous action:

    <!-- observation: kenv/RandomMixPhased-v0 -->
    | index | meaning | min | max | kernel source |
    |---|---|---|---|---|
    | 10 | NIC receive interrupts on the client's qperf CPU in the last step (its round trips x the message's interrupts), log10(1 + per ms) / 3 | 0 | 1 | ``drivers/char/random.c add_interrupt_randomness()`` |
    | 11 | fast-pool mixes in the last step (both hosts) / 4, capped at 1 | 0 | 1 | ``drivers/char/random.c add_interrupt_randomness()`` |
    | 12.. | previous action one-hot (all zero after reset) | 0 | 1 | |
    <!-- end -->

    ``fast_pool.count`` itself is not observed: the simulator counts a
    message's interrupts in bulk, so at a step's end it is not the value
    the kernel would hold (and a fast-forward counts them later still).

    ## Rewards

    Per step: ``latency`` = the step's mean tcp_lat / the undisturbed
    latency of that size - 1 (0.10 = 10% worse); ``throughput`` = messages
    completed / messages an undisturbed run completes; ``entropy`` = bits
    credited on both hosts / (256 x 2); ``bug`` = kernel BUGs ("sleeping
    function called from invalid context").  ``rcu_stall`` and ``spin`` are 0.

    ## Info

    The same keys with the same types at every ``reset()`` and ``step()`` (a
    vector env stacks them; checked by tests/test_clients.py).
    Before the first step, step-only entries hold the value in the last column;
    ``-1.0`` (``NO_VALUE``) stands for a float that has no value yet (not NaN:
    Gymnasium's ``check_env`` compares infos with ``==`` and Tianshou rejects NaN).

    <!-- info: kenv/RandomMix-v2 -->
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
    | ``crng_init`` | int64 array (2,) | crng state of client, server: 0 EMPTY, 1 EARLY, 2 READY | |
    | ``bits_credited_total`` | int64 array (2,) | bits credited so far, client, server | |
    | ``crng_ready_s`` | float64 array (2,) | when each crng became READY | -1.0 until then |
    | ``bits_credited`` | int | bits credited on both hosts in the step | 0 |
    | ``bugs`` | int | kernel BUG reports so far (client and server) | |
    | ``last_bug`` | str | the last one | ``""`` before any |
    | ``rcu_stalls`` | int | RCU stall reports so far (client and server) | |
    | ``last_rcu_stall_t_s``, ``last_rcu_stall_cpu`` | float, int | time and CPU of the last one | -1.0, -1 before any |
    | ``latency_us`` | float | the step's mean tcp_lat | -1.0 |
    | ``clean_latency_us`` | float | the undisturbed tcp_lat of the size | -1.0 |
    | ``round_trips`` | int | qperf round trips completed in the step | 0 |
    | ``mixes`` | int | fast-pool mixes in the step (both hosts) | 0 |
    | ``step_sim_s`` | float | simulated time of the step | 0.0 |
    <!-- end -->

    With ``phases=True`` (RandomMixPhased-v0) info also has:

    <!-- info: kenv/RandomMixPhased-v0 -->
    | key | type | meaning | at reset |
    |---|---|---|---|
    | ``traffic_phase`` | str | the step's message size (``64 KiB``) or ``pause`` | the first step's |
    <!-- end -->

    ## Starting State

    Both hosts booted, crng empty, qperf connected; a scenario is drawn from
    ``configs/scenarios/randommix.yaml`` (preemption model, HZ, message size,
    mix threshold).

    With ``phases=True`` (mix ``configs/scenarios/randommix-v1.yaml``) the
    traffic changes within the episode by a schedule drawn at reset
    (scenario field ``traffic_phases``, kenv.subsystems.phases): ``none``
    ``msg_size`` throughout (v0); ``sweep`` one step of the seed's own sweep
    (``-oo msg_size:4K:1024K:*2``): ``msg_size`` for 1-31 steps, a step
    without traffic, then twice the size (none after 1024K); ``pauses``
    traffic for 2-8 steps, none for 1-3, and again.  A round trip in flight
    at a change completes at its size; a step without traffic has
    ``latency`` and ``throughput`` 0 (``latency_us`` -1.0).  Entry 5 stays
    the scenario's ``msg_size``.

    ## Episode End

    Terminated on a kernel BUG (with its penalty); truncated at 32 steps by
    the TimeLimit.

    ## Arguments

    ``gym.make("kenv/RandomMix-v2", actions=None, scenario=None,
    profile="balanced", reward_weights=None, render_mode=None,
    fast_forward=True, irq_threads=False, phases=False)``; scenario fields: ``platform``,
    ``preempt``, ``hz``, ``msg_size``, ``threshold``, ``step_ms`` (and
    ``traffic_phases`` with ``phases=True``).
    ``fast_forward=False`` simulates every round trip in detail (the same
    trajectories, slower).  ``irq_threads=True``: on the scenarios with
    ``preempt`` "rt" the kernels
    run PREEMPT_RT's forced interrupt threads (kenv.kernel.irq): the NIC's
    handler and NET_RX in ``irq/N-mlx4-ib0`` at SCHED_FIFO 50, the mix timer
    in ``ksoftirqd/N`` (the platform's 5.15-rt has no ``ktimers``), each a
    wakeup and context switches on qperf's CPU; the qperf fast-forward
    skips only steady round trips there (each with its thread's run), every
    round trip with a mix in detail.  Other models are unchanged.

    ## Version History

    * v2: same dynamics as v0 (same fingerprint).  The id moved up when the
      variant below took a name of its own, so that the recommended id is the
      newest version of its name and ``gym.make`` does not warn;
      ``kenv/RandomMix-v0`` stays registered (Gymnasium's notice names v2).
    * ``kenv/RandomMixPhased-v0``, was ``kenv/RandomMix-v1`` (still registered,
      same dynamics; ``irq_threads=True, phases=True``,
      kenv.envs.random_mix.PHASED): on the ``rt`` scenarios the
      kernels run PREEMPT_RT's forced interrupt threads (issue #30;
      kenv.kernel.irq): the NIC handler and NET_RX in
      ``irq/N-mlx4-ib0`` (SCHED_FIFO 50), the mix timer in ``ksoftirqd/N``
      (5.15-rt), each a wakeup and context switches on qperf's CPU, and NAPI
      batches grow; other preemption models are unchanged.  And workloads
      that change within an episode (issue #31): qperf's traffic changes size
      or pauses by a schedule drawn at reset (scenario field
      ``traffic_phases``), and the observation gains the last step's NIC
      interrupt rate and fast-pool mixes (entries 10-11; the previous action
      moves to 12..).  ``traffic_phases: none`` is v0's workload.
    * v0, info: every key present with one type at every reset and step (was:
      ``bugs`` and ``rcu_stalls`` lists, now counts with the last report;
      ``None`` for no value yet, now -1.0; step-only keys missing from reset's
      info; raid6's ``window`` None in steps without a window); trajectories
      unchanged.
    * v0: initial version.  Before the first release the ping-pong was made to
      run on across steps instead of restarting at each step, which moves the
      per-step figures a little (returns within their intervals).  The latency
      reference (the undisturbed round trip of the size) is known from the first
      step on; it used to be measured by the episode itself, and a step that
      ended before that (with threshold 64, often the first) counted no
      regression.

    ## References

    * seed 000: 748bc4dd9e66 "random: use expired per-cpu timer rather than wq
      for mixing fast pool" (Jason A. Donenfeld), reported by Sherry Yang.
    * 58340f8e952b "random: defer fast pool mixing to worker";
      534d2eaf1970 "random: do crng pre-init loading in worker rather than irq".
    """

    DECISION = DEFERRAL
    KERNEL_OPTIONS = ("irq_threads",)
    VERSIONS = (BASE, PHASED)

    def __init__(self, *, phases: bool = False, **kwargs):
        super().__init__({"phases": check_phases(phases, BASE.id)}, **kwargs)

    def _make_episode(self, scenario: dict, rng: np.random.Generator) -> _RandomMixEpisode:
        return _RandomMixEpisode(scenario, rng, self.ff_memory, irq_threads=self.irq_threads,
                                 phase_rng=self._phase_rng)

