"""Mechanism tests of the simulated kernel core (timer wheel, sleeps, preemption, RCU).

The expected values come from the kernel source (kernel/time/timer.c,
include/linux/jiffies.h, kernel/rcu/tree_stall.h), not from the simulator.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kenv.errors import ConfigError
from kenv.kernel import (
    BLOCK, SCHED_FIFO, Kernel, Run, RunUntil, SchedCosts, complete_all, completion, cond_resched,
    migrate_disable, migrate_enable, msecs_to_jiffies, preempt_disable, preempt_enable,
    schedule_timeout, timer_list, timer_pending, usleep_range,
    wait_for_completion_interruptible_timeout,
)
from kenv.kernel.timer import calc_wheel_index
from kenv.sim.engine import FOREVER, Engine, SimulationError

COSTS = SchedCosts(wakeup_ns=2_000, context_switch_ns=3_000)


def make_kernel(hz=250, preempt="voluntary", nr_cpus=2, **kw):
    return Kernel(Engine(), nr_cpus=nr_cpus, hz=hz, preempt=preempt, costs=COSTS, **kw)


# ------------------------------------------------------------------ timer wheel

@pytest.mark.parametrize("hz", [100, 250, 1000])
def test_expires_jiffies_fires_at_next_tick_and_plus_one_at_next_next(hz):
    k = make_kernel(hz=hz)
    k.engine.run(until=k.TICK_NSEC * 10 + 12345)  # somewhere inside a jiffy
    j = k.jiffies
    fired = {}
    for delta in (0, 1):
        t = timer_list(lambda tm: fired.setdefault(tm.data, k.jiffies), data=delta)
        t.expires = j + delta
        k.timers.add_timer_on(t, 0)
        assert timer_pending(t)
    k.engine.run()
    assert fired[0] == j + 1
    assert fired[1] == j + 2


@pytest.mark.parametrize("delta", [63, 100, 251, 400, 503])
def test_level1_timers_round_up_to_a_multiple_of_8(delta):
    k = make_kernel(hz=250)
    k.engine.run(until=k.TICK_NSEC * 3 + 5)
    j = k.jiffies
    out = []
    t = timer_list(lambda tm: out.append(k.jiffies))
    t.expires = j + delta
    k.timers.add_timer_on(t, 1)
    k.engine.run()
    (fired,) = out
    assert fired % 8 == 0
    assert j + delta < fired <= j + delta + 8


def test_calc_wheel_index_levels_follow_kernel_geometry():
    # LVL_START(1) = 63, LVL_START(2) = 504, LVL_START(3) = 4032
    assert calc_wheel_index(1000 + 62, 1000, 250)[0] == 0
    assert calc_wheel_index(1000 + 63, 1000, 250)[0] == 1
    assert calc_wheel_index(1000 + 503, 1000, 250)[0] == 1
    assert calc_wheel_index(1000 + 504, 1000, 250)[0] == 2
    assert calc_wheel_index(1000 + 4032, 1000, 250)[0] == 3
    # level 2 rounds up to a multiple of 64
    lvl, bucket = calc_wheel_index(1000 + 600, 1000, 250)
    assert lvl == 2 and bucket % 64 == 0 and bucket > 1600


@given(st.integers(0, 10**6), st.integers(0, 20000))
def test_timers_never_fire_early(clk, delta):
    lvl, bucket = calc_wheel_index(clk + delta, clk, 250)
    assert bucket > clk + delta - 0  # strictly after the expiry jiffy
    # and never later than one granularity unit of its level past it
    assert bucket <= clk + delta + 8 ** lvl


@pytest.mark.parametrize("hz,ms,expected", [
    (100, 1000, 100), (100, 20, 2), (100, 1, 1), (100, 15, 2),
    (250, 1000, 250), (250, 20, 5), (250, 1, 1), (250, 3, 1), (250, 5, 2),
    (1000, 1000, 1000), (1000, 20, 20), (1000, 1, 1),
])
def test_msecs_to_jiffies_rounds_up(hz, ms, expected):
    assert msecs_to_jiffies(ms, hz) == expected


def test_bad_hz_and_preempt_model_name_allowed_values():
    with pytest.raises(ConfigError, match="100, 250, 300, 1000"):
        make_kernel(hz=200)
    with pytest.raises(ConfigError, match="none, voluntary, full, rt"):
        make_kernel(preempt="lazy")


# ------------------------------------------------------------------- sleeping

@pytest.mark.parametrize("hz", [100, 250, 1000])
def test_schedule_timeout_1_sleeps_more_than_one_and_at_most_two_jiffies(hz):
    k = make_kernel(hz=hz)
    sleeps = []

    def body(task):
        yield Run(123_457)  # start at an arbitrary point inside a jiffy
        for _ in range(6):
            t0 = k.now
            yield from schedule_timeout(task, 1)
            sleeps.append(k.now - t0)

    k.kthread_run(body, "sleeper", cpu=0)
    k.engine.run()
    tick = k.TICK_NSEC
    for s in sleeps:
        # woken at the tick + wakeup + context switch
        assert tick < s <= 2 * tick + COSTS.wakeup_ns + COSTS.context_switch_ns
    # after the first sleep the task wakes at a tick and sleeps again: 2 jiffies per cycle
    for s in sleeps[1:]:
        assert abs(s - 2 * tick) <= COSTS.wakeup_ns + COSTS.context_switch_ns


def test_usleep_range_wakes_at_max_on_an_idle_cpu():
    k = make_kernel()
    woke = []

    def body(task):
        t0 = k.now
        yield from usleep_range(task, 100, 200)
        woke.append(k.now - t0)

    k.kthread_run(body, "sleeper", cpu=0)
    k.engine.run()
    assert 200_000 <= woke[0] <= 200_000 + COSTS.wakeup_ns + COSTS.context_switch_ns


def test_completion_timeout_and_complete_all():
    k = make_kernel(hz=100)
    dying = completion()
    results = []

    def waiter(task):
        r = yield from wait_for_completion_interruptible_timeout(task, dying, 5)
        results.append(("timeout", r, k.jiffies))
        r = yield from wait_for_completion_interruptible_timeout(task, dying, 1000)
        results.append(("completed", r, k.now))

    k.kthread_run(waiter, "w", cpu=0)
    k.engine.at(200_000_000, complete_all, k, dying)
    k.engine.run()
    assert results[0][1] == 0
    assert results[1][0] == "completed" and results[1][1] >= 1
    assert 200_000_000 <= results[1][2] < 200_000_000 + 10 * COSTS.context_switch_ns


# ------------------------------------------------------------------ preemption

def _rt_wakeup_latency(preempt, section):
    """An RT task wakes every ms while a kernel task spins 50 ms in ``section``."""
    k = make_kernel(preempt=preempt, hz=250, nr_cpus=1)
    lat = []

    def cyclic(task):
        nxt = 1_000_000
        while nxt < 60_000_000:
            k.engine.at(nxt, k.hardirq, 0, 1_000, k.wake_up_process, task)
            yield BLOCK
            lat.append(k.now - nxt)
            yield Run(5_000)
            nxt += 1_000_000
            while nxt <= k.now:
                nxt += 1_000_000

    def spinner(task):
        if section == "preempt_disable":
            preempt_disable(task)
        elif section == "migrate_disable":
            migrate_disable(task)
        yield RunUntil(50_000_000)
        if section == "preempt_disable":
            yield from preempt_enable(task)
        elif section == "migrate_disable":
            migrate_enable(task)

    k.kthread_run(spinner, "modprobe", cpu=0)
    k.kthread_run(cyclic, "cyclictest", cpu=0, policy=SCHED_FIFO, rt_priority=95)
    k.engine.run()
    return max(lat)


@pytest.mark.parametrize("preempt", ["none", "voluntary"])
def test_kernel_code_is_not_preempted_on_none_and_voluntary(preempt):
    assert _rt_wakeup_latency(preempt, "migrate_disable") > 45_000_000


@pytest.mark.parametrize("preempt", ["full", "rt"])
def test_full_and_rt_preempt_except_inside_preempt_disable(preempt):
    assert _rt_wakeup_latency(preempt, "preempt_disable") > 45_000_000
    assert _rt_wakeup_latency(preempt, "migrate_disable") < 20_000
    assert _rt_wakeup_latency(preempt, None) < 20_000


def test_cond_resched_is_a_preemption_point_on_voluntary():
    k = make_kernel(preempt="voluntary", nr_cpus=1)
    order = []

    def hog(task):
        yield RunUntil(10_000_000)
        order.append(("hog-resched", k.now))
        yield from cond_resched(task)
        order.append(("hog-back", k.now))

    def rt(task):
        order.append(("rt", k.now))
        yield Run(1000)

    k.kthread_run(hog, "hog", cpu=0)
    k.engine.at(1_000_000, lambda: k.kthread_run(rt, "rt", cpu=0, policy=SCHED_FIFO, rt_priority=50))
    k.engine.run()
    names = [n for n, _ in order]
    assert names == ["hog-resched", "rt", "hog-back"]


def test_cfs_shares_a_cpu_between_two_hogs():
    k = make_kernel(preempt="full", nr_cpus=1)
    got = {}

    def hog(task):
        got[task.comm] = yield RunUntil(200_000_000)

    k.kthread_run(hog, "a", cpu=0)
    k.kthread_run(hog, "b", cpu=0)
    k.engine.run()
    assert got["a"] + got["b"] <= 200_000_000
    assert abs(got["a"] - got["b"]) < 0.2 * 100_000_000


# ------------------------------------------------------------------------- RCU

@pytest.mark.parametrize("preempt,stalls", [("none", True), ("voluntary", True), ("full", False), ("rt", False)])
def test_rcu_stall_after_timeout_without_quiescent_state(preempt, stalls):
    k = make_kernel(hz=100, preempt=preempt, nr_cpus=1)
    start = 2_000_000_000

    def spinner(task):
        yield RunUntil(30_000_000_000)

    k.engine.at(start, lambda: k.kthread_run(spinner, "hwrng", cpu=0))
    k.engine.run(until=31_000_000_000)
    if not stalls:
        assert k.rcu_stalls == []
        return
    first = k.rcu_stalls[0]
    assert 21.0 <= (first.t_ns - start) / 1e9 <= 21.05
    assert first.t_jiffies == 21 * 100 + 1
    assert first.task == "hwrng"


def test_no_rcu_stall_when_the_task_sleeps():
    k = make_kernel(hz=100, preempt="none", nr_cpus=1)

    def sleeper(task):
        for _ in range(3000):
            yield Run(50_000)
            yield from schedule_timeout(task, 1)

    k.kthread_run(sleeper, "hwrng", cpu=0)
    k.engine.run(until=65_000_000_000)
    assert k.rcu_stalls == []


# ------------------------------------------------------------------ invariants

@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3_000_000)), min_size=1, max_size=40),
       st.sampled_from(["none", "voluntary", "full", "rt"]))
def test_time_never_runs_backwards_and_cpu_time_fits_wall_time(ops, preempt):
    k = make_kernel(preempt=preempt, nr_cpus=2)
    per_task: dict[str, list[int]] = {}

    def body(task):
        for kind, n in ops:
            per_task.setdefault(task.comm, []).append(k.now)
            if kind == 0:
                yield Run(n)
            elif kind == 1:
                yield RunUntil(k.now + n)
            elif kind == 2:
                yield from schedule_timeout(task, n % 5)
            else:
                yield from usleep_range(task, n // 2000, n // 1000)

    for i in range(3):
        k.kthread_run(body, f"t{i}", cpus_allowed=(0, 1), policy=SCHED_FIFO if i == 0 else 0,
                      rt_priority=10)
    clock = []
    k.engine.run(stop=lambda: clock.append(k.engine.now) and False)
    assert all(b >= a for a, b in zip(clock, clock[1:]))
    for stamps in per_task.values():
        assert all(b >= a for a, b in zip(stamps, stamps[1:]))
    assert all(len(v) == len(ops) for v in per_task.values())  # every task finished
    for cpu in k.cpus:
        assert cpu.busy_ns <= k.engine.now


def test_engine_clock_is_monotone_with_ties_in_order():
    e = Engine()
    out = []
    for i in range(5):
        e.at(100, out.append, i)
    e.at(50, out.append, "early")
    e.run()
    assert out == ["early", 0, 1, 2, 3, 4]
    with pytest.raises(ValueError):
        e.at(10, out.append, "past")


def test_engine_advance_only_when_it_would_be_the_next_event():
    """Engine.advance(t) stands for "schedule at t" when that event would be run next."""
    e = Engine()
    seen = []

    def handler():
        seen.append(("ok", e.advance(150), e.now))      # nothing pending before 200: advance
        seen.append(("tie", e.advance(200), e.now))     # an event at 200 is already pending: no
        seen.append(("until", e.advance(400), e.now))   # beyond until: no

    e.at(100, handler)
    e.at(200, seen.append, "at 200")
    assert not e.advance(10)                            # not inside run(): no
    e.run(until=300)
    assert seen == [("ok", True, 150), ("tie", False, 150), ("until", False, 150), "at 200"]
    assert e.events_run == 3                            # the advance counts as an event
    stop = Engine()
    stopped = []
    stop.at(5, lambda: stopped.append(stop.advance(6)))
    stop.run(stop=lambda: True)
    assert stopped == [False]                           # the loop would stop here: no


def test_engine_quiet_through_only_when_no_event_comes_first():
    """Engine.quiet_through(t): inside run(), no live event at or before t, not past until, no stop test."""
    e = Engine()
    seen = []

    def handler():
        seen.append((e.quiet_through(150), e.quiet_through(200), e.quiet_through(250)))
        cancelled = e.at(120, seen.append, "never")
        cancelled.cancel()
        seen.append(e.quiet_through(150))                # a cancelled event does not count

    assert not e.quiet_through(10)                       # not inside run()
    e.at(100, handler)
    e.at(200, seen.append, "at 200")
    e.run(until=220)
    assert seen == [(True, False, False), True, "at 200"]
    s = Engine()
    s.at(5, lambda: seen.append(s.quiet_through(6)))
    s.run(stop=lambda: False)
    assert seen[-1] is False                             # a stop test could end the run first


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 500), st.sampled_from([None, "a", "b"]), st.booleans()), max_size=12),
       st.one_of(st.none(), st.frozensets(st.sampled_from(["a", "b"]))),
       st.one_of(st.none(), st.integers(0, 600)))
def test_engine_quiet_limit_counts_the_events_that_may_act_on_the_scopes(events, scopes, until):
    """Engine.quiet_limit(scopes) at t=10: one before the first live event
    whose scope is None or in ``scopes`` (every event if ``scopes`` is None),
    at most ``until`` (FOREVER with none), None if that is before now; events
    of other scopes and cancelled ones do not count."""
    e = Engine()
    got = []
    e.at(10, lambda: got.append(e.quiet_limit(scopes)))     # first: the others at 10 are still due
    for t, scope, cancelled in events:
        ev = e.at_on(scope, 10 + t, lambda: None) if scope is not None else e.at(10 + t, lambda: None)
        if cancelled:
            ev.cancel()
    e.run(until=None if until is None else 10 + until)
    due = [10 + t for t, scope, cancelled in events
           if not cancelled and (scopes is None or scope is None or scope in scopes)]
    limit = FOREVER if until is None else 10 + until
    if due and min(due) - 1 < limit:
        limit = min(due) - 1
    assert got == [limit if limit >= 10 else None]


def test_engine_quiet_limit_none_with_a_stop_test_or_outside_a_run():
    e = Engine()
    assert e.quiet_limit() is None
    got = []
    e.at(5, lambda: got.append(e.quiet_limit(frozenset())))
    e.run(stop=lambda: False)
    assert got == [None]


def test_engine_refuses_a_stop_inside_a_fenced_stretch():
    """Engine.fence(end): a request_stop() before ``end`` raises (the caller
    would see a committed skip half done); at ``end``, after it, or after
    unfence(end) it stops the run as usual."""
    e = Engine()
    e.at(10, e.fence, 100)
    e.at(50, e.request_stop)
    with pytest.raises(SimulationError, match="inside a stretch"):
        e.run(until=1_000)
    e = Engine()
    e.at(10, e.fence, 100)
    e.at(100, e.request_stop)
    e.run(until=1_000)
    assert e.now == 100
    e = Engine()
    e.at(10, e.fence, 100)
    e.at(20, e.unfence, 100)
    e.at(50, e.request_stop)
    e.run(until=1_000)
    assert e.now == 50


def test_engine_request_stop_ends_the_run_after_that_event():
    """Engine.request_stop() from an event ends run() right after it, as a stop
    test turning true there would: the clock stays at that event, later events
    stay pending, and from the request on advance() and quiet_through() say
    no; the next run() starts without it; outside a run it does nothing."""
    e = Engine()
    seen = []

    def stopping():
        seen.append(("before", e.advance(110), e.quiet_through(120)))
        e.request_stop()
        seen.append(("after", e.advance(115), e.quiet_through(120)))

    e.request_stop()                                     # no run in progress: nothing
    e.at(50, seen.append, "at 50")
    e.at(100, stopping)
    e.at(200, seen.append, "at 200")
    e.run(until=1_000)
    assert seen == ["at 50", ("before", True, True), ("after", False, False)]
    assert e.now == 110 and e.peek() == 200              # (the first advance moved the clock)
    e.run(until=1_000)
    assert seen[-1] == "at 200" and e.now == 1_000


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.integers(1, 30_000), st.just(10_000_000)),
                          st.sampled_from(["plain", "irq", "event", "hog", "long hog"])),
                min_size=1, max_size=12),
       st.sampled_from(["none", "voluntary", "full", "rt"]))
def test_wake_up_on_idle_leaves_what_wake_up_process_leaves(wakes, preempt):
    """Kernel.wake_up_on_idle() applies try_to_wake_up, the kick and
    __schedule at once when nothing can come between them; every time and
    counter of every task and CPU is then what wake_up_process() gives --
    also when something does come between (an interrupt before the kick,
    another event, a task on the CPU) and it falls back, and after a hog has
    moved min_vruntime past the sleeper (place_entity's credit)."""
    def run(fast):
        k = make_kernel(preempt=preempt, nr_cpus=1)
        log = []

        def sleeper(task):
            while True:
                yield BLOCK
                log.append(("woke", k.now, task.vruntime, task.woken_ns, k.cpus[0].last_qs))
                yield Run(700)

        def hog(task, ns):
            yield Run(ns)
            log.append(("hog", k.now))

        t = k.kthread_run(sleeper, "sleeper", cpu=0)

        def waker(kind):
            if kind == "irq":
                k.steal(0, 2_500)                         # the kick waits for irq_until
            elif kind == "event":
                k.engine.after(1_000, log.append, ("event", k.now))
            elif kind.endswith("hog"):       # a long one moves min_vruntime past the sleeper's
                ns = 8_000_000 if kind == "long hog" else 4_000
                k.kthread_run(lambda task: hog(task, ns), kind, cpu=0)
            (k.wake_up_on_idle if fast else k.wake_up_process)(t)

        when = 0
        for gap, kind in wakes:
            when += gap
            k.engine.at(when, waker, kind)
        k.engine.run(until=when + 100_000_000)
        tasks = [(x.comm, x.state, x.vruntime, x.sum_exec_runtime, x.nvcsw, x.nivcsw, x.woken_ns)
                 for x in k.tasks]
        rq = k.cpus[0]
        cpu = (rq.nr_switches, rq.min_vruntime, rq.last_qs, rq.busy_ns, rq.idle_since, rq.irq_until,
               rq.curr is None, len(rq.cfs_queue))
        return log, tasks, cpu

    assert run(True) == run(False)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 50_000), st.booleans()), min_size=1, max_size=30))
def test_inlined_chunks_change_no_timing(ops):
    """Tasks with interleaved CPU chunks, spins and sleeps finish at the same
    times whether chunk ends go through the heap or are inlined by advance()."""
    class HeapOnly(Engine):
        __slots__ = ()

        def advance(self, time):
            return False

    def run(inline):
        k = Kernel(Engine() if inline else HeapOnly(), nr_cpus=2, hz=250, preempt="full", costs=COSTS)
        ends = {}

        def body(task, n):
            for op, ns, spin in ops:
                if (op + n) % 3 == 0:
                    yield from schedule_timeout(task, 1)
                elif spin:
                    yield RunUntil(k.now + ns)
                else:
                    yield Run(ns)
            ends[task.comm] = (k.now, task.sum_exec_runtime, task.nvcsw, task.nivcsw)

        for n in range(3):
            k.kthread_run(lambda t, n=n: body(t, n), f"t{n}", cpu=n % 2)
        k.run()
        return ends, [(c.nr_switches, c.busy_ns) for c in k.cpus]

    assert run(True) == run(False)


def test_a_task_preempted_before_its_switch_in_is_not_charged():
    """Found by the invariant test above: a CFS task picked by __schedule() and
    preempted by a FIFO wakeup before its switch-in completed was charged the
    whole time since its previous stint, beyond the wall clock."""
    k = make_kernel(preempt="full", nr_cpus=2)
    ops = [(3, 1), (0, 1), (3, 1), (0, 29001), (3, 1)]

    def body(task):
        for kind, n in ops:
            if kind == 0:
                yield Run(n)
            else:
                yield from usleep_range(task, n // 2000, n // 1000)

    for i in range(3):
        k.kthread_run(body, f"t{i}", cpus_allowed=(0, 1), policy=SCHED_FIFO if i == 0 else 0,
                      rt_priority=10)
    k.engine.run()
    assert [t.sum_exec_runtime for t in k.tasks] == [29002, 29002, 29002]  # 1 + 29001 ns each
    assert all(cpu.busy_ns <= k.engine.now for cpu in k.cpus)


def test_a_cpu_nothing_used_is_built_on_first_use():
    """A kernel's CPUs (RunQueues) are built when first asked for, each with
    CPU()'s initial values and kept from then on; iteration and len() cover
    all nr_cpus; a CPU number outside 0..nr_cpus-1 is an IndexError; any
    integer type indexes, as in a list."""
    from kenv.kernel.core import CPU

    k = Kernel(Engine(), nr_cpus=96, hz=1000, preempt="voluntary", costs=COSTS)
    t = k.kthread_run(lambda task: iter(()), "one", cpu=3)
    assert type(k.cpus[3]) is CPU and t.cpu == 3
    assert sorted(dict.keys(k.cpus)) == [3]                  # the other 95 not built
    rq = k.cpus[7]
    rq.irq_until = 5
    assert k.cpus[7] is rq and k.cpus[7].irq_until == 5      # the same CPU from then on
    fresh = CPU(8)
    for slot in CPU.__slots__:
        assert getattr(k.cpus[8], slot) == getattr(fresh, slot), slot
    with pytest.raises(IndexError):
        k.cpus[96]
    with pytest.raises(IndexError):
        k.cpus[-1]
    assert k.cpus[np.int64(9)] is k.cpus[9] and type(k.cpus[9]) is CPU
    with pytest.raises(TypeError):
        k.cpus["9"]
    assert len(k.cpus) == 96 and [c.id for c in k.cpus] == list(range(96))
    assert k.cpus[7] is rq and k.cpus[7].irq_until == 5      # iterating kept what was built
