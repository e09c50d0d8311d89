"""kenv/Raid6Bench-v3 and its variants: ``modprobe raid6_pq`` under cyclictest, one step per benchmark window."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..drivers.raid6 import KERNEL_VERSIONS
from ..experiments.raid6_cyclictest import resolve_config
from ..kernel.core import PREEMPT_MODELS, Kernel
from ..kernel.jiffies import ALLOWED_HZ
from ..schema import check_phases
from ..sim.engine import NSEC_PER_SEC, Engine
from ..subsystems.common import kernel_reports_info
from ..subsystems.phases import LOAD_SCHEDULES, PhaseSchedule
from ..subsystems.raid6 import BENCHMARK_MODE, LOADS, Raid6Subsystem
from .base import KenvEnv
from .info import (
    LOAD_PHASE, MACHINE, RAID6, SHELL, SIM_TIME, STEP_SIM, WINDOW, WORST_WAKEUP, Info, kernel_reports,
)
from .observation import KERNEL_CONFIG, RAID6_LOAD, RAID6_PROGRESS, RAID6_STATE, Obs, platform_one_hot
from .versions import Version

PLATFORMS = ("x86-avx512-32", "x86-avx2")
#: a step never simulates more than this (guards against a stuck scenario)
STEP_LIMIT_NS = 30 * NSEC_PER_SEC


class _Raid6Episode:
    """One boot: cyclictest on the CPU modprobe will use, then modprobe raid6_pq."""

    def __init__(self, scenario: dict, rng: np.random.Generator, load_balance: bool = False,
                 phase_rng: np.random.Generator | None = None):
        hz = None if scenario["hz"] == "platform" else int(scenario["hz"])
        kernel = None if scenario["kernel"] == "platform" else str(scenario["kernel"])
        plat, hz, kernel = resolve_config(scenario["platform"], scenario["preempt"],
                                          "preempt_disable", hz, kernel)
        self.plat, self.hz, self.kernel_version = plat, hz, kernel
        self.preempt = scenario["preempt"]
        k = self.k = Kernel(Engine(), nr_cpus=plat.nr_cpus, hz=hz, preempt=self.preempt,
                            costs=plat.sched, rng=rng, name=plat.name, load_balance=load_balance,
                            kernel_version=plat.kernel_version)
        # The shell last ran on a random CPU; modprobe starts there (it is idle)
        # and cyclictest probes that CPU: the other CPUs see no change.
        cpu = int(rng.integers(0, plat.nr_cpus))
        t0 = int(rng.integers(0, k.TICK_NSEC))
        self.r6 = Raid6Subsystem(k, plat, cpu=cpu, kernel_version=kernel, load=scenario["load"],
                                 interval_us=int(scenario["cyclictest_interval_us"]), t0=t0,
                                 schedule=None if phase_rng is None
                                 else PhaseSchedule(scenario["load_phases"], phase_rng, LOAD_SCHEDULES))
        # a step ends with its benchmark window (the engine runs only inside steps)
        self.r6.on_progress = k.engine.request_stop
        self._kernels = (k,)
        # the entries of info that an episode never changes
        self._info_head = {"platform": plat.name, "preempt": self.preempt, "hz": hz, "kernel": kernel}

    @property
    def now_s(self) -> float:
        return self.k.now / NSEC_PER_SEC

    def step(self, action: str) -> dict:
        k, r6 = self.k, self.r6
        r6.begin_step(action)
        t_start = k.now
        mp = r6.mp
        if mp.end_ns is not None:   # stepped after the episode ended: one event
            k.run(until=k.now + STEP_LIMIT_NS, stop=lambda: True)
        else:
            # until the window of this step is over, or modprobe exits (on_progress)
            k.run(until=k.now + STEP_LIMIT_NS)
        m = r6.end_step()
        m["terminated"] = r6.done
        m["raw"]["step_sim_s"] = (k.now - t_start) / NSEC_PER_SEC
        return m

    def info(self) -> dict:
        return {**self._info_head, "sim_time_s": self.now_s, **self.r6.info(),
                **kernel_reports_info(self._kernels, self._kernels)}

    def raw_at_reset(self) -> dict:
        return {**Raid6Subsystem.raw_at_reset(), "step_sim_s": 0.0}


#: kenv/Raid6Bench-v3
BASE = Version(
    "kenv/Raid6Bench-v3", max_episode_steps=64, default_scenario="raid6",
    scenario_fields={
        "platform": PLATFORMS,
        "preempt": PREEMPT_MODELS,
        "hz": ("platform",) + ALLOWED_HZ,
        "kernel": ("platform",) + KERNEL_VERSIONS,
        "load": LOADS,
        "cyclictest_interval_us": (100, 250, 500, 1000, 2000, 5000, 10000),
    },
    observation=KERNEL_CONFIG + (
        platform_one_hot(PLATFORMS), RAID6_LOAD,
        Obs(("kernel v5.17 behaviour",), "raid6_choose_gen() of v5.17 (else v5.16)",
            lambda ep: [float(ep.kernel_version == "5.17")], source="lib/raid6/algos.c", fixed=True),
        RAID6_PROGRESS,
    ),
    info=(SHELL + MACHINE + (Info(("kernel",), (str,), "raid6_choose_gen() version (resolved)"), SIM_TIME) + RAID6
          + kernel_reports() + (WORST_WAKEUP, WINDOW, STEP_SIM)))
#: CFS load balancing in the simulated kernel (kenv.kernel.balance; issue #30 part 1)
BALANCED = dataclasses.replace(BASE, id="kenv/Raid6BenchBalanced-v0", kwargs={"load_balance": True})
#: load balancing, and a background job that starts and stops within an episode
#: (scenario field ``load_phases``, issue #31), the benchmarking CPU's runqueue observed
PHASED = BASE.extended(
    "kenv/Raid6BenchPhased-v0", kwargs={"load_balance": True, "phases": True}, default_scenario="raid6-v2",
    phase_fields={"load_phases": tuple(LOAD_SCHEDULES)}, observation=(RAID6_STATE,), info=(LOAD_PHASE,))


class Raid6BenchEnv(KenvEnv):
    """
    ## Description

    ``modprobe raid6_pq`` benchmarks every raid6 syndrome algorithm at module
    load (``raid6_choose_gen()``, lib/raid6/algos.c): for each algorithm a
    *window* spins to the next tick edge and calls ``gen_syndrome()`` (then
    ``xor_syndrome()``) for 16 jiffies, counting calls.  Upstream wraps each
    window in ``preempt_disable()``; the seed patch (Yajun Deng, 2021) uses
    ``migrate_disable()`` so that a cyclictest thread can preempt it.  The
    reviewers objected that a preempted window measures too few calls and can
    make the kernel choose a slower algorithm.  This environment exposes that
    trade-off: each step is one benchmark window, and the agent picks how that
    window is protected.

    The machine is a simulated kernel (:mod:`kenv.kernel`) with the scenario's
    preemption model and HZ; a SCHED_FIFO-95 cyclictest thread probes the CPU
    that modprobe runs on, optionally next to a periodic job pinned there.

    ## Action Space

    ``Discrete(n)`` over the benchmark mode of the next window.  Default:
    ``0: preempt_disable`` (before the patch), ``1: migrate_disable`` (the
    patch).  ``actions=`` may add ``cond_resched`` (``preempt_disable`` inside
    the window, ``cond_resched()`` after it) and ``no_benchmark`` (skip this
    window, as ``CONFIG_RAID6_PQ_BENCHMARK=n``; if every window is skipped the
    first valid algorithm by rank is used).

    ## Observation Space

    ``Box(float32)``:

    <!-- observation: kenv/Raid6Bench-v3 -->
    | index | meaning | min | max | kernel source |
    |---|---|---|---|---|
    | 0-3 | preemption model one-hot: none, voluntary, full, rt | 0 | 1 | ``CONFIG_PREEMPT_*`` |
    | 4 | HZ / 1000 | 0.1 | 1 | ``CONFIG_HZ`` |
    | 5-6 | platform one-hot: x86-avx512-32, x86-avx2 | 0 | 1 | |
    | 7 | a continuous CPU hog is pinned to the benchmarking CPU | 0 | 1 | |
    | 8 | a periodic job (20 ms every 50 ms) is pinned to it | 0 | 1 | |
    | 9 | raid6_choose_gen() of v5.17 (else v5.16) | 0 | 1 | ``lib/raid6/algos.c`` |
    | 10 | benchmark progress: windows done / 18 | 0 | 1 | ``lib/raid6/algos.c raid6_choose_gen(); cyclictest`` |
    | 11 | previous step's worst cyclictest wakeup, log10(1 + us) / 6 (up to 1.5) | 0 | 1.5 | ``lib/raid6/algos.c raid6_choose_gen(); cyclictest`` |
    | 12 | share of the previous window's calls lost to preemption | 0 | 1 | ``lib/raid6/algos.c raid6_choose_gen(); cyclictest`` |
    | 13.. | previous action one-hot (all zero after reset) | 0 | 1 | |
    <!-- end -->

    With ``phases=True`` (Raid6BenchPhased-v0) the CPU's runqueue comes before the
    previous action:

    <!-- observation: kenv/Raid6BenchPhased-v0 -->
    | index | meaning | min | max | kernel source |
    |---|---|---|---|---|
    | 13 | runqueue length of the CPU modprobe runs on / 4 (capped at 1) at the step's end: modprobe, the cyclictest thread if woken, the job if running or runnable | 0 | 1 | ``kernel/sched rq->nr_running`` |
    | 14.. | previous action one-hot (all zero after reset) | 0 | 1 | |
    <!-- end -->

    ## Rewards

    Per step, weighted by the reward profile (:mod:`kenv.envs.reward`):
    ``latency`` = log10(1 + worst cyclictest wakeup in us) / 6 during the step,
    counting a wakeup still waiting for the CPU; at the last step
    ``throughput`` = (gen() speed of the chosen algorithm / the fastest
    algorithm's) x the number of steps: the choice serves the machine from
    then on.  ``entropy``, ``rcu_stall``, ``bug`` and ``spin`` are 0 here.

    ## Info

    The same keys with the same types at every ``reset()`` and ``step()`` (a
    vector env stacks them; checked by tests/test_clients.py).
    Before the first step, step-only entries hold the value in the last column;
    ``-1.0`` (``NO_VALUE``) stands for a float that has no value yet (not NaN:
    Gymnasium's ``check_env`` compares infos with ``==`` and Tianshou rejects NaN).

    <!-- info: kenv/Raid6Bench-v3 -->
    | key | type | meaning | at reset |
    |---|---|---|---|
    | ``scenario`` | dict | the episode's scenario fields (see Arguments): ``int`` where every allowed choice is an integer, else ``str`` (e.g. ``hz``: ``"platform"`` or ``"250"``) | |
    | ``profile`` | str | reward profile name | |
    | ``reward_components`` | dict of float | the step's components (see Rewards) | all 0.0 |
    | ``action_name`` | str | the action taken | ``""`` |
    | ``platform``, ``preempt`` | str | the machine and its preemption model (resolved) | |
    | ``hz`` | int | CONFIG_HZ (resolved) | |
    | ``kernel`` | str | raid6_choose_gen() version (resolved) | |
    | ``sim_time_s`` | float | simulated time since boot | |
    | ``bench_cpu`` | int | the CPU modprobe and cyclictest run on | |
    | ``windows_done`` | int | benchmark windows done | |
    | ``chosen``, ``best`` | str | the algorithm raid6_choose_gen() chose, and the fastest | ``""`` until modprobe exits |
    | ``chosen_gen_mb_s``, ``best_gen_mb_s`` | float | their gen() speeds | -1.0 until then |
    | ``throughput_lost`` | float | 1 - chosen/fastest speed | -1.0 until then |
    | ``dmesg`` | str | the benchmark's dmesg lines, newline-separated | ``""`` until then |
    | ``load_s`` | float | modprobe's run time | -1.0 until then |
    | ``bugs`` | int | kernel BUG reports so far | |
    | ``last_bug`` | str | the last one | ``""`` before any |
    | ``rcu_stalls`` | int | RCU stall reports so far | |
    | ``last_rcu_stall_t_s``, ``last_rcu_stall_cpu`` | float, int | time and CPU of the last one | -1.0, -1 before any |
    | ``worst_wakeup_us`` | float | the step's worst cyclictest wakeup | -1.0 |
    | ``window`` | dict | the benchmark window that ended in the step: ``algo``, ``kind`` (gen/xor) str; ``perf``, ``mb_s`` int; ``lost_fraction`` float | ``""``, ``""``, -1, -1, -1.0 (also in a step without a window) |
    | ``step_sim_s`` | float | simulated time of the step | 0.0 |
    <!-- end -->

    With ``phases=True`` (Raid6BenchPhased-v0) info also has:

    <!-- info: kenv/Raid6BenchPhased-v0 -->
    | key | type | meaning | at reset |
    |---|---|---|---|
    | ``load_phase`` | str | the job's phase in the step, ``job`` or ``off`` | the first step's |
    <!-- end -->

    ## Starting State

    A scenario is drawn from the mix (``configs/scenarios/raid6.yaml``):
    platform, preemption model, HZ, raid6_choose_gen() version, load.
    cyclictest has been running 10 ms when modprobe starts.

    With ``phases=True`` (mix ``configs/scenarios/raid6-v2.yaml``) the
    job of ``load`` starts and stops by a schedule drawn at reset (scenario
    field ``load_phases``, kenv.subsystems.phases: ``none`` the job
    throughout, ``onoff`` 1-4 steps on and 1-4 off as a systemd timer's
    service runs and exits, ``starts`` off then on, ``stops`` on then off).
    A stopping job finishes its period's work (the hog: its chunk) first; a
    started one runs its first period at once.

    ## Episode End

    Terminated when ``modprobe`` exits (after the last window; 18 steps on
    v5.16 with AVX-512, 12 on x86-avx2, fewer on v5.17).  Truncated by the
    TimeLimit at 64 steps (never reached with the packaged platforms).

    ## Arguments

    ``gym.make("kenv/Raid6Bench-v3", actions=None, scenario=None,
    profile="balanced", reward_weights=None, render_mode=None,
    fast_forward=True, load_balance=False)`` (``load_balance``: what
    Raid6BenchBalanced-v0 sets; see Version History); ``scenario``
    is a packaged mix name, a YAML path or a dict of field overrides
    (``platform``, ``preempt``, ``hz``, ``kernel``, ``load``,
    ``cyclictest_interval_us``; ``load_phases`` with ``phases=True``).  ``fast_forward`` is accepted like the
    other envs' and changes nothing (this env has no fast-forward).

    ## Version History

    * v3: same dynamics as v0 (same fingerprint).  The id moved up when the
      variants below took names of their own, so that the recommended id is
      the newest version of its name and ``gym.make`` does not warn;
      ``kenv/Raid6Bench-v0`` stays registered (Gymnasium's notice names v3).
    * ``kenv/Raid6BenchPhased-v0``, was ``kenv/Raid6Bench-v2`` (still registered,
      same dynamics; ``load_balance=True, phases=True``,
      kenv.envs.raid6_bench.PHASED): Raid6BenchBalanced-v0's load
      balancing, and the background job starts and stops
      within the episode (scenario field ``load_phases``); the
      observation gains the benchmarking CPU's runqueue length (entry 13;
      the previous action moves to 14..).  ``load_phases: none`` is
      Raid6BenchBalanced-v0's workload.
    * ``kenv/Raid6BenchBalanced-v0``, was ``kenv/Raid6Bench-v1`` (still
      registered, same dynamics): the kernel balances load (kenv.kernel.balance, ``kernel/sched/fair.c``:
      newidle and idle CPUs' periodic balance; ``can_migrate_task()`` refuses
      cache-hot, pinned and migrate-disabled tasks).  modprobe is not pinned:
      waiting behind the background load outside a window (the windows of
      ``preempt_disable`` end in a reschedule to the load) it is pulled to an
      idle CPU once cache-cold, and the cyclictest probe follows it (a thread
      on each CPU it reaches, as ``-S`` has); inside ``migrate_disable()`` it
      cannot be pulled, so a load keeps sharing its windows.  ``bench_cpu``
      stays the CPU modprobe started on.  Same spaces, info keys and scenario
      fields as v0; ``gym.make("kenv/Raid6BenchBalanced-v0")`` passes
      ``load_balance=True`` (kenv.envs.raid6_bench.BALANCED).

    * v0, info: every key present with one type at every reset and step (was:
      ``bugs`` and ``rcu_stalls`` lists, now counts with the last report;
      ``None`` for no value yet, now -1.0; step-only keys missing from reset's
      info; raid6's ``window`` None in steps without a window); trajectories
      unchanged.
    * v0: initial version.  Before the first release a scheduler fix stopped
      charging CPU time to a task preempted before it was switched in (the
      patched policy's mean return over 40 episodes moved from 11.110 to 11.208).

    ## References

    * seed 004: "lib/raid6: Reduce high latency by using migrate instead of
      preempt" (Yajun Deng, not merged), and its review (Sebastian Siewior,
      Daniel Vacek, Song Liu).
    * 36dacddbf0bd / v5.17 "lib/raid6: skip benchmark of non-chosen xor_syndrome
      functions" (Dirk Mueller).
    """

    DECISION = BENCHMARK_MODE
    KERNEL_OPTIONS = ("load_balance",)
    VERSIONS = (BASE, BALANCED, PHASED)

    def __init__(self, *, phases: bool = False, **kwargs):
        super().__init__({"phases": check_phases(phases, BASE.id)}, **kwargs)

    def _make_episode(self, scenario: dict, rng: np.random.Generator) -> _Raid6Episode:
        return _Raid6Episode(scenario, rng, self.load_balance, self._phase_rng)

