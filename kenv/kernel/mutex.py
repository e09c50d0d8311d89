"""Sleeping locks: ``struct mutex`` (kernel/locking/mutex.c, reduced).

The parts of ``mutex_lock()`` / ``mutex_unlock()`` that decide who gets the
lock: lock stealing by a running locker before the woken waiter runs, and
``MUTEX_FLAG_HANDOFF`` for a first waiter that lost once.  Optimistic
spinning is omitted (a few hundred nanoseconds where it would matter here).
"""

from __future__ import annotations

from .core import BLOCK, Task, TaskBody


class mutex:
    """``struct mutex``: owner, wait list (FIFO) and ``MUTEX_FLAG_HANDOFF``.

    ``mutex_unlock()`` with waiters releases the lock and wakes the first
    waiter; the lock can be stolen before that waiter runs (the unlocker
    re-locking in a loop typically does).  A first waiter that wakes to find
    the lock taken sets HANDOFF, and the next unlock hands the lock to it
    directly (``__mutex_handoff``, ``MUTEX_FLAG_PICKUP``).
    """

    __slots__ = ("name", "owner", "wait_list", "handoff", "contended")

    def __init__(self, name: str = "mutex"):
        self.name = name
        self.owner: Task | None = None
        self.wait_list: list[Task] = []
        self.handoff = False
        self.contended = 0  # times a locker had to sleep

    def is_locked(self) -> bool:
        return self.owner is not None


def mutex_lock(task: Task, lock: mutex) -> TaskBody:
    """``yield from mutex_lock(task, lock)``: sleep until ``task`` owns ``lock``."""
    if lock.owner is None:
        # Fast path, or __mutex_trylock() in the slow path when the lock was
        # released but its woken waiter has not run yet: the lock is stolen.
        lock.owner = task
        return
    if lock.owner is task:
        raise RuntimeError(f"{task.comm}: recursive mutex_lock({lock.name})")
    lock.contended += 1
    lock.wait_list.append(task)
    # A fast-forward asleep in the owner's place (CPU.observer) hears of the
    # waiter: the owner's next mutex_unlock() hands the lock over.
    obs = task.k.cpus[lock.owner.cpu].observer
    if obs is not None:
        obs.mutex_wait(task, task.k.now)
    while True:
        yield BLOCK                           # schedule_preempt_disabled()
        if lock.owner is task:                # handed off to us
            break
        if lock.owner is None:                # released, not stolen: take it
            lock.owner = task
            break
        if lock.wait_list and lock.wait_list[0] is task:
            lock.handoff = True               # __mutex_trylock_or_handoff(lock, first)
    lock.wait_list.remove(task)


def mutex_unlock(task: Task, lock: mutex) -> None:
    """mutex_unlock(): hand off (HANDOFF set) or release, then wake the first waiter."""
    if lock.owner is not task:
        raise RuntimeError(f"{task.comm}: mutex_unlock({lock.name}) by a non-owner")
    if not lock.wait_list:
        lock.owner = None
        lock.handoff = False
        return
    nxt = lock.wait_list[0]
    if lock.handoff:
        lock.owner = nxt                      # __mutex_handoff(lock, next)
        lock.handoff = False
    else:
        lock.owner = None
    task.k.wake_up_process(nxt)
