"""CFS load balancing: tasks that wait move to idle CPUs (kernel/sched/fair.c).

A CFS task that is runnable but waiting on a busy CPU (preempted by a
SCHED_FIFO thread, or sharing the CPU with another CFS task) is pulled by
another CPU's load balancing, as Linux does it (kernel/sched/fair.c of
v5.15/v5.16, the kernels of the platforms; the functions were renamed in
v6.10, the old names in brackets):

* :func:`sched_balance_newidle` (``newidle_balance()``): a CPU whose
  ``__schedule()`` finds nothing to run balances at once, before it goes
  idle, and runs what it pulled (``pick_next_task_fair()``).
* :meth:`LoadBalancer.sched_balance_domains` (``rebalance_domains()``, run
  for the idle CPUs by the ``nohz_idle_balance()`` a busy CPU's tick kicks
  off, ``nohz_balancer_kick()``): each idle CPU balances once per balance
  interval.
* :func:`sched_balance_rq` (``load_balance()``): find the busiest runqueue,
  detach a task that :func:`can_migrate_task` allows (``detach_tasks()``),
  attach it here (``attach_task()``).
* :func:`can_migrate_task` refuses a task that is inside
  ``migrate_disable()`` (``is_migration_disabled()``; since v5.11
  ``migrate_disable_switch()`` in kernel/sched/core.c narrows ``p->cpus_ptr``
  to its CPU while it is switched out, and the ``cpus_ptr`` test refuses
  it), pinned by affinity (the destination not in ``cpus_allowed``), running,
  or cache-hot (:func:`task_hot`) unless the balance failed more than
  ``cache_nice_tries`` times in a row.

Constants, with their source:

* ``sysctl_sched_migration_cost`` = 500000 ns (kernel/sched/fair.c:
  ``const_debug unsigned int sysctl_sched_migration_cost = 500000UL``).
* ``cache_nice_tries`` = 1: the domain of CPUs that share the last-level
  cache (kernel/sched/topology.c ``sd_init()``: ``SD_SHARE_PKG_RESOURCES``
  -> ``cache_nice_tries = 1``).
* balance interval of an idle CPU = ``sd->balance_interval`` ms, which
  ``sd_init()`` sets to the domain's weight (``sd_weight``, its number of
  CPUs); ``get_sd_balance_interval()`` multiplies it by ``busy_factor`` only
  for a busy CPU and converts with ``msecs_to_jiffies()``.

What is simplified (documented assumptions, not fitted):

* One scheduling domain spans every CPU of the machine (one LLC, no SMT or
  NUMA levels, no sched groups): the busiest group is the busiest runqueue.
* The imbalance is the number of waiting CFS tasks, not PELT load or
  utilisation (``migrate_task`` migration type, which is what
  ``calculate_imbalance()`` picks for an idle destination and a busiest group
  with more tasks than CPUs): the busiest runqueue is the one with the most
  waiting CFS tasks (ties: lowest CPU), and a balance moves one task (an
  idle destination's imbalance is 1; on a preemptible kernel newidle stops
  after the first task, ``detach_tasks()``).  Tasks are tried oldest-queued
  first (``detach_tasks()`` takes ``list_last_entry(&rq->cfs_tasks)``).
  When every waiting task of the busiest runqueue is pinned away from the
  destination (``LBF_ALL_PINNED``) the next busiest is tried.
* The newidle gate on ``rq->avg_idle`` (how long this CPU's idle periods
  last: ``update_avg()`` by 1/8 at each wakeup of the idle CPU in
  ``ttwu_do_wakeup()``, capped at ``2 * max_idle_balance_cost``, starting at
  ``2 * sysctl_sched_migration_cost``): before v5.16 a CPU whose
  ``avg_idle < sysctl_sched_migration_cost`` does not balance when it goes
  idle (kernels "5.15" and older here); v5.16 (commit "sched/fair: Remove
  sysctl_sched_migration_cost condition") compares with the measured cost of
  a newidle balance, ``max_newidle_lb_cost`` (microseconds), taken here as 0:
  the CPU always tries.  ``max_idle_balance_cost`` is taken as its initial
  ``sysctl_sched_migration_cost``.  The time a newidle balance takes is not
  charged.  ``rd->overload`` is exact: nothing to pull, nothing done.
* ``balance_interval`` stays at ``min_interval`` (``sd_weight`` ms); the
  doubling up to ``max_interval`` after balanced rounds is not modelled.  All
  idle CPUs start with the same ``next_balance`` and balance in CPU order at
  the tick that makes them due (``nohz_idle_balance()`` walks the idle mask
  in order).  Busy CPUs' own periodic balance (``busy_factor`` 16) and active
  balancing (pushing a running task) are not modelled; RT tasks are not
  balanced (rt.c's push/pull: every RT task here is pinned).
* A task pulled to an idle CPU by the periodic balance runs there after the
  idle CPU's wakeup cost (``SchedCosts.wakeup_ns``), as a wakeup would.

Off by default (``Kernel(load_balance=False)``): the base tasks
(``kenv/Raid6Bench-v3`` ...) keep the dynamics they were published with;
``kenv/Raid6BenchBalanced-v0`` turns it on.

Active balancing (``Kernel(active_balance=True)``, off by default so that
every registered env id keeps its trajectories; the raid6-cyclictest
experiment turns it on).  What moves a CFS task that runs back to back
(modprobe's preempt-disabled raid6 windows) while an RT task waits behind it
(the cyclictest thread of its CPU, woken inside the window), from
kernel/sched/fair.c and kernel/stop_machine.c of v5.16:

* ``update_sg_lb_stats()`` counts ``rq->nr_running`` (all classes) in
  ``sum_nr_running``; ``group_classify()`` makes a one-CPU group with
  ``sum_nr_running > group_weight`` ``group_overloaded``, so the busy CPU's
  group is the busiest while its RT thread waits.  ``calculate_imbalance()``
  for an idle local group and ``busiest->group_weight == 1``:
  ``migrate_task``, ``imbalance = (busiest->sum_nr_running -
  local->sum_nr_running) >> 1`` = 1.  ``find_busiest_queue()`` for
  ``migrate_task`` takes the runqueue with the most ``cfs.h_nr_running``
  (here 1: the running task).  Without the RT waiter the group is
  ``group_has_spare`` with ``sum_h_nr_running == 1`` and
  ``find_busiest_group()`` goes ``out_balanced``: one CFS task alone on a
  CPU is never pulled.
* ``detach_tasks()`` walks ``rq->cfs_tasks``, which holds the running task
  too; ``can_migrate_task()`` clears ``LBF_ALL_PINNED`` for it and refuses
  it (``task_on_cpu()``), so the balance fails: ``load_balance()``
  increments ``sd->nr_balance_failed`` (not for ``CPU_NEWLY_IDLE``).
* ``need_active_balance()``: ``sd->nr_balance_failed >
  sd->cache_nice_tries + 2``; then, unless ``busiest->active_balance`` is
  already set, ``busiest->push_cpu = this_cpu`` and
  ``stop_one_cpu_nowait(cpu_of(busiest), active_load_balance_cpu_stop)``.
  The stopper (``cpu_stop_queue_work()`` wakes the ``migration/N`` thread,
  stop_sched_class, above every RT priority) runs on the busy CPU at its next
  ``__schedule()``: for a preempt-disabled task, the ``preempt_enable()``
  that ends its window.  :func:`active_load_balance_cpu_stop` then detaches
  the (no longer running) task with ``LBF_ACTIVE_LB``, which skips
  :func:`task_hot` (``can_migrate_task()``: "aggressive migration if active
  balance"), attaches it to ``push_cpu``, and zeroes that CPU's
  ``sd->nr_balance_failed``.  ``migrate_disable()`` still refuses it
  (``is_migration_disabled()``), so the seed's patch keeps the task put.
* Each CPU has its own ``sched_domain`` and so its own ``nr_balance_failed``;
  the idle CPUs balance in the same ``nohz_idle_balance()`` rounds, so once
  they have failed enough the next round's first idle CPU pushes at once:
  the task moves about once per balance interval.

Simplified: only the periodic (nohz idle) balance starts an active balance
(a newidle balance would too once the counter is high: ``load_balance()``
tests ``need_active_balance()`` for every idle type); the stopper's own
context switch is not charged; ``voluntary_active_balance()`` (RT pressure
on the source's capacity, misfit tasks) is not modelled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..sim.engine import NSEC_PER_MSEC
from .tracepoints import task_prio

if TYPE_CHECKING:
    from .core import CPU, Kernel, Task

#: kernel/sched/fair.c: ``sysctl_sched_migration_cost = 500000UL`` (ns)
SYSCTL_SCHED_MIGRATION_COST = 500_000
#: kernel/sched/topology.c sd_init(): an LLC domain (SD_SHARE_PKG_RESOURCES)
CACHE_NICE_TRIES = 1

#: enum cpu_idle_type (include/linux/sched/idle.h)
CPU_IDLE = "idle"
CPU_NEWLY_IDLE = "newly_idle"


def task_hot(k: Kernel, p: Task, now: int) -> bool:
    """task_hot() (kernel/sched/fair.c): did ``p`` run within
    ``sysctl_sched_migration_cost`` (its cache is still warm on its CPU)?

    ``delta = rq_clock_task(src_rq) - p->se.exec_start``; ``exec_start`` is
    where ``p`` last stopped running (``last_ran`` here; a task that never
    ran has none and is cold, as ``__sched_fork()`` zeroes it).  Only CFS
    tasks can be hot."""
    if p.is_rt or p.last_ran is None:
        return False
    return now - p.last_ran < k.sysctl_sched_migration_cost


def task_idle(rq: CPU | None) -> bool:
    """``idle_cpu()``: nothing running and nothing queued (an unbuilt CPU is idle)."""
    return rq is None or (rq.curr is None and not rq.cfs_queue and not rq.rt_queue)


def can_migrate_task(k: Kernel, p: Task, src: CPU, dst_cpu: int, nr_balance_failed: int = 0) -> bool:
    """can_migrate_task() (kernel/sched/fair.c): may ``p`` move from ``src`` to ``dst_cpu``?

    Refused: inside ``migrate_disable()`` (``is_migration_disabled()``),
    ``dst_cpu`` not in ``p->cpus_ptr`` (pinned by affinity), running on
    ``src`` (``task_running()``), or cache-hot (:func:`task_hot`) -- unless
    ``nr_balance_failed > cache_nice_tries`` ("too many balance attempts
    have failed": the hot task goes anyway)."""
    if p.migrate_disable:
        return False
    allowed = p.cpus_allowed
    if allowed is not None and dst_cpu not in allowed:
        return False
    if src.curr is p:
        return False
    if task_hot(k, p, k.engine.now):
        return nr_balance_failed > CACHE_NICE_TRIES
    return True


def _overloaded(rq: CPU) -> bool:
    """``rq->nr_running >= 2`` with a CFS task among the waiting (``rd->overload``)."""
    return bool(rq.cfs_queue) and rq.curr is not None


def _rt_waits_behind_cfs(rq: CPU) -> bool:
    """A CFS task runs and an RT task waits behind it (``sum_nr_running >
    group_weight``: ``group_overloaded``, one ``cfs.h_nr_running``)."""
    curr = rq.curr
    return curr is not None and not curr.is_rt and bool(rq.rt_queue)


def find_busiest_queues(k: Kernel) -> list[CPU]:
    """find_busiest_group() + find_busiest_queue(), simplified: the runqueues
    with a CFS task waiting behind a running one, busiest first (most waiting
    CFS tasks; ties: lowest CPU) -- the order a balance tries them in.  With
    active balancing, also (last) a runqueue whose running CFS task has an
    RT task waiting behind it (module docstring)."""
    active = k.lb is not None and k.lb.active_balance
    return sorted((rq for rq in k.cpus.values() if _overloaded(rq) or (active and _rt_waits_behind_cfs(rq))),
                  key=lambda rq: (-len(rq.cfs_queue), rq.id))


def sched_balance_rq(k: Kernel, dst: CPU, idle: str, nr_balance_failed: int = 0,
                     busiest: list[CPU] | None = None) -> tuple[Task | None, bool]:
    """load_balance() (kernel/sched/fair.c, ``sched_balance_rq()`` since
    v6.10), simplified as the module docstring says: pull one waiting CFS
    task from the busiest runqueue to ``dst``.  Returns ``(task moved or
    None, failed)``: ``failed`` when a task could have come here but
    :func:`can_migrate_task` refused it (cache-hot), not when there was
    nothing to move (``out_balanced``, every candidate pinned away).
    ``busiest``: :func:`find_busiest_queues` if the caller has it already."""
    for src in find_busiest_queues(k) if busiest is None else busiest:
        if src is dst:
            continue
        all_pinned = True
        for p in src.cfs_queue:   # oldest queued first
            allowed = p.cpus_allowed
            if not p.migrate_disable and (allowed is None or dst.id in allowed):
                all_pinned = False   # (migrate_disable() narrows cpus_ptr: pinned too)
            if can_migrate_task(k, p, src, dst.id, nr_balance_failed):
                migrate_queued_task(k, p, src, dst)
                return p, False
        curr = src.curr
        if (k.lb is not None and k.lb.active_balance and curr is not None and not curr.is_rt
                and not curr.migrate_disable and (curr.cpus_allowed is None or dst.id in curr.cpus_allowed)):
            all_pinned = False   # rq->cfs_tasks holds the running task: refused (task_on_cpu())
        if not all_pinned:
            return None, True   # a candidate was refused: this balance failed
    return None, False


def need_active_balance(k: Kernel, src: CPU, dst: CPU, nr_balance_failed: int) -> bool:
    """need_active_balance() (kernel/sched/fair.c): after a failed periodic
    balance, push the task running on ``src`` to ``dst`` through the CPU
    stopper when ``nr_balance_failed > cache_nice_tries + 2`` and it may run
    on ``dst`` (``load_balance()``: ``cpumask_test_cpu(this_cpu,
    busiest->curr->cpus_ptr)``) and no push is pending on ``src``
    (``busiest->active_balance``)."""
    curr = src.curr
    return (k.lb.active_balance and nr_balance_failed > CACHE_NICE_TRIES + 2 and k.lb.push_cpu[src.id] is None
            and curr is not None and not curr.is_rt and not curr.migrate_disable
            and (curr.cpus_allowed is None or dst.id in curr.cpus_allowed))


def active_load_balance_cpu_stop(k: Kernel, src: CPU) -> Task | None:
    """active_load_balance_cpu_stop() (kernel/sched/fair.c), run by ``src``'s
    stopper at its ``__schedule()``: move one CFS task that
    :func:`can_migrate_task` allows with ``LBF_ACTIVE_LB`` (no cache-hot test)
    from ``src`` to ``push_cpu``; zero ``push_cpu``'s ``nr_balance_failed``
    on success (``sd->nr_balance_failed = 0``) and clear
    ``busiest->active_balance``.  Returns the task moved, or None."""
    lb = k.lb
    target = lb.push_cpu[src.id]
    lb.push_cpu[src.id] = None
    if target is None:
        return None
    dst = k.cpus[target]
    for p in src.cfs_queue:   # detach_one_task(): oldest queued first
        allowed = p.cpus_allowed
        if not p.migrate_disable and (allowed is None or target in allowed):
            migrate_queued_task(k, p, src, dst)
            lb.nr_balance_failed[target] = 0
            k.check_preempt_curr(dst, p)   # attach_one_task() -> check_preempt_curr()
            return p
    return None


def migrate_queued_task(k: Kernel, p: Task, src: CPU, dst: CPU) -> None:
    """detach_task() + attach_task(): move the queued CFS task ``p`` from
    ``src`` to ``dst``.  Its vruntime keeps its lag: ``migrate_task_rq_fair()``
    removes ``src``'s ``min_vruntime``, the enqueue adds ``dst``'s."""
    src.cfs_queue.remove(p)
    p.vruntime = p.vruntime - src.min_vruntime + dst.min_vruntime
    orig = p.cpu
    p.cpu = dst.id
    if k.engine.recorder is not None:
        k.trace_instant(dst.id, "sched_migrate_task", comm=p.comm, pid=p.pid, prio=task_prio(p),
                        orig_cpu=orig, dest_cpu=dst.id)
    k._enqueue(dst, p)
    for fn in p.on_migrate:
        fn(p)


def newidle_gate_ns(kernel_version: str | None) -> int:
    """The ``avg_idle`` below which a CPU going idle does not balance:
    ``sysctl_sched_migration_cost`` before v5.16, else 0 (module docstring)."""
    if kernel_version is None:
        return 0
    major, minor = (int(x) for x in kernel_version.split(".")[:2])
    return SYSCTL_SCHED_MIGRATION_COST if (major, minor) < (5, 16) else 0


def sched_balance_newidle(k: Kernel, rq: CPU) -> Task | None:
    """newidle_balance() (``sched_balance_newidle()`` since v6.10): ``rq``'s
    ``__schedule()`` found nothing to run; pull a waiting CFS task from the
    busiest runqueue before going idle.  Returns the task now queued on
    ``rq`` (the caller picks it), or None.  Newidle failures do not count
    in ``nr_balance_failed`` (``load_balance()``: ``idle != CPU_NEWLY_IDLE``)."""
    lb = k.lb
    lb.idle_stamp[rq.id] = k.engine.now
    if lb.avg_idle[rq.id] < lb.newidle_gate or not lb.maybe_overloaded:
        return None
    busiest = find_busiest_queues(k)
    if not busiest:   # !rd->overload
        return None
    pulled = sched_balance_rq(k, rq, CPU_NEWLY_IDLE, 0, busiest)[0]
    if pulled is not None:
        lb.idle_stamp[rq.id] = None
    return pulled


class LoadBalancer:
    """The periodic balance of the idle CPUs and its per-CPU state
    (``sd->nr_balance_failed``, ``rq->next_balance``) for one machine."""

    __slots__ = ("k", "interval", "next_balance", "nr_balance_failed", "_ev", "avg_idle", "idle_stamp",
                 "newidle_gate", "active_balance", "push_cpu")

    def __init__(self, k: Kernel, kernel_version: str | None = None, active_balance: bool = False):
        self.k = k
        #: active balancing through the CPU stopper (module docstring), and per
        #: CPU the pending push's target (``rq->push_cpu`` while ``rq->active_balance``)
        self.active_balance = bool(active_balance)
        self.push_cpu: list[int | None] = [None] * k.nr_cpus
        cost = k.sysctl_sched_migration_cost
        #: rq->avg_idle (sched_init(): 2 * sysctl_sched_migration_cost) and
        #: rq->idle_stamp (when newidle balance last found nothing; None: not idle)
        self.avg_idle = [2 * cost] * k.nr_cpus
        self.idle_stamp: list[int | None] = [None] * k.nr_cpus
        self.newidle_gate = newidle_gate_ns(kernel_version)
        # sd_init(): balance_interval = sd_weight ms; msecs_to_jiffies(), at least 1
        ms = k.nr_cpus
        self.interval = max(1, -(-ms * NSEC_PER_MSEC // k.TICK_NSEC))
        self.next_balance = [k.jiffies + self.interval] * k.nr_cpus
        self.nr_balance_failed = [0] * k.nr_cpus
        self._ev = None

    def ttwu_idle(self, rq: CPU) -> None:
        """ttwu_do_wakeup(): a task woke on ``rq`` while it was idle: fold
        the idle period into ``avg_idle`` (``update_avg()``: 1/8 of the
        difference), capped at ``2 * max_idle_balance_cost``."""
        stamp = self.idle_stamp[rq.id]
        if stamp is not None:
            self.idle_stamp[rq.id] = None
            avg = self.avg_idle[rq.id]
            avg += int((self.k.engine.now - stamp - avg) / 8)
            self.avg_idle[rq.id] = min(avg, 2 * self.k.sysctl_sched_migration_cost)

    @property
    def maybe_overloaded(self) -> bool:
        """``rd->overload``, as a cheap test before looking at every
        runqueue: False only if none has had a CFS task waiting behind a
        running one since the periodic balance last found none -- the
        periodic balance stays armed (``_ev``) from :meth:`overloaded` until
        then."""
        return self._ev is not None

    def overloaded(self) -> None:
        """A CFS task waits behind a running one: from the next due tick on,
        the idle CPUs balance (``nohz_balancer_kick()`` from the busy CPU's
        tick, ``rq->nr_running >= 2``)."""
        if self._ev is None:
            self._arm()

    def _arm(self) -> None:
        k = self.k
        due = max(k.jiffies + 1, min(self.next_balance))
        self._ev = k.engine.at(k.tick_time(due), self.sched_balance_domains)

    def sched_balance_domains(self) -> None:
        """rebalance_domains() of every idle CPU due at this tick, in CPU
        order (``nohz_idle_balance()``); then again at the next due tick
        while a CFS task still waits somewhere."""
        self._ev = None
        k = self.k
        j = k.jiffies
        cpus = k.cpus
        busiest = find_busiest_queues(k)
        for c in range(k.nr_cpus):
            if self.next_balance[c] > j:
                continue
            self.next_balance[c] = j + self.interval
            if not busiest or not task_idle(cpus.get(c)):
                continue   # nothing to pull; a busy CPU's own balance is not modelled
            dst = cpus[c]
            moved, failed = sched_balance_rq(k, dst, CPU_IDLE, self.nr_balance_failed[c], busiest)
            self.nr_balance_failed[c] = self.nr_balance_failed[c] + 1 if failed else 0
            if failed and self.active_balance:
                src = next((rq for rq in busiest if rq is not dst), None)
                if src is not None and need_active_balance(k, src, dst, self.nr_balance_failed[c]):
                    self.push_cpu[src.id] = c   # stop_one_cpu_nowait(): the stopper preempts when it can
                    k.resched_curr(src)
            if moved is not None:
                k.check_preempt_curr(dst, moved)   # the idle CPU runs it (_kick)
                busiest = find_busiest_queues(k)
        if busiest:
            self._arm()


__all__ = ["CACHE_NICE_TRIES", "CPU_IDLE", "CPU_NEWLY_IDLE", "LoadBalancer", "SYSCTL_SCHED_MIGRATION_COST",
           "active_load_balance_cpu_stop", "can_migrate_task", "find_busiest_queues", "migrate_queued_task",
           "need_active_balance", "newidle_gate_ns", "sched_balance_newidle", "sched_balance_rq", "task_hot",
           "task_idle"]
