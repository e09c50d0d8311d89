"""Per-CPU execution, the scheduler and preemption (kernel/sched/core.c, fair.c, rt.c).

A simulated task is a Python generator that yields requests to the kernel,
the way kernel code calls into the scheduler:

* ``Run(ns)``: execute ``ns`` of CPU time (kernel mode unless ``user=True``);
  hard IRQs and softirqs on that CPU steal time from it, and it may be
  preempted, in which case it resumes later with what is left.
* ``RunUntil(t)``: busy-wait (``cpu_relax()`` loop) until the clock reaches
  ``t``; the spin is one interval, not one event per iteration.  The
  generator receives the CPU time it actually got.
* ``BLOCK``: ``schedule()`` with the task state already set to sleeping; the
  generator resumes, with the wake value, after ``wake_up_process()``.
* ``COND_RESCHED``: ``cond_resched()``, an explicit preemption point.
* ``PREEMPT_POINT``: what ``preempt_enable()`` does when the count drops to
  zero on a preemptible kernel (see :func:`preempt_enable`).

Preemption models (``CONFIG_PREEMPT_*``):

* ``none`` / ``voluntary``: kernel code is never preempted except where it
  calls ``cond_resched()`` (or blocks, or returns to user mode).  The
  benchmark loops of raid6 and the bcm2835 spin have no such point.
* ``full``: kernel code is preemptible except with ``preempt_count > 0``.
* ``rt``: as ``full``; interrupts are threaded and spinlocks sleep (the
  consequences for random.c are modelled in :mod:`kenv.drivers.random`).
  With ``Kernel(irq_threads=True)`` the threads themselves are simulated
  (:mod:`kenv.kernel.irq`): a hard interrupt wakes its ``irq/N-name`` thread
  (SCHED_FIFO 50), which runs the handler and the softirq it raised, and the
  TIMER softirq runs in ``ktimers/N`` or ``ksoftirqd/N``; off (the dynamics
  of every env but ``kenv/RandomMixPhased-v0`` and ``kenv/KernelPhased-v0``),
  handlers and softirqs steal time on ``rt`` as on the other models.

``migrate_disable()`` pins the task to its CPU and changes nothing else.

With ``Kernel(load_balance=True)`` a waiting CFS task moves to an idle CPU
(:mod:`kenv.kernel.balance`: newidle balance where ``__schedule()`` finds
nothing to run, the idle CPUs' periodic balance); off, a task moves only
when it wakes up (``select_task_rq()``).  ``set_cpus_allowed_ptr()`` sets a
task's affinity.

Only the events that matter are simulated: wakeups, context switches, the
ticks at which a timer bucket expires or a CFS slice ends, RCU stall checks.
The scheduler's events carry the CPU they act on (their scope,
``Engine.at_on(rq, ...)``): a fast-forward may let them run inside a
stretch it skips on another CPU.  Their handlers may still reach another
CPU (a wakeup, an interrupt there); what reaches a CPU whose stretch is
being skipped raises (:class:`kenv.kernel.observe.SkipFence`).
The scheduler reports quiescent states to :mod:`kenv.kernel.rcu` (RCU stall
detection) and, with a recorder attached, its events to
:mod:`kenv.kernel.tracepoints`.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from typing import Any, Callable, Generator, Iterable

import numpy as np

from ..errors import ConfigError
from ..schema import check_choice, check_int
from ..sim.engine import NSEC_PER_MSEC, Engine
from .balance import SYSCTL_SCHED_MIGRATION_COST, LoadBalancer, active_load_balance_cpu_stop, sched_balance_newidle
from .jiffies import check_hz, initial_jiffies, tick_nsec
from .observe import CpuObserver
from .rcu import RcuStall, rcu_preempt_disabled, rcu_qs, rcu_stretch_begin
from .timer import TimerWheel
from .tracepoints import (
    record_slice, trace_finish, trace_instant, trace_np_end, trace_sched_switch, trace_sched_wakeup,
    trace_switch_out,
)

PREEMPT_MODELS = ("none", "voluntary", "full", "rt")

SCHED_NORMAL = 0
SCHED_FIFO = 1

TASK_RUNNING = "R"   # on a CPU
TASK_RUNNABLE = "r"  # on a runqueue
TASK_SLEEPING = "S"
TASK_DEAD = "X"

#: sched_prio_to_weight[] (kernel/sched/core.c), nice -20 .. 19.
SCHED_PRIO_TO_WEIGHT = (
    88761, 71755, 56483, 46273, 36291,
    29154, 23254, 18705, 14949, 11916,
    9548, 7620, 6100, 4904, 3906,
    3121, 2501, 1991, 1586, 1277,
    1024, 820, 655, 526, 423,
    335, 272, 215, 172, 137,
    110, 87, 70, 56, 45,
    36, 29, 23, 18, 15,
)
NICE_0_LOAD = 1024


def check_preempt_model(model: str) -> str:
    return check_choice(model, "preempt", PREEMPT_MODELS)


# --------------------------------------------------------------------------
# requests a task generator yields
# --------------------------------------------------------------------------

class Run:
    __slots__ = ("ns", "user")

    def __init__(self, ns: int, user: bool = False):
        self.ns = int(ns)
        self.user = user


class RunUntil:
    __slots__ = ("t",)

    def __init__(self, t: int):
        self.t = int(t)


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


BLOCK = _Marker("BLOCK")
COND_RESCHED = _Marker("COND_RESCHED")
PREEMPT_POINT = _Marker("PREEMPT_POINT")

TaskBody = Generator[Any, Any, Any]


@dataclass(frozen=True)
class SchedCosts:
    """Per-platform costs of the scheduler's own work.

    ``wakeup_ns``: ``try_to_wake_up()`` until the woken task can be picked
    (including an idle CPU's exit from its idle state).
    ``context_switch_ns``: ``__schedule()`` + ``context_switch()``.
    """

    wakeup_ns: int
    context_switch_ns: int


class Task:
    """``struct task_struct``, reduced to what the scheduler needs."""

    __slots__ = (
        "k", "pid", "comm", "policy", "rt_priority", "nice", "weight", "cpus_allowed",
        "cpu", "state", "preempt_count", "migrate_disable", "gen", "vruntime",
        "sum_exec_runtime", "nvcsw", "nivcsw", "_chunk", "_chunk_ev", "_chunk_start",
        "_chunk_stolen", "_remaining", "_spin_until", "_spin_cpu", "_value", "_wake_pending",
        "_user", "exit_value", "on_exit", "_started", "_switched_in", "is_rt", "woken_ns", "pinned",
        "woken_vruntime", "last_ran", "on_migrate",
    )

    def __init__(self, k: "Kernel", comm: str, body: Callable[["Task"], TaskBody], *,
                 policy: int = SCHED_NORMAL, rt_priority: int = 0, nice: int = 0,
                 cpus_allowed: Iterable[int] | None = None, cpu: int = 0):
        self.k = k
        k._next_pid += 1
        self.pid = k._next_pid
        self.comm = comm
        self.policy = policy
        self.is_rt = policy == SCHED_FIFO   # the policy is fixed at creation here
        self.rt_priority = rt_priority
        check_int(nice, "nice", -20, 19, "-20..19")
        self.nice = nice
        self.weight = SCHED_PRIO_TO_WEIGHT[nice + 20]
        self.cpus_allowed = tuple(cpus_allowed) if cpus_allowed is not None else None
        self.pinned = self.cpus_allowed is not None and len(self.cpus_allowed) == 1
        self.cpu = cpu
        self.state = TASK_SLEEPING
        self.preempt_count = 0
        self.migrate_disable = 0
        self.gen = body(self)
        self.vruntime = 0
        self.sum_exec_runtime = 0
        self.nvcsw = 0   # voluntary context switches (blocked)
        self.nivcsw = 0  # involuntary (preempted)
        self._chunk = None  # None, "run" or "spin"
        self._chunk_ev = None
        self._chunk_start = 0
        self._chunk_stolen = 0
        self._remaining = 0
        self._spin_until = 0
        self._spin_cpu = 0
        self._value = None
        self._wake_pending = False
        self._user = False
        self.exit_value = None
        self.on_exit: list[Callable[["Task"], None]] = []
        #: called with the task after load balancing moved it (kenv.kernel.balance)
        self.on_migrate: list[Callable[["Task"], None]] = []
        self._started = False
        self._switched_in = 0
        self.woken_ns: int | None = None  # when try_to_wake_up() last made it runnable
        self.woken_vruntime = 0           # ... and where place_entity() put its vruntime then
        self.last_ran: int | None = None  # when it last stopped running (se.exec_start; task_hot())

    def __repr__(self) -> str:
        return f"<{self.comm}-{self.pid} cpu{self.cpu} {self.state}>"


class CPU:
    """One CPU's runqueue and execution state (``struct rq``)."""

    __slots__ = (
        "id", "curr", "rt_queue", "cfs_queue", "need_resched", "irq_until", "min_vruntime",
        "_kick_ev", "_preempt_ev", "_slice_ev", "nr_switches", "last_qs", "qs_stretch_start",
        "_rcu_ev", "rcu_next_report", "busy_ns", "idle_since", "trace_prev", "trace_np_start",
        "observer",
    )

    def __init__(self, cpu: int):
        self.id = cpu
        self.curr: Task | None = None
        self.rt_queue: list[Task] = []
        self.cfs_queue: list[Task] = []
        self.need_resched = False
        self.irq_until = 0
        self.min_vruntime = 0
        self._kick_ev = None
        self._preempt_ev = None
        self._slice_ev = None
        self.nr_switches = 0
        self.last_qs = 0
        self.qs_stretch_start: int | None = None
        self._rcu_ev = None
        self.rcu_next_report: int | None = None
        self.busy_ns = 0
        self.idle_since = 0
        # recording only (kenv.trace): the task that last left this CPU, as
        # the prev_* of the next sched_switch, and where the current
        # non-preemptible stretch restarted after a cond_resched()
        self.trace_prev: tuple | None = None
        self.trace_np_start: int | None = None
        # What hears of this CPU's events (kenv.kernel.observe: a fast-forward
        # in progress here, a measurement): attach() / detach()
        self.observer: CpuObserver | None = None

    def attach(self, observer: CpuObserver) -> None:
        """Let ``observer`` hear of this CPU's events (kenv.kernel.observe) until detach()."""
        if self.observer is not None:
            raise RuntimeError(f"CPU {self.id}: an observer is attached already ({self.observer!r})")
        self.observer = observer

    def detach(self, observer: CpuObserver) -> None:
        """``observer`` hears no more of this CPU (nothing if it is not the one attached)."""
        if self.observer is observer:
            self.observer = None

    @property
    def nr_running(self) -> int:
        return len(self.rt_queue) + len(self.cfs_queue) + (self.curr is not None)


class RunQueues(dict):
    """``per_cpu(runqueues, cpu)`` of one machine: ``cpus[i]`` is CPU ``i``'s
    :class:`CPU`, built the first time anything asks for it, so that a 96-CPU
    host whose workload runs on two of its CPUs builds two (a reset builds two
    hosts).  A CPU nobody has asked for is idle with :class:`CPU`'s initial
    values, which is what it gets when it is asked for.  Iterating and
    ``len()`` cover every CPU, 0 .. nr_cpus - 1 (and build them all); a CPU
    number outside that range is an IndexError (negative ones too)."""

    __slots__ = ("nr_cpus",)

    def __init__(self, nr_cpus: int):
        super().__init__()
        self.nr_cpus = nr_cpus

    def __missing__(self, cpu: int) -> CPU:
        i = operator.index(cpu)   # any integer, as a list index (a TypeError otherwise)
        if not 0 <= i < self.nr_cpus:
            raise IndexError(f"cpu {cpu!r} out of range 0..{self.nr_cpus - 1}")
        rq = self[i] = CPU(i)
        return rq

    def __iter__(self):
        return (self[cpu] for cpu in range(self.nr_cpus))

    def __len__(self) -> int:
        return self.nr_cpus


class Kernel:
    """One simulated machine: CPUs, jiffies, the timer wheel, the scheduler.

    ``rcu_cpu_stall_timeout`` is ``CONFIG_RCU_CPU_STALL_TIMEOUT`` in seconds
    (kernel/rcu/Kconfig.debug: default 21).  ``load_balance``: CFS load
    balancing (:mod:`kenv.kernel.balance`); off, a task changes CPU only at
    its wakeups (the dynamics of every env but ``kenv/Raid6BenchBalanced-v0`` and
    ``kenv/Raid6BenchPhased-v0``).
    ``kernel_version`` ("5.15", ...): the load balancer's behaviour of that
    kernel where it changed (kenv.kernel.balance.newidle_gate_ns), and on
    ``rt`` which thread expires timers (kenv.kernel.irq.timer_softirq_thread).
    ``active_balance`` (with ``load_balance``): active balancing through
    the CPU stopper (:mod:`kenv.kernel.balance`; off by default: no env id
    uses it).  ``irq_threads``: on ``rt``, simulate the forced interrupt threads and the
    timer softirq's thread (:mod:`kenv.kernel.irq`); ``irq`` is then the
    :class:`~kenv.kernel.irq.IrqThreads` (None on the other models or when off).
    """

    def __init__(self, engine: Engine, *, nr_cpus: int, hz: int, preempt: str,
                 costs: SchedCosts, rng: np.random.Generator | None = None,
                 rcu_cpu_stall_timeout: int = 21, name: str = "kenv", load_balance: bool = False,
                 kernel_version: str | None = None, irq_threads: bool = False, active_balance: bool = False):
        check_int(nr_cpus, "nr_cpus", 1)
        self.engine = engine
        self.name = name
        self.HZ = check_hz(hz)
        self.preempt = check_preempt_model(preempt)
        self.kernel_version = kernel_version
        self.costs = costs
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.TICK_NSEC = tick_nsec(hz)
        self.INITIAL_JIFFIES = initial_jiffies(hz)
        self.cpus = RunQueues(nr_cpus)
        self.nr_cpus = nr_cpus
        self.timers = TimerWheel(self)
        self._next_pid = 0
        self.tasks: list[Task] = []
        self.rcu_cpu_stall_timeout = rcu_cpu_stall_timeout
        self.rcu_stalls: list[RcuStall] = []
        self.bugs: list[str] = []
        self.preemptible = preempt in ("full", "rt")
        # CFS tunables (kernel/sched/fair.c), scaled by 1 + ilog2(min(ncpus, 8))
        # as sched_init_granularity() does with SCHED_TUNABLESCALING_LOG.
        factor = 1 + (min(nr_cpus, 8).bit_length() - 1)
        self.sysctl_sched_latency = 6 * NSEC_PER_MSEC * factor
        self.sysctl_sched_min_granularity = 750_000 * factor
        self.sysctl_sched_wakeup_granularity = 1 * NSEC_PER_MSEC * factor
        self.sched_nr_latency = 8
        self.sysctl_sched_migration_cost = SYSCTL_SCHED_MIGRATION_COST
        #: the idle CPUs' periodic balance, or None without load balancing
        self.lb: LoadBalancer | None = (LoadBalancer(self, kernel_version, active_balance) if load_balance
                                        else None)
        #: force_irqthreads (PREEMPT_RT): the interrupt and timer-softirq threads, or None
        self.irq = None
        if irq_threads and preempt == "rt":
            from .irq import IrqThreads   # (kenv.kernel.irq builds on this module)
            self.irq = IrqThreads(self)
        if engine.recorder is not None:  # the machine's description, for trace headers
            engine.recorder.instant("kernel", (name, 0), "kernel_boot", engine.now, nr_cpus=nr_cpus,
                                    hz=self.HZ, preempt=preempt)
            engine.recorder.finish_hooks.append(functools.partial(trace_finish, self))

    # ---------------------------------------------------------------- time
    @property
    def now(self) -> int:
        return self.engine.now

    @property
    def jiffies(self) -> int:
        return self.INITIAL_JIFFIES + self.engine.now // self.TICK_NSEC

    def jiffies_at(self, t: int) -> int:
        return self.INITIAL_JIFFIES + t // self.TICK_NSEC

    def tick_time(self, j: int) -> int:
        """The clock time at which jiffies becomes ``j``."""
        return (j - self.INITIAL_JIFFIES) * self.TICK_NSEC

    def next_tick(self, t: int) -> int:
        """The first tick strictly after ``t``."""
        return (t // self.TICK_NSEC + 1) * self.TICK_NSEC

    # --------------------------------------------------------------- tracing
    #: ``k.trace_instant(cpu, name, **args)``: a kernel event on the trace, if
    #: one is recorded (the function itself, as a method: no extra call)
    trace_instant = trace_instant

    def BUG(self, msg: str, cpu: int = 0) -> None:
        """A kernel BUG/splat: recorded, never raised."""
        self.bugs.append(msg)
        trace_instant(self, cpu, "BUG", msg=msg)

    # ----------------------------------------------------------------- tasks
    def kthread_run(self, body: Callable[[Task], TaskBody], comm: str, *, cpu: int | None = None,
                    policy: int = SCHED_NORMAL, rt_priority: int = 0, nice: int = 0,
                    cpus_allowed: Iterable[int] | None = None) -> Task:
        """Create a task and wake it (kthread_run(), or fork+exec for user tasks)."""
        if cpu is not None and cpus_allowed is None:
            cpus_allowed = (cpu,)
        first = cpu if cpu is not None else (tuple(cpus_allowed)[0] if cpus_allowed else 0)
        check_int(first, "cpu", 0, self.nr_cpus - 1, f"0..{self.nr_cpus - 1}")
        t = Task(self, comm, body, policy=policy, rt_priority=rt_priority, nice=nice,
                 cpus_allowed=cpus_allowed, cpu=first)
        t.vruntime = self.cpus[first].min_vruntime
        self.tasks.append(t)
        self.wake_up_process(t)
        return t

    def task_scope(self, p: Task) -> CPU | None:
        """The scope (Event.scope) of an event that wakes ``p`` or acts on
        it alone: its CPU if it is pinned there, else None (a wakeup may put
        it on any CPU, select_task_rq())."""
        return self.cpus[p.cpu] if p.pinned else None

    # -------------------------------------------------------------- wakeups
    def wake_up_process(self, p: Task, value: Any = None) -> bool:
        """try_to_wake_up(): make ``p`` runnable; maybe preempt the current task."""
        state = p.state
        if state != TASK_SLEEPING:
            if state == TASK_DEAD:
                return False
            p._wake_pending = True
            return False
        p._value = value
        p.woken_ns = self.engine.now
        cpu = p.cpu if p.pinned else self.select_task_rq(p)
        p.cpu = cpu
        rq = self.cpus[cpu]
        if not p.is_rt:
            # place_entity() with GENTLE_FAIR_SLEEPERS: a sleeper gets at most
            # half a latency period of credit.
            p.vruntime = max(p.vruntime, rq.min_vruntime - self.sysctl_sched_latency // 2)
        p.woken_vruntime = p.vruntime
        self._enqueue(rq, p)
        if self.lb is not None and rq.curr is None:
            self.lb.ttwu_idle(rq)
        if self.engine.recorder is not None:
            trace_sched_wakeup(self, rq, p)
        self.check_preempt_curr(rq, p)
        return True

    def wake_up_on_idle(self, p: Task, run_here: bool = True) -> None:
        """wake_up_process() of a sleeping CFS task pinned to its CPU, as the
        caller's last action (simulator shortcut: a fast-forward's end).  If
        the CPU is idle with nothing queued, nothing traces or watches it, and
        no event comes before the kick: try_to_wake_up(), the kick and
        __schedule() applied at once, with the state the three leave -- only
        the task's switch-in goes through the engine, and runs right here if
        it is the engine's next event (Engine.advance) and ``run_here`` (not
        for a caller that has more to do after it).  Otherwise plain
        wake_up_process()."""
        engine = self.engine
        rq = self.cpus[p.cpu]
        t_kick = engine.now + self.costs.wakeup_ns          # _kick(): idle exit
        if t_kick < rq.irq_until:
            t_kick = rq.irq_until
        kick = rq._kick_ev
        if (p.state != TASK_SLEEPING or not p.pinned or p.is_rt or rq.curr is not None or rq.cfs_queue
                or rq.rt_queue or rq.observer is not None or engine.recorder is not None
                or (kick is not None and kick.pending) or not engine.quiet_through(t_kick)):
            self.wake_up_process(p)
            return
        # try_to_wake_up(): place_entity() as in wake_up_process()
        p._value = None
        p.woken_ns = engine.now
        p.vruntime = p.woken_vruntime = max(p.vruntime, rq.min_vruntime - self.sysctl_sched_latency // 2)
        # _kick_fire() -> __schedule() at t_kick, p alone on the runqueue
        rq.need_resched = False
        sev = rq._slice_ev
        if sev is not None:
            sev.cancel()
            rq._slice_ev = None
        rq.last_qs = t_kick                                 # rcu_qs(): a context switch
        rq.qs_stretch_start = None
        if p.vruntime > rq.min_vruntime:
            rq.min_vruntime = p.vruntime
        rq.curr = p
        rq.nr_switches += 1
        p.state = TASK_RUNNING
        start = t_kick + self.costs.context_switch_ns
        p._switched_in = start
        if run_here and engine.advance(start):     # the switch-in is the next event: run it here
            self._continue(p)
        else:
            engine.at_on(rq, start, self._continue, p)

    def select_task_rq(self, p: Task) -> int:
        """Pick the CPU for a waking task: its own if pinned or idle, else an idle allowed CPU."""
        allowed = p.cpus_allowed
        if p.migrate_disable or (allowed is not None and len(allowed) == 1):
            return p.cpu
        if self.cpus[p.cpu].curr is None and not self.cpus[p.cpu].rt_queue and not self.cpus[p.cpu].cfs_queue:
            return p.cpu
        for c in (allowed if allowed is not None else range(self.nr_cpus)):
            rq = self.cpus[c]
            if rq.curr is None and not rq.rt_queue and not rq.cfs_queue:
                return c
        return p.cpu

    def _enqueue(self, rq: CPU, p: Task) -> None:
        obs = rq.observer
        if obs is not None:
            obs.task_enqueued(p, self.engine.now)
        p.state = TASK_RUNNABLE
        if p.is_rt:
            # FIFO within a priority, highest priority first.
            q = rq.rt_queue
            i = 0
            while i < len(q) and q[i].rt_priority >= p.rt_priority:
                i += 1
            q.insert(i, p)
            lb = self.lb
            if lb is not None and lb.active_balance and rq.curr is not None and not rq.curr.is_rt:
                lb.overloaded()   # nohz_balancer_kick(): rq->nr_running >= 2 at this CPU's tick
        else:
            rq.cfs_queue.append(p)
            if rq.curr is not None:
                if not rq.curr.is_rt:
                    self._arm_slice(rq)
                if self.lb is not None:
                    self.lb.overloaded()

    def check_preempt_curr(self, rq: CPU, p: Task) -> None:
        curr = rq.curr
        if curr is None:
            obs = rq.observer
            if obs is not None:
                now = self.engine.now
                obs.idle_exit(now, max(now + self.costs.wakeup_ns, rq.irq_until))
            self._kick(rq, self.costs.wakeup_ns)
            return
        if p.is_rt:
            if not curr.is_rt or p.rt_priority > curr.rt_priority:
                self.resched_curr(rq)
            return
        if curr.is_rt:
            return
        # check_preempt_wakeup(): preempt if the woken task is behind by more
        # than the wakeup granularity (scaled to its weight, as wakeup_gran()).
        gran = self.sysctl_sched_wakeup_granularity * NICE_0_LOAD // p.weight
        if self._curr_vruntime(rq) - p.vruntime > gran:
            self.resched_curr(rq)

    def _curr_vruntime(self, rq: CPU) -> int:
        curr = rq.curr
        ran = self._ran_so_far(curr)
        return curr.vruntime + ran * NICE_0_LOAD // curr.weight

    def _ran_so_far(self, t: Task) -> int:
        if t._chunk is None or t._chunk_ev is None:
            return 0
        return max(0, self.engine.now - t._chunk_start - t._chunk_stolen)

    def resched_curr(self, rq: CPU) -> None:
        """Set TIF_NEED_RESCHED; preempt now if the current context allows it."""
        rq.need_resched = True
        if self._preemptible_now(rq):
            self._schedule_preempt(rq)

    def _preemptible_now(self, rq: CPU) -> bool:
        curr = rq.curr
        if curr is None:
            return True
        if curr._chunk is None:
            return False  # between requests: handled at the next preemption point
        if curr._user:
            return True
        return self.preemptible and curr.preempt_count == 0

    def _schedule_preempt(self, rq: CPU) -> None:
        if rq._preempt_ev is not None and rq._preempt_ev.pending:
            return
        rq._preempt_ev = self.engine.at_on(rq, max(self.engine.now, rq.irq_until), self._preempt, rq)

    def _preempt(self, rq: CPU) -> None:
        rq._preempt_ev = None
        curr = rq.curr
        if curr is None:
            self._schedule(rq)
            return
        if not rq.need_resched or not self._preemptible_now(rq):
            return
        self._stop_chunk(curr)
        curr.nivcsw += 1
        self._put_prev(rq, curr)
        self._schedule(rq)

    def _put_prev(self, rq: CPU, p: Task) -> None:
        """Put the preempted current task back on the runqueue (at the head for RT)."""
        if self.engine.recorder is not None:
            trace_switch_out(self, rq, p, "R+")
        rq.curr = None
        p.state = TASK_RUNNABLE
        p.last_ran = self.engine.now
        if p.is_rt:
            q = rq.rt_queue
            i = 0
            while i < len(q) and q[i].rt_priority > p.rt_priority:
                i += 1
            q.insert(i, p)
        else:
            rq.cfs_queue.append(p)

    def _kick(self, rq: CPU, delay: int) -> None:
        """An idle CPU with work: schedule after ``delay`` (idle exit + IPI)."""
        if rq._kick_ev is not None and rq._kick_ev.pending:
            return
        rq._kick_ev = self.engine.at_on(rq, max(self.engine.now + delay, rq.irq_until), self._kick_fire, rq)

    def _kick_fire(self, rq: CPU) -> None:
        rq._kick_ev = None
        if rq.curr is None:
            self._schedule(rq)

    # ------------------------------------------------------------ __schedule
    def _pick_next(self, rq: CPU) -> Task | None:
        if rq.rt_queue:
            return rq.rt_queue.pop(0)
        q = rq.cfs_queue
        if not q:
            return None
        best = 0
        for i in range(1, len(q)):
            if q[i].vruntime < q[best].vruntime:
                best = i
        return q.pop(best)

    def _schedule(self, rq: CPU) -> None:
        """__schedule(): pick the next task on ``rq`` (whose curr is already off)."""
        engine = self.engine
        rq.need_resched = False
        sev = rq._slice_ev
        if sev is not None:
            sev.cancel()
            rq._slice_ev = None
        if self.lb is not None and self.lb.push_cpu[rq.id] is not None:
            active_load_balance_cpu_stop(self, rq)   # the stopper runs first (stop_sched_class)
        nxt = self._pick_next(rq)
        if nxt is None and self.lb is not None and sched_balance_newidle(self, rq) is not None:
            nxt = self._pick_next(rq)
        now = engine.now
        rcu_qs(self, rq)  # a context switch is a quiescent state
        if nxt is None:
            rq.idle_since = now
            if rq.observer is not None:
                rq.observer.idle(now)
            if engine.recorder is not None and rq.trace_prev is not None:
                trace_sched_switch(self, rq, None, max(now, rq.irq_until))
            return
        cfs = rq.cfs_queue
        if cfs:
            low = cfs[0].vruntime
            for t in cfs:
                if t.vruntime < low:
                    low = t.vruntime
            if not nxt.is_rt and nxt.vruntime < low:
                low = nxt.vruntime
            if low > rq.min_vruntime:
                rq.min_vruntime = low
        elif not nxt.is_rt and nxt.vruntime > rq.min_vruntime:
            rq.min_vruntime = nxt.vruntime
        rq.curr = nxt
        rq.nr_switches += 1
        nxt.state = TASK_RUNNING
        nxt.cpu = rq.id
        irq_until = rq.irq_until
        start = (now if now >= irq_until else irq_until) + self.costs.context_switch_ns
        nxt._switched_in = start
        if rq.observer is not None:
            rq.observer.context_switch(now, start - self.costs.context_switch_ns, start)
        if engine.recorder is not None:
            trace_sched_switch(self, rq, nxt, start - self.costs.context_switch_ns)
        if cfs:
            if not nxt.is_rt:
                self._arm_slice(rq)
            if self.lb is not None:
                self.lb.overloaded()
        engine.at_on(rq, start, self._continue, nxt)

    def _arm_slice(self, rq: CPU) -> None:
        """check_preempt_tick(): at a tick, preempt a CFS task past its ideal slice."""
        curr = rq.curr
        if curr is None or curr.is_rt or (rq._slice_ev is not None and rq._slice_ev.pending):
            return
        nr = len(rq.cfs_queue) + 1
        total = curr.weight + sum(t.weight for t in rq.cfs_queue)
        period = max(self.sysctl_sched_latency, nr * self.sysctl_sched_min_granularity)
        ideal = period * curr.weight // total
        deadline = max(curr._switched_in, self.engine.now) + ideal
        rq._slice_ev = self.engine.at_on(rq, self.next_tick(deadline - 1), self._slice_expired, rq, curr)

    def _slice_expired(self, rq: CPU, who: Task) -> None:
        rq._slice_ev = None
        if rq.curr is who and rq.cfs_queue:
            self.resched_curr(rq)

    # ------------------------------------------------------- running a task
    def _continue(self, p: Task) -> None:
        if p.state != TASK_RUNNING or self.cpus[p.cpu].curr is not p:
            return
        if p._chunk is None:
            self._step(p, p._value)
        elif self._start_chunk(p):
            self._step(p, self._finish_chunk(p))

    def _step(self, p: Task, value: Any) -> None:
        """Resume the task's generator until it asks for CPU time or sleeps.

        A chunk of CPU time that would be the engine's very next event is
        completed here, in the loop (:meth:`Engine.advance`), rather than
        through the heap: the same events in the same order, fewer heap
        operations."""
        rq = self.cpus[p.cpu]
        gen = p.gen
        engine = self.engine
        while True:
            try:
                if p._started:
                    req = gen.send(value)
                else:
                    req = next(gen)
                    p._started = True
            except StopIteration as stop:
                p.exit_value = stop.value
                self._exit(rq, p)
                return
            value = None
            cls = type(req)
            if cls is Run:
                if req.ns <= 0 and not req.user:
                    continue
                if req.user:
                    rcu_qs(self, rq)
                    if rq.need_resched:
                        # exit_to_user_mode(): reschedule on the way out.
                        p._chunk = "run"
                        p._remaining = req.ns
                        p._user = True
                        p._chunk_ev = None
                        p.nivcsw += 1
                        self._put_prev(rq, p)
                        self._schedule(rq)
                        return
                elif not self.preemptible and rq.qs_stretch_start is None:
                    rcu_stretch_begin(self, rq)
                if not rq.need_resched:
                    # _start_chunk, _finish_chunk and _charge in one, for a chunk
                    # that is the engine's next event (nothing can preempt it or
                    # steal from it on the way): it runs ``ns``
                    ns = req.ns
                    now = engine.now
                    irq_until = rq.irq_until
                    if engine.advance((now if now >= irq_until else irq_until) + ns):
                        self._update_curr(p, rq, ns)
                        continue
                p._chunk = "run"
                p._remaining = req.ns
                p._user = req.user
                if self._start_chunk(p):
                    value = self._finish_chunk(p)
                    continue
                return
            if cls is RunUntil:
                t = req.t
                now = engine.now
                if t <= now:
                    value = 0
                    continue
                if not self.preemptible and rq.qs_stretch_start is None:
                    rcu_stretch_begin(self, rq)
                if not rq.need_resched:
                    # the same for a spin to ``t``: it runs from the CPU's
                    # interrupts' end (or now) to ``t``, and that is its value
                    irq_until = rq.irq_until
                    t0 = now if now >= irq_until else irq_until
                    end = t if t > t0 else t0
                    if engine.advance(end):
                        value = end - t0
                        self._update_curr(p, rq, value)
                        continue
                p._chunk = "spin"
                p._spin_until = req.t
                p._spin_cpu = 0
                p._user = False
                if self._start_chunk(p):
                    value = self._finish_chunk(p)
                    continue
                return
            if req is BLOCK:
                if p._wake_pending:
                    p._wake_pending = False
                    continue
                p.state = TASK_SLEEPING
                p.nvcsw += 1
                p.last_ran = engine.now
                if engine.recorder is not None:
                    trace_switch_out(self, rq, p, "S")
                rq.curr = None
                self._schedule(rq)
                return
            if req is COND_RESCHED or req is PREEMPT_POINT:
                if rq.need_resched and (req is COND_RESCHED or
                                        (self.preemptible and p.preempt_count == 0)):
                    p._value = None
                    p.nivcsw += 1
                    self._put_prev(rq, p)
                    self._schedule(rq)
                    return
                if (req is COND_RESCHED and engine.recorder is not None
                        and rq.qs_stretch_start is not None and not self.preemptible):
                    trace_np_end(self, rq, reopen=True)  # a preemption point, not taken
                continue
            raise TypeError(f"task {p.comm} yielded {req!r}; expected Run, RunUntil, BLOCK, COND_RESCHED")

    def _start_chunk(self, p: Task) -> bool:
        """Start (or resume) the task's chunk.  Returns True if the chunk is
        over already: its end is the engine's next event and the clock has
        moved there (the caller finishes it); False if it is scheduled."""
        rq = self.cpus[p.cpu]
        engine = self.engine
        now = engine.now
        irq_until = rq.irq_until
        t0 = now if now >= irq_until else irq_until
        p._chunk_start = now
        p._chunk_stolen = t0 - now
        if p._chunk == "run":
            end = t0 + p._remaining
        else:
            end = p._spin_until if p._spin_until > t0 else t0
        preempt = rq.need_resched and self._preemptible_now(rq)
        if not preempt and engine.advance(end):
            return True
        p._chunk_ev = engine.at_on(rq, end, self._chunk_done, p)
        if preempt:
            self._schedule_preempt(rq)
        return False

    def _charge(self, p: Task) -> int:
        ran = self.engine.now - p._chunk_start - p._chunk_stolen
        if ran < 0:
            ran = 0
        self._update_curr(p, self.cpus[p.cpu], ran)
        return ran

    @staticmethod
    def _update_curr(p: Task, rq: CPU, delta_exec: int) -> None:
        """update_curr(): ``p`` ran ``delta_exec`` ns on ``rq``."""
        p.sum_exec_runtime += delta_exec
        rq.busy_ns += delta_exec
        if not p.is_rt:
            p.vruntime += delta_exec * NICE_0_LOAD // p.weight

    def _stop_chunk(self, p: Task) -> None:
        """Preempted mid-chunk: keep what is left for when it runs again.

        A task picked by ``__schedule()`` whose switch-in has not completed yet
        (its chunk not restarted) has run nothing since it was last charged."""
        if p._chunk_ev is None:
            return
        p._chunk_ev.cancel()
        p._chunk_ev = None
        ran = self._charge(p)
        if p._chunk == "run":
            p._remaining = max(0, p._remaining - ran)
        elif p._chunk == "spin":
            p._spin_cpu += ran

    def _finish_chunk(self, p: Task) -> Any:
        """The chunk ended: charge it; the value for the task (a spin's CPU time)."""
        p._chunk_ev = None
        ran = self._charge(p)
        kind = p._chunk
        p._chunk = None
        if kind == "spin":
            return p._spin_cpu + ran
        return None

    def _chunk_done(self, p: Task) -> None:
        self._step(p, self._finish_chunk(p))

    def _exit(self, rq: CPU, p: Task) -> None:
        p.state = TASK_DEAD
        p._chunk = None
        if self.engine.recorder is not None:
            trace_switch_out(self, rq, p, "X")
        rq.curr = None
        for fn in p.on_exit:
            fn(p)
        self._schedule(rq)

    # --------------------------------------------------- interrupt context
    def steal(self, cpu: int, duration: int) -> int:
        """Interrupt context runs on ``cpu`` for ``duration`` ns, stealing it
        from whatever task runs there.  Returns the time the handler ends."""
        rq = self.cpus[cpu]
        now = self.engine.now
        start = max(now, rq.irq_until)
        end = start + duration
        if rq.observer is not None:
            rq.observer.interrupt(start, end)
        rq.irq_until = end
        curr = rq.curr
        if curr is not None and curr._chunk_ev is not None and duration > 0:
            ev = curr._chunk_ev
            if curr._chunk == "run":
                new_end = ev.time + duration
            else:
                new_end = max(ev.time, end)
            curr._chunk_stolen += duration
            ev.cancel()
            curr._chunk_ev = self.engine.at_on(rq, new_end, self._chunk_done, curr)
        return end

    def hardirq(self, cpu: int, cost_ns: int, handler: Callable[..., Any] | None = None,
                *args: Any, name: str = "irq") -> int:
        """A hard interrupt on ``cpu``: the handler runs now, its cost is stolen."""
        if self.engine.recorder is None:
            end = self.steal(cpu, cost_ns)
        else:
            start = max(self.engine.now, self.cpus[cpu].irq_until)
            end = self.steal(cpu, cost_ns)
            record_slice(self, cpu, name, start, end, cat="hardirq")
        if handler is not None:
            handler(*args)
        return end

    def run_softirq(self, cpu: int, vec: str, cost_ns: int, fn: Callable[..., Any] | None,
                    *args: Any, label: str | None = None) -> int:
        """A softirq vector (TIMER, NET_RX, ...) on ``cpu``, on the way out of an IRQ."""
        if self.engine.recorder is None:
            end = self.steal(cpu, cost_ns)
        else:
            start = max(self.engine.now, self.cpus[cpu].irq_until)
            end = self.steal(cpu, cost_ns)
            record_slice(self, cpu, f"softirq:{vec}", start, end, cat="softirq", vec=vec, action=label)
        if fn is not None:
            fn(*args)
        return end

    # ------------------------------------------------------------- driving
    def run(self, until: int | None = None, stop: Callable[[], bool] | None = None) -> None:
        self.engine.run(until=until, stop=stop)


# --------------------------------------------------------------------------
# preemption control, as called from kernel code
# --------------------------------------------------------------------------

def preempt_disable(task: Task) -> None:
    task.preempt_count += 1
    if task.preempt_count == 1:
        rcu_preempt_disabled(task.k, task.k.cpus[task.cpu], True)


def preempt_enable(task: Task) -> TaskBody:
    """``yield from preempt_enable(task)``: may reschedule when the count hits 0."""
    task.preempt_count -= 1
    if task.preempt_count < 0:
        raise RuntimeError(f"{task.comm}: preempt_count underflow")
    if task.preempt_count == 0:
        rcu_preempt_disabled(task.k, task.k.cpus[task.cpu], False)
        yield PREEMPT_POINT


def migrate_disable(task: Task) -> None:
    task.migrate_disable += 1


def migrate_enable(task: Task) -> None:
    task.migrate_disable -= 1
    if task.migrate_disable < 0:
        raise RuntimeError(f"{task.comm}: migrate_disable underflow")


def set_cpus_allowed_ptr(p: Task, cpus: Iterable[int]) -> None:
    """set_cpus_allowed_ptr() (kernel/sched/core.c): ``p`` may run only on
    ``cpus`` from now on (``sched_setaffinity()``, ``taskset``,
    ``kthread_bind()``).  A task outside the new mask moves to its first CPU
    (``move_queued_task()`` for a queued one); one running there is refused
    here (Linux stops it with ``migration_cpu_stop()``; nothing in kenv
    re-pins a running task).  Raises ConfigError on an empty mask or a CPU
    that does not exist."""
    k = p.k
    mask = tuple(operator.index(c) for c in cpus)
    if not mask or any(not 0 <= c < k.nr_cpus for c in mask):
        raise ConfigError("cpus_allowed", mask, f"a non-empty set of CPUs in 0..{k.nr_cpus - 1}")
    if p.cpu not in mask:
        if p.state == TASK_RUNNING:
            raise RuntimeError(f"{p.comm}-{p.pid} runs on CPU {p.cpu}, outside {mask}: "
                               "set_cpus_allowed_ptr() of a running task is not modelled")
        if p.state == TASK_RUNNABLE:
            src = k.cpus[p.cpu]
            (src.rt_queue if p.is_rt else src.cfs_queue).remove(p)
            p.cpu = mask[0]
            k._enqueue(k.cpus[p.cpu], p)
            k.check_preempt_curr(k.cpus[p.cpu], p)
        else:
            p.cpu = mask[0]
    p.cpus_allowed = mask
    p.pinned = len(mask) == 1


def cond_resched(task: Task) -> TaskBody:
    """``yield from cond_resched(task)``."""
    yield COND_RESCHED
