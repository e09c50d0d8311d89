"""Sleeping: schedule_timeout(), msleep(), usleep_range(), completions.

kernel/time/timer.c (schedule_timeout, msleep), kernel/time/hrtimer.c
(usleep_range -> schedule_hrtimeout_range), kernel/sched/completion.c.
Each function is a generator used as ``yield from f(task, ...)`` from a task body.
"""

from __future__ import annotations

from typing import Any

from ..sim.engine import NSEC_PER_USEC
from .core import BLOCK, Task, TaskBody
from .jiffies import msecs_to_jiffies
from .timer import timer_list

MAX_SCHEDULE_TIMEOUT = (1 << 63) - 1


def _process_timeout(timer: timer_list) -> None:
    task: Task = timer.data
    task.k.wake_up_process(task)


def schedule_timeout(task: Task, timeout: int) -> TaskBody:
    """Sleep until woken or ``timeout`` jiffies pass; returns the jiffies left.

    ``expires = jiffies + timeout`` goes on the timer wheel, so with the
    level-0 rounding a ``schedule_timeout(1)`` sleeps more than one and at most
    two jiffies.
    """
    k = task.k
    if timeout == MAX_SCHEDULE_TIMEOUT:
        yield BLOCK
        return MAX_SCHEDULE_TIMEOUT
    timer = schedule_timeout_arm(task, timeout)
    yield BLOCK
    return schedule_timeout_left(task, timer)


def schedule_timeout_arm(task: Task, timeout: int) -> timer_list:
    """schedule_timeout()'s first half, before it sleeps: ``expires =
    jiffies + timeout`` (a negative timeout counts as 0) on the timer wheel,
    on ``task``'s CPU, its expiry waking ``task`` (process_timeout())."""
    k = task.k
    timer = timer_list(_process_timeout, name="process_timeout", data=task)
    timer.expires = k.jiffies + max(0, timeout)
    k.timers.add_timer_on(timer, task.cpu)
    return timer


def schedule_timeout_left(task: Task, timer: timer_list) -> int:
    """schedule_timeout()'s second half, once ``task`` runs again: the timer
    ``schedule_timeout_arm()`` put on the wheel is deleted (del_timer_sync());
    returns the jiffies left, 0 if it expired."""
    k = task.k
    k.timers.del_timer(timer)
    return max(0, timer.expires - k.jiffies)


schedule_timeout_interruptible = schedule_timeout
schedule_timeout_uninterruptible = schedule_timeout


def msleep(task: Task, msecs: int) -> TaskBody:
    """msleep(): ``schedule_timeout_uninterruptible(msecs_to_jiffies(m) + 1)`` until done."""
    timeout = msecs_to_jiffies(msecs, task.k.HZ) + 1
    while timeout:
        timeout = yield from schedule_timeout_uninterruptible(task, timeout)


def usleep_range(task: Task, min_us: int, max_us: int) -> TaskBody:
    """usleep_range(): an hrtimer with soft expiry ``min`` and hard expiry ``max``.

    The clock event is programmed for ``max``.  The sleeper wakes earlier
    only if another hrtimer interrupt on its CPU comes after ``min``; with the
    sleeper's CPU otherwise idle (NO_HZ_IDLE stops the tick) none does, but if
    other tasks keep that CPU busy its tick is such an interrupt.
    """
    k = task.k
    now = k.now
    soft = now + min_us * NSEC_PER_USEC
    hard = now + max_us * NSEC_PER_USEC
    wake_at = hard
    rq = k.cpus[task.cpu]
    if rq.cfs_queue or rq.rt_queue:
        tick = k.next_tick(soft - 1)
        if tick <= hard:
            wake_at = tick
    ev = k.engine.at(wake_at, k.wake_up_process, task)
    yield BLOCK
    ev.cancel()


class completion:
    """``struct completion``: ``done`` and the tasks waiting on it."""

    __slots__ = ("done", "waiters")

    UINT_MAX = (1 << 32) - 1

    def __init__(self) -> None:
        self.done = 0
        self.waiters: list[Task] = []


def init_completion(x: completion) -> None:
    x.done = 0
    x.waiters.clear()


def complete_all(k: Any, x: completion) -> None:
    """complete_all(): mark done forever and wake every waiter."""
    x.done = completion.UINT_MAX
    waiters, x.waiters = x.waiters, []
    for t in waiters:
        k.wake_up_process(t)


def wait_for_completion_interruptible_timeout(task: Task, x: completion, timeout: int) -> TaskBody:
    """Returns 0 on timeout, else the jiffies left (at least 1), as the kernel does."""
    if x.done:
        return max(timeout, 1)
    x.waiters.append(task)
    while True:
        timeout = yield from schedule_timeout(task, timeout)
        if x.done or not timeout:
            break
    if task in x.waiters:
        x.waiters.remove(task)
    if not x.done:
        return 0
    return timeout or 1
