"""The kernel's CPU observer interface and the fast-forwards' learning helpers."""

from __future__ import annotations

from collections import OrderedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kenv.kernel import BLOCK, Kernel, Run, SchedCosts
from kenv.kernel.mutex import mutex, mutex_lock, mutex_unlock
from kenv.kernel.observe import BusyLog, CpuObserver, SkipFence
from kenv.sim.engine import Engine, SimulationError
from kenv.sim.learner import TwiceAlike
from kenv.sim.lru import LruTable

COSTS = SchedCosts(wakeup_ns=2_000, context_switch_ns=3_000)


class Recorder(CpuObserver):
    __slots__ = ("events",)

    def __init__(self):
        self.events = []

    def task_enqueued(self, task, now):
        self.events.append(("enqueue", task.comm, now))

    def interrupt(self, start, end):
        self.events.append(("irq", start, end))

    def mutex_wait(self, task, now):
        self.events.append(("mutex", task.comm, now))

    def idle_exit(self, now, end):
        self.events.append(("idle_exit", now, end))

    def context_switch(self, now, start, end):
        self.events.append(("switch", now, start, end))

    def idle(self, now):
        self.events.append(("idle", now))


def test_observer_hears_wakeup_switch_irq_idle_and_mutex_waiter():
    """An observer attached to CPU 0 hears, in order and at their times, a
    wakeup of its sleeping task (enqueue, idle exit, the switch in), an
    interrupt, the CPU going idle, and a task of CPU 1 blocking on a mutex
    held by CPU 0's task; after detach() it hears nothing."""
    k = Kernel(Engine(), nr_cpus=2, hz=250, preempt="voluntary", costs=COSTS)
    lock = mutex("m")

    def owner(task):
        yield from mutex_lock(task, lock)
        yield BLOCK                       # woken at 1 ms, holding the lock
        yield Run(50_000)
        yield BLOCK                       # sleeps, still holding it
        mutex_unlock(task, lock)

    def waiter(task):
        yield BLOCK
        yield from mutex_lock(task, lock)
        mutex_unlock(task, lock)

    own = k.kthread_run(owner, "owner", cpu=0)
    wait = k.kthread_run(waiter, "waiter", cpu=1)
    k.engine.run(until=500_000)
    rec = Recorder()
    k.cpus[0].attach(rec)
    with pytest.raises(RuntimeError, match="observer"):
        k.cpus[0].attach(Recorder())
    k.engine.at(1_000_000, k.wake_up_process, own)
    k.engine.at(1_010_000, k.hardirq, 0, 700)
    k.engine.at(2_000_000, k.wake_up_process, wait)
    k.engine.run(until=3_000_000)
    kinds = [e[0] for e in rec.events]
    assert kinds[:3] == ["enqueue", "idle_exit", "switch"], rec.events
    assert rec.events[0] == ("enqueue", "owner", 1_000_000)
    assert rec.events[1] == ("idle_exit", 1_000_000, 1_000_000 + COSTS.wakeup_ns)
    assert ("irq", 1_010_000, 1_010_700) in rec.events
    assert "idle" in kinds and kinds.index("idle") > kinds.index("irq")
    assert rec.events[-1][:2] == ("mutex", "waiter") and rec.events[-1][2] > 2_000_000
    k.cpus[0].detach(Recorder())          # not the one attached: nothing
    assert k.cpus[0].observer is rec
    k.cpus[0].detach(rec)
    n = len(rec.events)
    k.engine.at(3_100_000, k.hardirq, 0, 700)
    k.engine.run(until=4_000_000)
    assert len(rec.events) == n and k.cpus[0].observer is None


def test_busy_log_covers_the_run_and_the_interrupt():
    """BusyLog: a stretch from the idle exit to the CPU's idle again that
    holds the task's run, and the interrupt's own stretch inside it."""
    k = Kernel(Engine(), nr_cpus=1, hz=250, preempt="voluntary", costs=COSTS)

    def body(task):
        yield BLOCK
        yield Run(100_000)

    t = k.kthread_run(body, "t", cpu=0)
    k.engine.run(until=500_000)
    log = BusyLog(None)
    k.cpus[0].attach(log)
    k.engine.at(1_000_000, k.wake_up_process, t)
    k.engine.at(1_050_000, k.hardirq, 0, 700)
    k.engine.run(until=2_000_000)
    stretches = log.until(2_000_000)
    assert all(a <= b for a, b in stretches)
    whole = max(stretches, key=lambda s: s[1] - s[0])
    assert whole[0] == 1_000_000
    assert whole[1] - whole[0] >= COSTS.wakeup_ns + COSTS.context_switch_ns + 100_000 + 700
    assert (1_050_000, 1_050_700) in stretches


@given(st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 2)), max_size=30), st.booleans())
def test_twice_alike_learns_a_key_only_from_two_agreeing_measurements(offers, refute):
    """TwiceAlike against a plain model: a key is known once two successive
    measurements of it agree; with refute_on_disagreement a second one that
    disagrees refutes it for good (get() None ever after)."""
    learner = TwiceAlike({}, refute_on_disagreement=refute)
    first: dict = {}
    known: dict = {}
    refuted: set = set()
    for key, rec in offers:
        learner.offer(key, rec)
        if key in known or key in refuted:
            pass
        elif key in first and first[key] == rec:
            known[key] = rec
            del first[key]
        elif key in first and refute:
            refuted.add(key)
            del first[key]
        else:
            first[key] = rec
        for k in "ab":
            assert learner.get(k) == known.get(k)
            assert learner.settled(k) == (k in known or k in refuted)
            assert learner.candidate(k) == first.get(k)


@given(st.lists(st.integers(0, 6), max_size=40), st.integers(1, 4))
def test_lru_table_keeps_the_most_recently_used(keys, cap):
    """LruTable against an OrderedDict model: at most ``cap`` values, the
    least recently used forgotten first, a kept one not made again."""
    table: LruTable[int] = LruTable(cap)
    model: OrderedDict = OrderedDict()
    made, misses = [], 0
    for key in keys:
        value = table.get(key, lambda key=key: made.append(key) or key * 10)
        assert value == key * 10
        if key in model:
            model.move_to_end(key)
        else:
            misses += 1
            model[key] = key * 10
            if len(model) > cap:
                model.popitem(last=False)
        assert table.values() == list(model.values())
    assert len(made) == misses
    assert len(table) <= cap


def _fenced_kernel():
    """CPU 1 fenced over [0, 1 ms]; a task pinned there, asleep; a hog on CPU 0."""
    k = Kernel(Engine(), nr_cpus=3, hz=250, preempt="voluntary", costs=COSTS)
    lock = mutex("m")

    def sleeper(task):
        yield from mutex_lock(task, lock)
        yield BLOCK

    def hog(task):
        yield Run(5_000_000)

    k.kthread_run(sleeper, "fenced", cpu=1)
    k.kthread_run(hog, "hog", cpu=0)
    k.run(until=100_000)
    fence = SkipFence.put(k, [k.cpus[1]], 1_000_000, "a test skip")
    return k, lock, fence


@pytest.mark.parametrize("touch", ["wakeup", "interrupt", "mutex"])
def test_skip_fence_raises_when_another_cpus_event_reaches_the_fenced_cpu(touch):
    """SkipFence: an event scoped to CPU 0 that wakes CPU 1's task, steals
    time on CPU 1 or blocks on the mutex CPU 1's task holds, before the
    fence's end (the mutex: from a task CPU 0's event starts on CPU 2), raises SimulationError naming the CPU and the skip; the
    same touch after the end passes, and lift() detaches the fence."""
    k, lock, fence = _fenced_kernel()
    fenced = next(t for t in k.tasks if t.comm == "fenced")

    def contender(task):
        yield from mutex_lock(task, lock)

    def act():
        if touch == "wakeup":
            k.wake_up_process(fenced)
        elif touch == "interrupt":
            k.steal(1, 1_000)
        else:
            k.kthread_run(contender, "contender", cpu=2)

    k.engine.at_on(k.cpus[0], 500_000, act)
    with pytest.raises(SimulationError, match=r"CPU\(s\) \[1\].*a test skip"):
        k.run(until=2_000_000)
    k, lock, fence = _fenced_kernel()
    fenced = next(t for t in k.tasks if t.comm == "fenced")
    k.engine.at_on(k.cpus[0], 1_000_001, act)
    k.run(until=2_000_000)                   # after the end: the detailed simulation's business
    fence.lift()
    assert k.cpus[1].observer is None


def test_skip_fence_lets_other_cpus_events_run():
    """Events that stay on CPU 0 (its hog's chunks, a wakeup of a task pinned
    there) run inside the fenced stretch of CPU 1 without complaint."""
    k, lock, fence = _fenced_kernel()

    def short(task):
        yield Run(10_000)

    k.engine.at_on(k.cpus[0], 300_000, lambda: k.kthread_run(short, "short", cpu=0))
    k.run(until=900_000)
    assert k.now == 900_000
    fence.lift()
