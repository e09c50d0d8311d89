"""``modprobe raid6_pq``: a user task that loads the module and runs its init.

modprobe (kmod) resolves the module in user space, calls ``finit_module()``;
``load_module()`` copies and relocates it, ``do_init_module()`` runs its init
function -- for raid6_pq, ``raid6_select_algo()`` and so the benchmark of
:mod:`kenv.drivers.raid6` -- in the context of the modprobe task, then returns
to user space and exits.  The CPU it runs on is the scheduler's choice
(``select_task_rq()`` at its wakeup); nothing pins it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..drivers.raid6 import Raid6Params, Raid6Selection, raid6_select_algo
from ..kernel.core import SCHED_NORMAL, Kernel, Run, Task, TaskBody


@dataclass(frozen=True)
class ModprobeParams:
    """Costs of modprobe around the module's init function (ns).

    ``exec_user_ns``: exec of modprobe, libkmod reading its configuration and
    modules.dep, reading the .ko file (user mode).  ``load_module_ns``:
    ``finit_module()`` -> ``load_module()`` (copy, signature check, symbol
    resolution, relocation; kernel mode, no preemption point on
    none/voluntary).  ``exit_user_ns``: back in user space until exit.
    """

    exec_user_ns: int
    load_module_ns: int
    exit_user_ns: int
    source: str = ""


class Modprobe:
    """One ``modprobe raid6_pq`` run; ``start()`` forks it, ``sel`` is the outcome."""

    def __init__(self, k: Kernel, params: ModprobeParams, raid6: Raid6Params, *,
                 kernel_version: str, mode: str):
        self.k = k
        self.params = params
        self.raid6 = raid6
        self.sel = Raid6Selection(kernel_version=kernel_version, mode=mode, hz=k.HZ)
        self.task: Task | None = None
        self.start_ns: int | None = None
        self.end_ns: int | None = None
        self.ret: int | None = None

    def start(self, parent_cpu: int = 0) -> Task:
        """fork+exec from a shell that last ran on ``parent_cpu``.

        The child may run on any CPU; ``select_task_rq()`` keeps
        ``parent_cpu`` if it is idle, else takes an idle one.
        """
        k = self.k
        allowed = [parent_cpu] + [c for c in range(k.nr_cpus) if c != parent_cpu]
        self.start_ns = k.now
        self.task = k.kthread_run(self._body, "modprobe", cpus_allowed=allowed, policy=SCHED_NORMAL)
        return self.task

    @property
    def done(self) -> bool:
        return self.end_ns is not None

    @property
    def load_ns(self) -> int | None:
        """Wall time of the whole ``modprobe raid6_pq``."""
        if self.start_ns is None or self.end_ns is None:
            return None
        return self.end_ns - self.start_ns

    def _body(self, task: Task) -> TaskBody:
        p = self.params
        if p.exec_user_ns > 0:
            yield Run(p.exec_user_ns, user=True)
        if p.load_module_ns > 0:
            yield Run(p.load_module_ns)          # finit_module() -> load_module()
        self.ret = yield from raid6_select_algo(task, self.raid6, self.sel)  # do_init_module()
        if p.exit_user_ns > 0:
            yield Run(p.exit_user_ns, user=True)
        self.end_ns = task.k.now


__all__ = ["Modprobe", "ModprobeParams"]
