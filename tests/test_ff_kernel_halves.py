"""The kernel-layer pieces the fast-forwards use: account_skipped_stretch()
(kenv.kernel.observe) and schedule_timeout()'s two public halves
(kenv.kernel.sleep)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kenv.kernel import BLOCK, Kernel, SchedCosts
from kenv.kernel.observe import account_skipped_stretch
from kenv.kernel.sleep import schedule_timeout, schedule_timeout_arm, schedule_timeout_left
from kenv.sim.engine import Engine

COSTS = SchedCosts(context_switch_ns=0, wakeup_ns=0)


def _sleeper(hz, timeout, halves):
    """A task sleeping ``timeout`` jiffies once (by schedule_timeout() or its
    halves); returns (kernel, [(woken ns, jiffies left)])."""
    k = Kernel(Engine(), nr_cpus=1, hz=hz, preempt="none", costs=COSTS)
    out = []

    def body(task):
        if halves:
            timer = schedule_timeout_arm(task, timeout)
            yield BLOCK
            left = schedule_timeout_left(task, timer)
        else:
            left = yield from schedule_timeout(task, timeout)
        out.append((k.now, left))

    k.kthread_run(body, "sleeper", cpu=0)
    k.run(until=10**9)
    return out


@given(hz=st.sampled_from([100, 250, 1000]), timeout=st.integers(-2, 40))
def test_schedule_timeout_halves_sleep_as_schedule_timeout(hz, timeout):
    """arm + BLOCK + left is schedule_timeout(): same wakeup, same jiffies
    left (0: the timer expired), and the wakeup comes after the timeout."""
    halves = _sleeper(hz, timeout, True)
    assert halves == _sleeper(hz, timeout, False)
    (woken, left), = halves
    assert left == 0 and woken >= max(0, timeout) * (10**9 // hz)


def test_account_skipped_stretch_adds_times_one_repetition():
    k = Kernel(Engine(), nr_cpus=1, hz=100, preempt="none", costs=COSTS)
    t = k.kthread_run(lambda task: (yield BLOCK), "t", cpu=0)
    rq = k.cpus[0]
    before = (t.sum_exec_runtime, t.vruntime, t.nvcsw, t.nivcsw, rq.nr_switches, rq.busy_ns, rq.min_vruntime)
    account_skipped_stretch(t, rq, times=3, exec_ns=5, vruntime=7, nvcsw=1, nivcsw=2, nr_switches=1,
                            busy_ns=5, min_vruntime=4)
    after = (t.sum_exec_runtime, t.vruntime, t.nvcsw, t.nivcsw, rq.nr_switches, rq.busy_ns, rq.min_vruntime)
    assert [a - b for a, b in zip(after, before)] == [15, 21, 3, 6, 3, 15, 12]
    with pytest.raises(ValueError, match="rq=None"):
        account_skipped_stretch(t, nr_switches=1)
