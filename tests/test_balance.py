"""CFS load balancing, from the kernel's rules (kernel/sched/fair.c; kenv.kernel.balance).

A CFS task that waits on a busy CPU is pulled by a CPU that goes idle
(newidle_balance()), unless can_migrate_task() refuses it: cache-hot
(task_hot(): it ran less than sysctl_sched_migration_cost = 500000 ns ago),
pinned by affinity, or inside migrate_disable().  Idle CPUs balance
periodically every sd_weight ms (sd_init()), which here is 2 ms = 1 jiffy at
HZ=250 on 2 CPUs: the tick at 4 ms.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kenv.errors import ConfigError
from kenv.kernel import (
    BLOCK, SCHED_FIFO, Kernel, Run, SchedCosts, migrate_disable, migrate_enable,
)
from kenv.kernel.balance import (
    CACHE_NICE_TRIES, SYSCTL_SCHED_MIGRATION_COST, can_migrate_task, task_hot,
)
from kenv.kernel.core import TASK_RUNNABLE, set_cpus_allowed_ptr
from kenv.sim.engine import Engine

COSTS = SchedCosts(wakeup_ns=2_000, context_switch_ns=3_000)
US = 1_000
MS = 1_000_000
CHUNK = 50 * US


def make_kernel(nr_cpus=2, preempt="full", hz=250, load_balance=True):
    return Kernel(Engine(), nr_cpus=nr_cpus, hz=hz, preempt=preempt, costs=COSTS,
                  load_balance=load_balance)


def worker(total_ns, seen, *, disable_migration=False):
    """A CFS body that runs ``total_ns`` in chunks, noting its CPU after each."""
    def body(task):
        if disable_migration:
            migrate_disable(task)
        for _ in range(total_ns // CHUNK):
            yield Run(CHUNK)
            seen.append((task.k.now, task.cpu))
        if disable_migration:
            migrate_enable(task)
    return body


def run_for(ns):
    def body(task):
        yield Run(ns)
    return body


def scenario(idle_at_ns, *, allowed=(0, 1), disable_migration=False, load_balance=True):
    """CPU 0: CFS task ``A`` (10 ms of work) is preempted at 1 ms by a
    SCHED_FIFO task that runs 5 ms.  CPU 1: a pinned CFS task runs until
    ``idle_at_ns`` and exits, so CPU 1 goes idle then (newidle balance)."""
    k = make_kernel(load_balance=load_balance)
    seen = []
    a = k.kthread_run(worker(10 * MS, seen, disable_migration=disable_migration), "A",
                      cpus_allowed=allowed)
    k.kthread_run(run_for(idle_at_ns - COSTS.context_switch_ns), "B", cpu=1)
    k.engine.at(1 * MS, lambda: k.kthread_run(run_for(5 * MS), "rt", cpu=0, policy=SCHED_FIFO,
                                              rt_priority=50))
    return k, a, seen


def test_constants_come_from_the_kernel_source():
    assert SYSCTL_SCHED_MIGRATION_COST == 500_000      # fair.c sysctl_sched_migration_cost
    assert CACHE_NICE_TRIES == 1                       # topology.c sd_init(), LLC domain
    k = make_kernel(nr_cpus=32)
    assert k.lb.interval == 8                          # 32 ms at HZ=250: msecs_to_jiffies(sd_weight)


def test_waiting_cfs_task_is_pulled_by_a_cpu_that_goes_idle():
    # A waits from 1 ms; CPU 1 goes idle at 2 ms: A last ran 1 ms ago (cold)
    k, a, seen = scenario(2 * MS)
    k.run(until=2 * MS + 100 * US)
    assert a.cpu == 1
    k.run()
    assert {c for t, c in seen if t < 1 * MS} == {0}
    assert {c for t, c in seen if t > 2 * MS} == {1}
    # it finished on CPU 1 while the FIFO task still held CPU 0 (until 6 ms)
    assert seen[-1][0] < 12 * MS


def test_without_load_balancing_it_waits_for_its_cpu():
    k, a, seen = scenario(2 * MS, load_balance=False)
    k.run()
    assert {c for _, c in seen} == {0}
    assert seen[-1][0] > 15 * MS          # 1 ms + the FIFO task's 5 ms + 9 ms


def test_cache_hot_task_is_not_pulled_by_newidle():
    # CPU 1 goes idle at 1.2 ms: A ran 0.2 ms ago < sysctl_sched_migration_cost
    k, a, seen = scenario(1200 * US)
    k.run(until=1300 * US)
    assert k.cpus[1].curr is None and a.state == TASK_RUNNABLE and a.cpu == 0
    assert task_hot(k, a, k.now)
    # ... until the idle CPU's periodic balance at the 4 ms tick, when A is cold
    k.run(until=4 * MS - 1)
    assert a.cpu == 0
    k.run(until=4 * MS + 100 * US)
    assert a.cpu == 1 and not task_hot(k, a, k.now)


def test_pinned_task_is_not_pulled():
    k, a, seen = scenario(2 * MS, allowed=(0,))
    k.run()
    assert {c for _, c in seen} == {0}
    assert seen[-1][0] > 15 * MS


def test_task_inside_migrate_disable_is_not_pulled():
    k, a, seen = scenario(2 * MS, disable_migration=True)
    k.run(until=5 * MS)   # past the newidle at 2 ms and the periodic balance at 4 ms
    assert a.state == TASK_RUNNABLE and a.cpu == 0 and a.migrate_disable
    k.run()
    assert {c for _, c in seen} == {0}


def test_can_migrate_task_rules_directly():
    k, a, seen = scenario(2 * MS)
    k.run(until=1 * MS + 100 * US)          # A waits on CPU 0, ran 0.1 ms ago
    src = k.cpus[0]
    assert a.state == TASK_RUNNABLE
    assert not can_migrate_task(k, a, src, 1)                         # hot
    assert can_migrate_task(k, a, src, 1, nr_balance_failed=CACHE_NICE_TRIES + 1)
    a.cpus_allowed = (0,)
    assert not can_migrate_task(k, a, src, 1, nr_balance_failed=9)    # affinity
    a.cpus_allowed = (0, 1)
    a.migrate_disable = 1
    assert not can_migrate_task(k, a, src, 1, nr_balance_failed=9)    # migrate_disable()
    a.migrate_disable = 0
    assert not can_migrate_task(k, src.curr, src, 1, nr_balance_failed=9)   # running


def test_set_cpus_allowed_ptr_moves_a_queued_task_and_checks_its_input():
    k, a, seen = scenario(10 * MS, load_balance=False)
    k.run(until=1 * MS + 100 * US)
    assert a.state == TASK_RUNNABLE and a.cpu == 0
    set_cpus_allowed_ptr(a, [1])
    assert a.cpu == 1 and a.pinned and a in k.cpus[1].cfs_queue and a not in k.cpus[0].cfs_queue
    with pytest.raises(ConfigError, match="cpus_allowed"):
        set_cpus_allowed_ptr(a, [2])
    with pytest.raises(ConfigError, match="cpus_allowed"):
        set_cpus_allowed_ptr(a, [])


# ------------------------------------------------------------------- invariants

task_spec = st.tuples(
    st.sampled_from(["cfs", "cfs", "fifo"]),
    st.sets(st.integers(0, 3), min_size=1, max_size=4),   # cpus_allowed
    st.lists(st.tuples(st.integers(10, 3000), st.integers(0, 3000)), min_size=1, max_size=6),
    st.booleans(),                                         # migrate_disable around each burst
)


@settings(max_examples=60, deadline=None)
@given(specs=st.lists(task_spec, min_size=1, max_size=7),
       preempt=st.sampled_from(["voluntary", "full"]))
def test_no_task_runs_outside_its_mask_or_on_two_cpus(specs, preempt):
    """Whatever runs: a task is only ever current on a CPU of its
    cpus_allowed; never current on two CPUs, never queued twice; a task does
    not change CPU inside migrate_disable(); every task finishes."""
    k = make_kernel(nr_cpus=4, preempt=preempt)
    tasks = []
    violations = []

    def body_for(bursts, md):
        def body(task):
            for run_us, sleep_us in bursts:
                if md:
                    migrate_disable(task)
                    cpu = task.cpu
                yield Run(run_us * US)
                if md:
                    if task.cpu != cpu:
                        violations.append(f"{task.comm} moved inside migrate_disable")
                    migrate_enable(task)
                if sleep_us:
                    k.engine.at(k.now + sleep_us * US, k.wake_up_process, task)
                    yield BLOCK
        return body

    for i, (kind, allowed, bursts, md) in enumerate(specs):
        mask = sorted(allowed)
        if kind == "fifo":
            tasks.append(k.kthread_run(body_for(bursts, md), f"f{i}", cpu=mask[0], policy=SCHED_FIFO,
                                       rt_priority=10 + i))
        else:
            tasks.append(k.kthread_run(body_for(bursts, md), f"c{i}", cpus_allowed=mask))

    def check():
        seen = set()
        for rq in k.cpus.values():
            for p in ([rq.curr] if rq.curr is not None else []) + rq.rt_queue + rq.cfs_queue:
                if p.pid in seen:
                    violations.append(f"{p.comm} on two runqueues")
                seen.add(p.pid)
                if p.cpus_allowed is not None and rq.id not in p.cpus_allowed:
                    violations.append(f"{p.comm} on CPU {rq.id} outside {p.cpus_allowed}")
                if p.cpu != rq.id:
                    violations.append(f"{p.comm}.cpu {p.cpu} but on runqueue {rq.id}")
        if any(t.state != "X" for t in tasks):
            k.engine.at(k.now + 20 * US, check)

    k.engine.at(0, check)
    k.run(until=2_000 * MS)
    assert not violations, violations[:5]
    assert all(t.state == "X" for t in tasks)


# ------------------------------------------------------------------ env versions

def test_raid6bench_balanced_runs_a_balancing_kernel_and_the_others_only_when_asked():
    import gymnasium as gym

    import kenv  # noqa: F401  (registers the envs)
    from kenv.envs.registration import ENVS, VERSIONS

    ids = [e[0] for e in ENVS]
    assert VERSIONS["kenv/Raid6BenchBalanced-v0"].kwargs == {"load_balance": True}
    # KernelBoot-v0 is the boot-time version: no load balancing (its fast-forwards
    # would decline every stretch); load_balance=True still turns it on
    cases = (("kenv/Raid6Bench-v3", {}, False), ("kenv/Raid6BenchBalanced-v0", {}, True),
             ("kenv/Kernel-v3", {}, False), ("kenv/KernelBoot-v0", {}, False),
             ("kenv/Kernel-v3", {"load_balance": True}, True))
    for env_id, kwargs, on in cases:
        assert env_id in ids
        env = gym.make(env_id, **kwargs)
        try:
            env.reset(seed=0)
            assert (env.unwrapped._episode.k.lb is not None) is on, (env_id, kwargs)
        finally:
            env.close()


@pytest.mark.parametrize("env_id", ["kenv/RandomMix-v2", "kenv/HwrngWait-v2"])
def test_load_balance_where_no_version_has_it_is_a_clear_error(env_id):
    import gymnasium as gym

    import kenv  # noqa: F401

    with pytest.raises(ConfigError, match="load_balance"):
        gym.make(env_id, load_balance=True)


@pytest.mark.parametrize("seed", [4, 7])
def test_balancing_kernel_env_is_the_same_with_fast_forward_on_and_off(seed):
    """The fast-forwards cannot see a balance (a skipped stretch hides the
    moments a CPU goes idle), so a Kernel env with load_balance=True runs
    without them: fast_forward on and off give the same trajectory (seeds 4
    and 7 differed when they ran)."""
    import gymnasium as gym

    import kenv  # noqa: F401

    def trajectory(ff):
        env = gym.make("kenv/Kernel-v3", load_balance=True, fast_forward=ff)
        obs, info = env.reset(seed=seed)
        env.action_space.seed(seed)
        out, done = [obs.tobytes()], False
        while not done:
            obs, r, term, trunc, info = env.step(env.action_space.sample())
            out.append((obs.tobytes(), r, repr(sorted(info.items()))))
            done = term or trunc
        env.close()
        return out

    assert trajectory(True) == trajectory(False)


# ------------------------------------------------------------ active balancing
def _pd_scenario(active_balance: bool):
    """CPU 0: CFS task ``A`` runs a 40 ms preempt-disabled section, then 1 ms
    more; a SCHED_FIFO task pinned to CPU 0 wakes at 1 ms and waits behind the
    section.  CPU 1 is idle and balances every tick (4 ms)."""
    from kenv.kernel import preempt_disable, preempt_enable

    k = Kernel(Engine(), nr_cpus=2, hz=250, preempt="full", costs=COSTS, load_balance=True,
               active_balance=active_balance)
    seen, rt_ran = [], []

    def body(task):
        preempt_disable(task)
        yield Run(40 * MS)
        seen.append((k.now, task.cpu))
        yield from preempt_enable(task)
        yield Run(1 * MS)
        seen.append((k.now, task.cpu))

    def rt(task):
        rt_ran.append(k.now)
        yield Run(10 * US)

    a = k.kthread_run(body, "A", cpus_allowed=(0, 1))
    k.engine.at(1 * MS, lambda: k.kthread_run(rt, "rt", cpu=0, policy=SCHED_FIFO, rt_priority=95,
                                              cpus_allowed=(0,)))
    k.run(until=60 * MS)
    return k, a, seen, rt_ran


def test_running_task_with_rt_waiting_is_pushed_by_active_balance_after_the_section():
    """need_active_balance(): the idle CPU's periodic balances fail on the
    running task (nr_balance_failed 1..4); past cache_nice_tries + 2 the CPU
    stopper moves it at the preempt_enable() that ends the section, not
    inside it (active_load_balance_cpu_stop())."""
    k, a, seen, rt_ran = _pd_scenario(True)
    assert seen[0][1] == 0 and seen[0][0] >= 40 * MS      # the section ran on CPU 0 to its end
    assert seen[1][1] == 1                                # then the stopper pushed A to CPU 1
    assert rt_ran and rt_ran[0] >= 40 * MS                # the RT task waited for the section
    assert k.lb.nr_balance_failed[1] == 0 and k.lb.push_cpu == [None, None]


def test_running_task_stays_without_active_balance():
    k, a, seen, rt_ran = _pd_scenario(False)
    assert [c for _, c in seen] == [0, 0]
