"""Workqueues and kworkers (kernel/workqueue.c), reduced to per-CPU pools.

``system_highpri_wq`` is served by a per-CPU kworker at nice -20
("kworker/N:1H"), ``system_wq`` by one at nice 0 ("kworker/N:1").  Queueing
work wakes the pool's kworker on that CPU; it runs the items, then sleeps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .core import BLOCK, Kernel, Run, Task, TaskBody


class work_struct:
    """``struct work_struct``: ``func(work)`` costing ``cost_ns`` of CPU time."""

    __slots__ = ("func", "cost_ns", "pending", "data", "name")

    def __init__(self, func: Callable[["work_struct"], Any], *, cost_ns: int = 0,
                 data: Any = None, name: str | None = None):
        self.func = func
        self.cost_ns = cost_ns
        self.pending = False
        self.data = data
        self.name = name or getattr(func, "__name__", "work")


@dataclass(frozen=True)
class workqueue_struct:
    name: str
    highpri: bool


system_wq = workqueue_struct("events", highpri=False)
system_highpri_wq = workqueue_struct("events_highpri", highpri=True)


class worker_pool:
    """The per-CPU pool behind a workqueue: a worklist and its kworker."""

    def __init__(self, k: Kernel, cpu: int, highpri: bool):
        self.k = k
        self.cpu = cpu
        self.worklist: list[work_struct] = []
        self.nice = -20 if highpri else 0
        comm = f"kworker/{cpu}:1" + ("H" if highpri else "")
        self.worker: Task = k.kthread_run(self._worker_thread, comm, cpu=cpu, nice=self.nice)

    def _worker_thread(self, task: Task) -> TaskBody:
        """worker_thread(): process the worklist, then sleep until woken."""
        while True:
            while self.worklist:
                work = self.worklist.pop(0)
                work.pending = False
                rec = self.k.engine.recorder
                if rec is not None:
                    rec.instant("workqueue", (self.k.name, task.cpu), "workqueue_execute_start",
                                self.k.now, work=rec.ref(work), function=work.name)
                if work.cost_ns:
                    yield Run(work.cost_ns)
                work.func(work)
                if rec is not None:
                    rec.instant("workqueue", (self.k.name, task.cpu), "workqueue_execute_end",
                                self.k.now, work=rec.ref(work), function=work.name)
            yield BLOCK


def _pools(k: Kernel) -> dict:
    pools = getattr(k, "_worker_pools", None)
    if pools is None:
        pools = {}
        k._worker_pools = pools
    return pools


def get_pool(k: Kernel, cpu: int, wq: workqueue_struct) -> worker_pool:
    pools = _pools(k)
    key = (cpu, wq.highpri)
    pool = pools.get(key)
    if pool is None:
        pool = pools[key] = worker_pool(k, cpu, wq.highpri)
    return pool


def queue_work_on(k: Kernel, cpu: int, wq: workqueue_struct, work: work_struct) -> bool:
    """queue_work_on(): False if ``work`` was already pending."""
    if work.pending:
        return False
    work.pending = True
    pool = get_pool(k, cpu, wq)
    pool.worklist.append(work)
    rec = k.engine.recorder
    if rec is not None:
        rec.instant("workqueue", (k.name, cpu), "workqueue_queue_work", k.now, work=rec.ref(work),
                    function=work.name, workqueue=wq.name, req_cpu=cpu, cpu=cpu)
    k.wake_up_process(pool.worker)
    return True


def schedule_work_on(k: Kernel, cpu: int, work: work_struct) -> bool:
    return queue_work_on(k, cpu, system_wq, work)
