"""Fast-forward of the bcm2835 wait loop: simulator machinery, not kernel code.

A reader of /dev/hwrng (or the ``hwrng`` kthread) whose driver sleeps in
``bcm2835_rng_read()`` goes round one *wait cycle* after another: sleep
(``hwrng_yield``: 2 jiffies; ``hwrng_msleep``, ``usleep_range``: their own
period), wake, read ``RNG_STATUS``, take what the FIFO holds, copy it out,
finish or start a read(2), find the FIFO empty, sleep again.  While the
generator warms up (``bcm2835_rng_init()`` discards ``RNG_WARMUP_COUNT``
numbers) or is silent, every cycle is the same empty poll; while it runs, a
reader with ``hwrng_yield`` drains 5 words a wakeup, and 16-byte reads of
20-byte drains make a pattern of four cycles.  Each cycle is a handful of
engine events.  :meth:`HwrngFastForward.skip_polls` sleeps across cycles it
can predict, the way kenv.workloads.qperf fast-forwards steady round trips:

* **Learn.**  A cycle runs from one *boundary* (the top of a wait: a status
  read just found the FIFO empty) to the next.  At each boundary the module
  takes a snapshot of the poller and its CPU (time, last wakeup, CPU time,
  vruntime, context switches, the CPU's busy time, the rng's and the core's
  counters) and of what its frames hold (the read(2) in progress:
  :class:`~kenv.drivers.hwrng.ReadCall`; rng_buffer's ``data_avail``), and
  records the cycle that ends there: its deltas, its wakeup, its status reads
  (when, words seen, words taken) and its end state, filed under its *start
  key* -- the frame state and the phase a wait depends on (the time within
  the jiffy and, for a wheel timeout, the jiffy within its level's
  granularity).  A cycle is learned only if it was one sleep with nothing
  else on the CPU (the CPU's busy time grew exactly by the poller's CPU time).
  What is learned serves the later episodes of the same machine, poller and
  wait that share the :class:`HwrngLearned` it went into: the simulation that
  owns it (an environment instance across its episodes, an experiment run)
  passes it down explicitly; nothing is kept in the module.
* **Predict.**  From a boundary, the next cycle is the one learned from the
  same start key whose status reads see, against the generator's landings
  (:meth:`Bcm2835Rng.produced`), exactly what they saw when it was learned;
  its end state gives the next key, and so on.  Two candidates that both fit
  mean the key misses something: the prediction stops there.  A plan is kept
  with the cycles it was made from and serves a later boundary with the same
  start key, generator phase and horizon (unless the step ends at a read).
* **Skip.**  The poller then sleeps once, to the wakeup of the first cycle it
  will run in detail: for the timer-wheel waits a timer in that cycle's
  bucket (:meth:`TimerWheel.enqueue_bucket`), on the cancellable ``rng->dying``
  completion like the real sleep; for ``usleep_range`` an hrtimer-style
  wakeup.  When it wakes, the skipped cycles' counters are added, its read(2)
  call, rng_buffer and the FIFO are put where the last skipped cycle left
  them (and ``min_vruntime`` where a lone task's switch-ins leave it), and
  the rest of that cycle runs in detail.
* **How far.**  Not past the rng's ``quiet_until`` (the end of the step, as
  far as the driver of the simulation knows it: until then it neither changes
  the wait nor looks at the rng), the engine's ``until`` or the next timer of
  the poller's CPU; not past a read(2) completion when the step ends at one
  (:attr:`HwrngCore.read_budget`).  Without a declared ``quiet_until`` nothing
  is skipped.  A change of wait (:meth:`Bcm2835Rng.set_wait`) forgets the
  cycle in progress (a skip asleep across it learns nothing from its end).
* **Disturbed.**  While the poller sleeps its CPU reports to this module
  (``CPU.observer``) anything else that happens there: a task enqueued or an
  interrupt; and a task on any CPU that blocks on ``reading_mutex``, which
  the poller holds across its cycles (its next unlock hands the lock over).
  The skip is cut back to the first cycle that could be affected, which is
  then simulated in detail -- exact, unless the disturbance falls
  inside a skipped cycle's awake window (a few microseconds of every period)
  or at the very nanosecond a skipped cycle ends (where, in detail, the order
  of two events at the same time decides whether it hits the cycle), which
  :attr:`HwrngFastForward.inexact` counts.  There, a task woken that
  cannot preempt the poller (``none``, ``voluntary``) runs after it, as in
  detail: after the poller's window if that has a ``need_resched()`` check
  left (a reader's copy: the window runs again from the wakeup, a few
  microseconds late, and the reader sleeps a jiffy at its check), else while
  the poller waits for its next cycle.

The second fast-forward, :meth:`HwrngFastForward.skip_reads`, is for a reader
that calls ``read(2)`` on /dev/hwrng back to back while the driver spins
(``cpu_relax``): with the FIFO empty, each word is picked up the instant it
lands -- spin to the landing, ``RNG_STATUS``, one ``RNG_DATA`` word, the copy,
the next ``RNG_STATUS`` (empty again), spin -- so whole reads follow from the
generator's landing times (:meth:`Bcm2835Rng.next_word_time`) and the
platform's ``rng_readl_ns`` and ``copy_chunk_ns`` by arithmetic.  The reader
spins through them as one ``RunUntil`` interval (the CPU is busy all along,
as it is in detail) and the words, bytes, spin time and wait counts are
added at the end.  It needs the same guarantees (a declared step end, nothing
else on the reader's CPU, ``reading_mutex`` free and the ``hwrng`` kthread
asleep on a timer, whose expiry bounds the skip); an interrupt inside a spin
only takes spin time, as it does in detail; anything else cuts the skip short,
approximately (the words of a partial read go to ``rng_buffer``), and counts
as :attr:`HwrngFastForward.inexact`.  A wakeup that cannot preempt the reader
(``none``, ``voluntary``) cuts it at the next point where ``rng_dev_read()``
looks at ``need_resched()``, the end of a word's copy, where the reader then
sleeps ``schedule_timeout_interruptible(1)`` as in detail.
:meth:`HwrngFastForward.skip_words` does
the same for the words of the read in progress, from the top of
``rng_dev_read()``'s loop (whose locals are in :class:`~kenv.drivers.hwrng.ReadCall`):
when steps end by time, the read a step ends in is spun through up to its
word at the step's end, and the rest of it at once in the next step, instead
of word by word.

The equivalence with the detailed simulation is a test (same trajectories
with the fast-forward on and off: an rng made with ``learned=None`` simulates
every cycle).
"""

from __future__ import annotations

import math
import operator
from collections import OrderedDict
from itertools import repeat
from typing import TYPE_CHECKING

from ..kernel.core import BLOCK, NICE_0_LOAD, TASK_DEAD, TASK_SLEEPING, Run, RunUntil, Task, TaskBody
from ..kernel.jiffies import msecs_to_jiffies
from ..kernel.mutex import mutex_lock, mutex_unlock
from ..kernel.observe import Disturbances
from ..kernel.sleep import _process_timeout, schedule_timeout_interruptible
from ..kernel.timer import LVL_GRAN, calc_wheel_index, timer_list
from ..sim.engine import NSEC_PER_SEC

if TYPE_CHECKING:  # pragma: no cover
    from .hwrng import Bcm2835Rng, HwrngCore

#: snapshot fields (counters that a cycle adds to): time, last wakeup, CPU time,
#: vruntime, nvcsw, nivcsw, the CPU's nr_switches and busy_ns, the rng's wait
#: calls and words consumed, the core's bytes to user, reads and read bytes
(T, WOKEN, EXEC, VRUNTIME, NVCSW, NIVCSW, NR_SWITCHES, BUSY, WAITS, CONSUMED, TO_USER, READS,
 READ_BYTES) = range(13)
#: the counters a skipped cycle adds (everything but the clocks)
_ADDED = (EXEC, VRUNTIME, NVCSW, NIVCSW, NR_SWITCHES, BUSY, WAITS, CONSUMED, TO_USER, READS,
          READ_BYTES)
assert _ADDED == tuple(range(EXEC, READ_BYTES + 1))   # _Skip._apply adds them as a slice
#: learned cycles kept per start (different FIFO inputs give different cycles)
MAX_RECORDS = 8
#: status reads recorded per cycle; a longer one is not learned
MAX_EVENTS = 32
#: start keys kept per table of a HwrngLearned: what a long run's tables take stays
#: bounded (a table that is full learns no new start key; a cycle not learned
#: is simulated in detail).  Kernel-v0's default mix needs 78 in all tables
#: together; HwrngWait-v0 with seven waits ~930 over its 60 tables in 20K steps.
MAX_KEYS = 2048


#: plans kept per table (see _Table): past this many the table forgets them all
MAX_PLANS = 4096
#: What a HwrngLearned keeps: at most MAX_TABLES tables (one per machine,
#: poller and wait) holding MAX_LEARNED_KEYS start keys in all, the least
#: recently used table forgotten first to make room (its cycles are simulated
#: in detail again when they come back); with MAX_RECORDS cycles per key,
#: MAX_EVENTS status reads per cycle and MAX_PLANS plans per table this bounds
#: what a long-lived environment keeps.  An agent that tries many waits
#: (``hwrng_msleep(MS)``, ``usleep_range(MIN,MAX)``) used to add tables for
#: ever (7 MB over 400k HwrngWait-v0 steps with 40 waits; benchmarks/ff_memory.py).
#: HwrngWait-v0's default waits and scenario mix use ~20 tables and ~1600
#: keys in 20k steps; Kernel-v0's ~78 keys.
MAX_TABLES = 64
MAX_LEARNED_KEYS = 4096
_UNPLANNED = object()    # (a plan not made yet; None is "no plan")


class HwrngLearned:
    """The wait cycles one simulation has learned, per machine, poller and
    wait (:func:`_cycle_table_key`), by start key: a cycle is a function of
    those, of its start key and of what the FIFO holds (checked when it is
    replayed), so a later episode of the same machine starts with them
    instead of measuring them again -- as kenv.workloads.qperf keeps its
    round trips.  Owned by whoever runs the simulation (an environment keeps
    one across its episodes, an experiment run makes its own) and passed down
    to each rng (:class:`~kenv.drivers.hwrng.Bcm2835Rng`); at most
    ``max_tables`` tables, the least recently used forgotten first."""

    __slots__ = ("_tables", "max_tables", "max_keys", "keys")

    def __init__(self, max_tables: int = MAX_TABLES, max_keys: int = MAX_LEARNED_KEYS):
        self._tables: OrderedDict[tuple, _Table] = OrderedDict()
        self.max_tables = max_tables
        self.max_keys = max_keys
        #: start keys in the tables kept
        self.keys = 0

    def table(self, key: tuple) -> "_Table":
        """The table of ``key`` (a new, empty one if there is none)."""
        tables = self._tables
        table = tables.get(key)
        if table is None:
            table = tables[key] = _Table()
            if len(tables) > self.max_tables:
                self._forget_oldest()
        else:
            tables.move_to_end(key)
        return table

    def room_for_key(self, table: "_Table") -> bool:
        """Whether ``table`` may learn one more start key (counted if so):
        the least recently used other tables are forgotten to make room.  A
        table forgotten meanwhile (an episode still holds it) learns nothing."""
        if not table.kept or len(table) >= MAX_KEYS:
            return False
        while self.keys >= self.max_keys:
            if next(iter(self._tables.values())) is table:
                return False
            self._forget_oldest()
        self.keys += 1
        return True

    def _forget_oldest(self) -> None:
        _, table = self._tables.popitem(last=False)
        table.kept = False
        self.keys -= len(table)

    def tables(self) -> list["_Table"]:
        """The tables kept, least recently used first."""
        return list(self._tables.values())

    def clear(self) -> None:
        """Forget everything learned."""
        while self._tables:
            self._forget_oldest()

    def __len__(self) -> int:
        return len(self._tables)


class _Table(dict):
    """One table of a :class:`HwrngLearned`: start key -> the cycles seen to follow it.

    ``plans`` keeps the plans made from it (:meth:`HwrngFastForward._plan`),
    by what a plan depends on besides the table: the start key, the FIFO's
    level, the generator's phase (:meth:`HwrngFastForward._generator_phase`)
    and the horizon, relative to the boundary.  A change of the table (a
    cycle learned or dropped) forgets them."""

    __slots__ = ("plans", "kept")

    def __init__(self) -> None:
        super().__init__()
        self.plans: dict[tuple, tuple | None] = {}
        #: still in its HwrngLearned (False: forgotten, learns nothing more)
        self.kept = True


def _cycle_table_key(task: Task, rng: "Bcm2835Rng") -> tuple:
    """What a poller's wait cycle depends on besides its start key and the
    FIFO: the rng block's rate, depth and read costs, rng_buffer's size, the
    kernel's scheduler costs, HZ, preemption model and CPU count, the poller
    (its comm, the code of its loop, its scheduling class and weight) and the
    wait.  Not the probe or warm-up times: the generator's landings are
    checked against the live rng at each replay."""
    p = rng.params
    k = task.k
    return (p.word_rate_hz, p.fifo_words, p.rng_readl_ns, p.copy_chunk_ns, rng.core.buffer_size,
            k.costs, k.HZ, k.preempt, k.nr_cpus,
            task.comm, getattr(task.gen, "gi_code", None), task.policy, task.rt_priority, task.weight, rng.wait)


class _Cycle:
    """One wait cycle, boundary to boundary, as measured: ``d`` the counter
    deltas, ``woff`` its wakeup after the cycle start, ``state`` what the
    reader's frames hold at its end (its read(2) call's size and ret, and
    rng_buffer's data_avail), ``events`` its RNG_STATUS reads as (offset,
    words seen, words taken), ``wait_ns`` its wait's duration (for wait_log)."""

    __slots__ = ("d", "woff", "state", "events", "wait_ns", "key", "dadd", "empty")

    def __init__(self, d, woff, state, events, wait_ns):
        self.d, self.woff, self.state, self.events, self.wait_ns = d, woff, state, events, wait_ns
        #: everything measured: two cycles with the same key are the same cycle
        self.key = (d, woff, state, events, wait_ns)
        self.dadd = [d[f] for f in _ADDED]    # the counters it adds, in _ADDED's order
        #: it took nothing and every status read saw an empty FIFO
        self.empty = not d[CONSUMED] and all(seen == 0 for _, seen, _ in events)


class HwrngFastForward:
    """The fast-forwards of one rng: wait cycles (:meth:`skip_polls`) and
    back-to-back ``cpu_relax()`` reads (:meth:`skip_reads`); see the module doc."""

    def __init__(self, rng: "Bcm2835Rng", learned: HwrngLearned):
        self.rng = rng
        #: what this and other rngs of the same simulation have learned
        self.learned = learned
        #: the landing times repeat, shifted, every _period ns: the shortest time
        #: in which the generator produces a whole number of words
        self._period = NSEC_PER_SEC // math.gcd(NSEC_PER_SEC, rng.params.word_rate_hz)
        #: per poller: (snapshot counters, frame state, start key) at its last clean boundary
        self._last: dict[Task, tuple] = {}
        #: per (poller, wait): its table in self.learned (start key -> the cycles seen to follow it)
        self._tables: dict[tuple, _Table] = {}
        #: per poller: the RNG_STATUS reads of the cycle in progress (time, seen, taken)
        self._events: dict[Task, list] = {}
        self.jumps = 0
        self.polls_skipped = 0
        self.reads_skipped = 0
        self.words_skipped = 0
        #: disturbances the fast-forward could not follow exactly (inside a
        #: skipped cycle's awake window or at the nanosecond one ends, or
        #: anything else during skipped reads)
        self.inexact = 0
        #: calls of forget(): a skip that slept across one learns nothing from its end
        self.forgotten = 0

    # ------------------------------------------------------------ measuring
    def forget(self) -> None:
        """The wait changed (the driver rebound): the cycles in progress end
        abnormally (their sleep may be cut short); learn nothing from them."""
        self._last.clear()
        self._events.clear()
        self.forgotten += 1

    def status_read(self, task: Task, seen: int, taken: int) -> None:
        """bcm2835_rng_read() read RNG_STATUS: ``seen`` words, ``taken`` read."""
        ev = self._events.get(task)
        if ev is not None:
            if len(ev) < MAX_EVENTS:
                ev.append((task.k.now, seen, taken))
            else:
                self._events[task] = None   # not a short wait cycle: nothing to learn

    def _table(self, task: Task) -> "_Table":
        """The cycles learned for ``task`` with the current wait, in this
        simulation (:attr:`learned`), by start key."""
        wait = self.rng.wait
        table = self._tables.get((task, wait))
        if table is None:
            table = self._tables[(task, wait)] = self.learned.table(_cycle_table_key(task, self.rng))
        return table

    def _phase(self, k, t: int) -> tuple:
        """What a wait started at ``t`` depends on besides the frames: for a
        timer-wheel wait the time within the jiffy and the jiffy within the
        timeout's wheel granularity (calc_index rounding); nothing for an hrtimer."""
        w = self.rng.wait
        if w.kind == "hwrng_yield":
            return (t % k.TICK_NSEC, 0)
        if w.kind == "hwrng_msleep":
            timeout = msecs_to_jiffies(w.args[0], k.HZ) + 1
            j = k.jiffies_at(t)
            lvl, _ = calc_wheel_index(j + timeout, j, k.HZ)
            return (t % k.TICK_NSEC, j % LVL_GRAN(lvl))
        return (0, 0)

    def _snapshot(self, task: Task) -> tuple | None:
        """The poller's counters, frame state and start key at a boundary, or
        None if the boundary is not clean."""
        k = task.k
        rng = self.rng
        rq = k.cpus[task.cpu]
        now = k.now
        core = rng.core
        if (rng.quiet_until is None or k.engine.recorder is not None or rq.cfs_queue or rq.rt_queue
                or rq.irq_until > now or rq.need_resched or task.woken_ns is None or core is None
                or core.reading_mutex.owner is not task or not rng.wait.sleeps):
            return None
        comm = task.comm
        call = core.reading.get(task)
        counters = (now, task.woken_ns, task.sum_exec_runtime, task.vruntime, task.nvcsw, task.nivcsw,
                    rq.nr_switches, rq.busy_ns, rng.wait_calls.get(comm, 0), rng.consumed_words,
                    core.bytes_to_user.get(comm, 0), core.reads.get(comm, 0),
                    core.read_bytes.get(comm, 0))
        state = (None if call is None else (call.size, call.ret), core.data_avail,
                 len(core.reading_mutex.wait_list), core.reading_mutex.contended)
        return counters, state, (state, self._phase(k, now))

    def skip_polls(self, task: Task) -> TaskBody:
        """Called by ``_wait`` with the FIFO just found empty; if the cycles
        from here on are known, sleep past as many as is safe and return True
        (the loop then reads ``RNG_STATUS``); else return False at once (the
        loop waits for real)."""
        plan = self._plan(task)
        if plan is None:
            return False
        yield from _Skip(self, task, *plan).sleep()
        return True

    def _learn(self, task: Task):
        """At a boundary: learn the cycle that ends here; return the snapshot
        (None if this boundary is not clean)."""
        rng = self.rng
        events = self._events.get(task)
        self._events[task] = []          # the next cycle's status reads
        snap = self._snapshot(task)
        last = self._last.get(task)
        if snap is None:
            self._last.pop(task, None)
            return None
        self._last[task] = snap
        if last is None or events is None:
            return snap
        c0, _, key0 = last
        t0 = c0[T]
        counters, state, _ = snap
        d = tuple(map(operator.sub, counters, c0))
        if (d[T] <= 0 or d[EXEC] != d[BUSY] or d[NVCSW] != 1 or d[NIVCSW] != 0 or d[NR_SWITCHES] != 1
                or d[WAITS] != 1 or (d[CONSUMED] and key0[0][0] is None)):
            return snap   # not one sleep with nothing else on the CPU (or the kthread's loop)
        wait_ns = None
        log = rng.wait_log
        if log is not None:
            if not log or log[-1][0] != task.comm or log[-1][1] != t0:
                return snap
            wait_ns = log[-1][2] - log[-1][1]
        measured = (d, counters[WOKEN] - t0, state, tuple((t - t0, seen, taken) for t, seen, taken in events),
                    wait_ns)
        table = self._table(task)
        known = table.get(key0)
        if known is None:
            if not self.learned.room_for_key(table):
                return snap
            known = table[key0] = []
        for c in known:
            if c.key == measured:
                return snap      # known already
        if len(known) >= MAX_RECORDS:
            del known[0]
        known.append(_Cycle(*measured))
        table.plans.clear()      # made with the table as it was
        return snap

    def _plan(self, task: Task):
        snap = self._learn(task)
        if snap is None:
            return None
        rng = self.rng
        k = task.k
        table = self._table(task)
        if not table or rng.dying.done:
            return None
        counters, state, key = snap
        now = counters[T]
        # how far: within the step, before the next timer of the poller's CPU
        horizon = self._horizon(k, (task.cpu,))
        no_reads = rng.core.read_budget is not None   # the step ends at a read: it must be real
        if no_reads:
            # (a plan that may not take a read is short and seldom made twice alike)
            plan = self._make_plan(k, table, key, now, horizon, no_reads)
        else:
            # the same start key, FIFO, generator phase and horizon make the same plan
            pkey = (key, rng._level_ref, self._generator_phase(now), horizon - now)
            plans = table.plans
            made = plans.get(pkey, _UNPLANNED)
            if made is _UNPLANNED:
                plan = self._make_plan(k, table, key, now, horizon, no_reads)
                if len(plans) >= MAX_PLANS:
                    plans.clear()
                plans[pkey] = None if plan is None else plan.relative()
            elif made is None:
                plan = None
            else:
                plan = _Plan.from_relative(now, made)
        if plan is None:
            return None
        return plan, plan.n + 1, rng.wait.on_timer_wheel, counters

    def _generator_phase(self, now: int):
        """What the FIFO's status reads from ``now`` on depend on besides its
        level: the phase of ``now`` within the generator's landing period
        (word_rate_hz words land in the same pattern every ``_period`` ns;
        before the generator starts, the time to its start) and the words
        landed since the last consumption (none at a boundary, where a status
        read has just found the FIFO empty)."""
        rng = self.rng
        t_start = rng.t_start
        if t_start is None:
            return None
        phase = (now - t_start) % self._period if now >= t_start else ("before", t_start - now)
        return phase, rng.produced(now) - rng.produced(rng._t_ref)

    def _make_plan(self, k, table: "_Table", key: tuple, now: int, horizon: int, no_reads: bool):
        """The known cycles from a boundary at ``now`` with start ``key`` (see
        _plan), or None."""
        rng = self.rng
        plan = _Plan(now)
        fifo = (rng._level_ref, rng._t_ref, rng.produced(rng._t_ref))
        while True:
            known = table.get(key)
            if not known:
                break
            base = plan.end
            match = None
            for c in known:     # the one cycle whose status reads see what the FIFO will hold
                if base + c.d[T] > horizon or (no_reads and c.d[READS]):
                    continue
                after = self._fifo_after(c, base, fifo)
                if after is None:
                    continue
                if match is not None:
                    match = None     # two fit: something the start key does not capture
                    break
                match = (c, after)
            if match is None:
                break
            c, fifo = match
            nkey = (c.state, self._phase(k, base + c.d[T]))
            reps = 1
            if nkey == key and not c.d[CONSUMED] and len(known) == 1:
                # the same cycle over and over (polls of an empty FIFO): as many as fit
                reps = (horizon - base) // c.d[T]
                if rng.t_start is not None:
                    reps = min(reps, (rng.word_time(fifo[2] + 1) - 1 - base) // c.d[T])
                reps = max(1, reps)
            plan.add(c, reps)
            key = nkey if reps == 1 else (c.state, self._phase(k, plan.end))
        # land on the cycle after the known ones: its wakeup must be known too
        landing = table.get(key)
        if not landing or len({c.woff for c in landing}) != 1:
            if plan.n < 2:
                return None
            plan.drop_last()         # land on the last known one instead
            landing = None
        if landing is not None:
            plan.wake_of_next(landing[0].woff)
        if plan.n >= 2 and plan.end + plan._next_woff > horizon:    # W(n + 1)
            plan.drop_last()         # the skipped cycles are counted at the wakeup: before the horizon
        j = plan.n + 1
        if j < 2:
            return None
        if (rng.wait.on_timer_wheel and plan.W(j) % k.TICK_NSEC) or plan.W(j) > horizon:
            return None
        return plan

    def _horizon(self, k, cpus) -> int:
        """How far a fast-forward may go: the rng's ``quiet_until``, the
        engine's ``until`` and the next timer on ``cpus``, whichever comes first."""
        horizon = self.rng.quiet_until
        until = k.engine.until
        if until is not None and until < horizon:
            horizon = until
        for cpu in cpus:
            nxt = k.timers.next_expiry(cpu)
            if nxt is not None and k.tick_time(nxt) < horizon:
                horizon = k.tick_time(nxt)
        return horizon

    def _fifo_after(self, c: _Cycle, base: int, fifo: tuple) -> tuple | None:
        """The FIFO state (level, t_ref, produced at t_ref) after cycle ``c``
        started at ``base``, or None if one of its status reads would see
        something else than when it was measured."""
        rng = self.rng
        level, t_ref, p_ref = fifo
        if not level and c.empty:
            # empty all along unless a word lands: its last read, at base + dt, decides
            if rng.t_start is None or base + c.d[T] < rng.word_time(p_ref + 1):
                return fifo
            return None
        produced = rng.produced
        cap = rng.params.fifo_words
        for off, seen, taken in c.events:
            t = base + off
            p = produced(t)
            avail = level + p - p_ref
            if avail > cap:
                avail = cap
            if avail != seen:
                return None
            if taken:
                level, t_ref, p_ref = avail - taken, t, p
        return level, t_ref, p_ref


    # ---------------------------------------------------- back-to-back reads
    def skip_reads(self, task: Task, core: "HwrngCore", size: int, max_reads: int | None) -> TaskBody:
        """Called by a reader between two ``read(size)`` of /dev/hwrng: skip
        up to ``max_reads`` (None: no limit) whole reads when the driver
        spins, returning how many (0: the reader reads for real)."""
        plan = self._plan_reads(task, core, size, max_reads)
        if plan is None:
            return 0
        return (yield from _SpinReads(self, task, core, size, *plan).run())

    def skip_words(self, task: Task, core: "HwrngCore", call: "ReadCall") -> TaskBody:
        """Called by rng_dev_read() at the top of its loop, ``rng_buffer``
        empty: spin through the next words of the read in progress as
        skip_reads does whole reads -- one word per turn of the loop, landing,
        RNG_STATUS, RNG_DATA, copy -- up to the step's end, so that only the
        word the step ends in is read in detail; returns how many (0: none).
        Not when steps end at a read's completion (:attr:`HwrngCore.read_budget`):
        the next read starts in the same event, and its words after the first
        wait the next step's way."""
        if call.size < 4 or call.size % 4 or core.read_budget is not None:
            return 0
        plan = self._plan_reads(task, core, 4, call.size // 4)
        if plan is None:
            return 0
        return (yield from _SpinReads(self, task, core, 4, *plan, call=call).run())

    def _plan_reads(self, task: Task, core: "HwrngCore", size: int, max_reads: int | None):
        rng = self.rng
        k = task.k
        rq = k.cpus[task.cpu]
        now = k.now
        lock = core.reading_mutex
        if (rng.wait.kind != "cpu_relax" or rng.quiet_until is None or k.engine.recorder is not None
                or size < 4 or size % 4 or core.data_avail or core.buffer_size < 4 or lock.owner is not None
                or lock.wait_list or rq.curr is not task or rq.cfs_queue or rq.rt_queue
                or rq.irq_until > now or rq.need_resched or task.weight != NICE_0_LOAD
                or rng.t_start is None or max_reads == 0 or rq.observer is not None):
            return None
        r, c = rng.params.rng_readl_ns, rng.params.copy_chunk_ns
        if NSEC_PER_SEC // rng.params.word_rate_hz <= 4 * r + c:
            return None  # words could land while one is processed: not one word per read
        w = size // 4
        produced = rng.produced
        n_first = produced(now + r) + 1          # the generator's index of the first word
        if produced(rng.quiet_until - 3 * r - c) - n_first + 1 < w:
            return None  # not one whole read before the step's end, whatever the horizon (below)
        cpus = [task.cpu]
        kthread = core.hwrng_fill
        if kthread is not None and kthread is not task and kthread.state != TASK_DEAD:
            if kthread.state != TASK_SLEEPING or kthread in lock.wait_list:
                return None
            if kthread.cpu != task.cpu:
                cpus.append(kthread.cpu)   # it sleeps on a timer of its CPU's base
        horizon = self._horizon(k, cpus)
        # the status read that starts now must find the FIFO empty
        if rng.words_available(now + r):
            return None
        # read q ends with its last word: landing + status + data read + copy
        landed = produced(horizon - 3 * r - c) - n_first + 1
        q = landed // w
        if max_reads is not None:
            q = min(q, max_reads)
        # A spin that crosses recheck_at stops there for one more RNG_STATUS
        # read (bcm2835_rng_read's loop), then spins on: one more wait, ``r``
        # less spinning -- unless the word lands during that read.
        cap = None
        R = rng.recheck_at
        if R is not None and R > now and q >= 1:
            i = produced(R) + 1 - n_first            # the first word landing after R
            if 0 <= i < q * w and (now + r if i == 0 else rng.word_time(n_first + i - 1) + 4 * r + c) < R:
                if R + r >= rng.word_time(n_first + i):
                    q = i // w       # not followed here: stop before that word's read
                else:
                    cap = i
        if q < 1:
            return None
        return q, n_first, r, c, cap


class _Plan:
    """The known cycles ahead of a boundary at ``t0``: cycle ``n`` (n >= 1)
    starts at ``B(n - 1)``, wakes at ``W(n)`` and ends at ``B(n)``, right
    after a status read found the FIFO empty.  Kept as runs of one cycle
    repeated (thousands of identical polls of a silent generator)."""

    def __init__(self, t0: int):
        self.t0 = t0
        self.runs: list[tuple[_Cycle, int, int, int]] = []   # (cycle, count, first n, B(first n - 1))
        self.n = 0
        self.end = t0              # B(n): where the known cycles end
        self._next_woff: int | None = None

    def add(self, cycle: _Cycle, count: int) -> None:
        self.runs.append((cycle, count, self.n + 1, self.end))
        self.n += count
        self.end += count * cycle.d[T]
        self._next_woff = None

    def drop_last(self) -> None:
        """The last known cycle becomes the landing one (run in detail)."""
        cycle, count, first, start = self.runs.pop()
        if count > 1:
            self.runs.append((cycle, count - 1, first, start))
        self.n -= 1
        self.end -= cycle.d[T]
        self._next_woff = cycle.woff

    def wake_of_next(self, woff: int) -> None:
        """The wakeup offset of cycle n + 1 (the landing cycle, run in detail)."""
        self._next_woff = woff

    def relative(self) -> tuple:
        """The plan with its times relative to ``t0`` (kept in _Table.plans)."""
        t0 = self.t0
        return (tuple((c, count, first, start - t0) for c, count, first, start in self.runs), self.n,
                self.end - t0, self._next_woff)

    @classmethod
    def from_relative(cls, t0: int, rel: tuple) -> "_Plan":
        """The plan :meth:`relative` gave, from a boundary at ``t0``."""
        runs, n, end, next_woff = rel
        plan = cls(t0)
        plan.runs = [(c, count, first, t0 + start) for c, count, first, start in runs]
        plan.n = n
        plan.end = t0 + end
        plan._next_woff = next_woff
        return plan

    def cycle(self, n: int) -> _Cycle:
        for cycle, count, first, _ in reversed(self.runs):
            if n >= first:
                return cycle
        raise IndexError(n)

    def B(self, n: int) -> int:
        if n == self.n:
            return self.end
        if n == 0:
            return self.t0
        for cycle, count, first, start in reversed(self.runs):
            if n >= first:
                return start + (n - first + 1) * cycle.d[T]
        raise IndexError(n)

    def W(self, n: int) -> int:
        if n == self.n + 1:
            return self.B(self.n) + self._next_woff
        return self.B(n - 1) + self.cycle(n).woff

    def cycles_before(self, t: int) -> int:
        """The largest n <= self.n with B(n) <= t."""
        best = 0
        for cycle, count, first, start in self.runs:
            if start + cycle.d[T] > t:
                break
            best = first - 1 + min(count, (t - start) // cycle.d[T])
        return best

    def sums(self, a: int, n: int) -> list[int]:
        """The counters cycles a+1 .. n add (in the order of _ADDED)."""
        out = [0] * len(_ADDED)
        for cycle, count, first, _ in self.runs:
            lo, hi = max(a + 1, first), min(n, first + count - 1)
            if lo > hi:
                continue
            m = hi - lo + 1
            add = cycle.dadd if m == 1 else map(operator.mul, cycle.dadd, repeat(m))
            out = list(map(operator.add, out, add))
        return out

    def last_consuming(self, a: int, n: int) -> tuple[int, _Cycle]:
        """(B(m-1), cycle m) for the last cycle m in a+1 .. n that takes words (there must be one)."""
        for cycle, count, first, start in reversed(self.runs):
            lo, hi = max(a + 1, first), min(n, first + count - 1)
            if lo <= hi and cycle.d[CONSUMED]:
                return start + (hi - first) * cycle.d[T], cycle
        raise ValueError(f"no cycle in {a + 1}..{n} takes words")

    def each(self, a: int, n: int):
        """(n, B(n-1), cycle) for the cycles a+1 .. n that take words (one per run otherwise)."""
        for cycle, count, first, start in self.runs:
            lo, hi = max(a + 1, first), min(n, first + count - 1)
            for c in range(lo, hi + 1) if cycle.d[CONSUMED] or cycle.wait_ns is not None else ():
                yield c, start + (c - first) * cycle.d[T], cycle


class _SpinReads(Disturbances):
    """``q`` whole reads of ``w = size / 4`` words each, spun through as one interval."""

    def __init__(self, ff: HwrngFastForward, task: Task, core: "HwrngCore", size: int, q: int,
                 n_first: int, r: int, c: int, cap: int | None, call: "ReadCall | None" = None):
        self.ff, self.task, self.core, self.size = ff, task, core, size
        #: the read in progress whose words these are (skip_words: ``size`` 4), or None: whole reads
        self.call = call
        self.k = task.k
        self.rng = core.rng
        self.t0 = self.k.now
        self.q, self.w, self.n_first, self.r, self.c = q, size // 4, n_first, r, c
        #: recheck_at falls in the spin toward this word (one more status read there)
        self.cap = cap
        self.R = self.rng.recheck_at
        self.stolen = 0          # interrupt time inside spins (taken from the spin, as in detail)
        self.cut_at: int | None = None

    def T(self, i: int) -> int:
        """Landing time of the i-th word read (0-based)."""
        return self.rng.word_time(self.n_first + i)

    def end(self, q: int) -> int:
        return self._copy_end(q * self.w - 1)

    def _copy_end(self, i: int) -> int:
        """The end of the i-th word's copy: landing, RNG_STATUS, RNG_DATA, the
        copy -- where rng_dev_read() checks need_resched()."""
        return self.T(i) + 3 * self.r + self.c

    def _landed(self, t: int) -> int:
        """Words of this skip landed in the FIFO by ``t`` (not capped at the planned ones)."""
        return max(0, self.rng.produced(t) - self.n_first + 1)

    def _picked_up(self, t: int) -> int:
        """Words picked up by ``t`` (their status read over), at most the planned ones."""
        return min(self.q * self.w, self._landed(t - self.r))

    def run(self) -> TaskBody:
        task, core, rng, k = self.task, self.core, self.rng, self.k
        lock = core.reading_mutex
        yield from mutex_lock(task, lock)   # free: no sleep
        rq = k.cpus[task.cpu]
        rq.attach(self)
        self.ff.jumps += 1
        yield RunUntil(self.end(self.q))
        rq.detach(self)
        t = self.k.now if self.cut_at is None else self.cut_at
        on_to_check = self.cut_at is not None and rq.need_resched and not k.preemptible and k.now == t
        if on_to_check:
            # A wakeup that cannot preempt the reader: rng_dev_read() sees
            # need_resched() only after a word's copy, so the reader goes on to
            # the end of the word it reads or spins toward (as in detail), and
            # sleeps there (below) -- on the tick side of that copy's end.
            t = self._copy_end_after(t)
            if t > k.now:
                yield Run(t - k.now)
        # words picked up by ``t`` (their status read over) and whole reads done
        nw = self._picked_up(t)
        done = min(self.q, self._landed(t - 3 * self.r - self.c) // self.w)    # reads whose last copy ended
        if self.cut_at is not None:
            nw = max(nw, done * self.w)
        comm = task.comm
        if nw:
            last = self.T(nw - 1)
            rng.consumed_words += nw
            rng._t_ref = last + self.r
            rng._level_ref = 0
            if rng.consumed_words > rng.produced(k.now):  # pragma: no cover - by construction
                raise RuntimeError("bcm2835 rng delivered more words than it generated")
            if rng.read_log is not None:
                rng.read_log.extend((self.T(i) + self.r, 1, comm) for i in range(nw))
        capped = self.cap is not None and t >= self.R + self.r    # the extra status read is over
        spin = self._spin_until(t, nw) - self.stolen - capped * self.r
        rng.spin_ns[comm] = rng.spin_ns.get(comm, 0) + max(0, spin)
        spinning = self.cut_at is not None and not on_to_check    # cut inside a spin
        rng.wait_calls[comm] = rng.wait_calls.get(comm, 0) + nw + capped + spinning
        core.bytes_to_user[comm] = core.bytes_to_user.get(comm, 0) + done * self.size
        call = self.call
        if call is None:
            core.reads_returned(comm, done, done * self.size)
            self.ff.reads_skipped += done
        else:
            call.size -= 4 * done
            call.ret += 4 * done
            self.ff.words_skipped += done
        core.data_avail = 4 * (nw - done * self.w)   # a cut: a partial read's words wait in rng_buffer
        mutex_unlock(task, lock)
        if (self.cut_at is not None and nw and self._copy_end(nw - 1) == t
                and k.cpus[task.cpu].need_resched):
            # cut (or gone on) to a word's copy end: rng_dev_read() checks need_resched() there
            yield from schedule_timeout_interruptible(task, 1)
        return done

    def _copy_end_after(self, t: int) -> int:
        """The end of the first word's copy at or after ``t`` (the next point
        where rng_dev_read() checks need_resched()): of the word picked up by
        ``t`` if its copy is still going on, else of the next word."""
        i = self._picked_up(t)
        if i and self._copy_end(i - 1) >= t:
            return self._copy_end(i - 1)
        return self._copy_end(i)

    def _spin_until(self, t: int, nw: int) -> int:
        """CPU time spent spinning from the start to ``t``, ``nw`` words picked up."""
        r, c = self.r, self.c
        if nw == 0:
            return max(0, t - self.t0 - r)
        # before the first word, then between consecutive words
        spin = self.T(0) - self.t0 - r + self.T(nw - 1) - self.T(0) - (nw - 1) * (4 * r + c)
        after = self.T(nw - 1) + 4 * r + c
        if self.cut_at is not None and t > after:
            spin += t - after    # spinning toward the next word when cut
        return spin

    def disturb(self, kind: str, start: int, end: int, p: Task | None = None) -> None:
        """An interrupt inside a spin takes spin time (exact); anything else
        on the reader's CPU, or a task blocking on ``reading_mutex``, cuts the
        skip at ``start`` (approximate)."""
        if self.cut_at is not None:
            return
        if kind == "irq":
            rng = self.rng
            i = rng.produced(start) - self.n_first + 1   # words landed by ``start``
            lo = self.t0 + self.r if i <= 0 else self.T(i - 1) + 4 * self.r + self.c
            hi = self.T(max(i, 0))
            if self.cap is not None and start <= self.R + self.r and end >= self.R:
                hi = lo   # the extra status read at recheck_at is not a spin
            if lo <= start and end < hi and i < self.q * self.w:
                self.stolen += end - start
                return
        self.cut_at = start
        self.ff.inexact += 1
        self.task.k.cpus[self.task.cpu].detach(self)
        self.task.k.end_spin(self.task, max(start, self.task.k.now))


class _Skip(Disturbances):
    """One skip in progress: the poller asleep across cycles 1 .. j-1 of
    ``plan``; the sleep ends with cycle j's wakeup (``W(j)``), and the rest of
    cycle j runs in detail."""

    def __init__(self, ff: HwrngFastForward, task: Task, plan: _Plan, j: int, timer_wait: bool,
                 counters: tuple):
        self.ff, self.task, self.plan = ff, task, plan
        self.k = task.k
        self.rq = self.k.cpus[task.cpu]
        self.j = j
        self.planned = j          # j as planned (a cut or an early wakeup lowers it)
        self.timer_wait = timer_wait
        self.applied = 0          # skipped cycles already added to the counters
        self.counters = list(counters)   # the snapshot counters at B(applied)
        self.timer: timer_list | None = None
        self.ev = None
        self.forgotten = ff.forgotten   # forget() calls before the skip

    def _arm(self, t: int) -> None:
        """The wakeup that ends the sleep, at ``t``."""
        k = self.k
        self._disarm()
        if self.timer_wait and t > k.now and t % k.TICK_NSEC == 0:
            timer = timer_list(_process_timeout, name="process_timeout", data=self.task)
            timer.expires = k.jiffies_at(t) - 1
            k.timers.enqueue_bucket(timer, self.task.cpu, k.jiffies_at(t))
            self.timer = timer
        else:
            self.ev = k.engine.at(max(t, k.now), k.wake_up_process, self.task)

    def _disarm(self) -> None:
        if self.timer is not None:
            self.k.timers.del_timer(self.timer)
            self.timer = None
        if self.ev is not None:
            self.ev.cancel()
            self.ev = None

    def sleep(self) -> TaskBody:
        task, ff, plan = self.task, self.ff, self.plan
        rng = ff.rng
        if self.timer_wait:  # cancellable through rng->dying, as hwrng_msleep/hwrng_yield are
            rng.dying.waiters.append(task)
        self._arm(plan.W(self.j))
        self.rq.attach(self)
        ff.jumps += 1
        yield BLOCK
        self._woken()
        self._disarm()
        if task in rng.dying.waiters:
            rng.dying.waiters.remove(task)
        n = self.applied
        if rng.wait_log is not None:  # the wait in progress (cycle n+1's), as the real one logs it
            rng.wait_log.append((task.comm, plan.B(n), self.k.now))
        if self.j == self.planned and n >= 1 and ff.forgotten == self.forgotten:
            # learning goes on: cycle j starts from the boundary B(j - 1) the skip
            # predicted -- unless the wait changed meanwhile (forget()): cycle j,
            # begun under the old wait, must not be learned as one of the new
            last = plan.cycle(n)
            counters = tuple(self.counters)
            ff._last[task] = (counters, last.state, (last.state, ff._phase(self.k, counters[T])))
            ff._events[task] = []
        else:
            ff._last.pop(task, None)
            ff._events.pop(task, None)

    def _woken(self) -> None:
        """The poller has been woken (by the skip's own wakeup or anything
        else): the skipped cycles whose status read was over by then are done."""
        self.rq.detach(self)
        if self.applied == self.j - 1:
            return
        plan = self.plan
        woke = self.task.woken_ns
        n = min(self.j - 1, plan.cycles_before(woke))
        if n + 1 < self.j and woke >= plan.W(n + 1):
            self.ff.inexact += 1   # woken inside cycle n+1's awake window
        self._apply(n)
        self.j = n + 1

    def _apply(self, n: int) -> None:
        """Add skipped cycles ``applied+1 .. n`` to the counters and put the
        reader's frame state, rng_buffer and the FIFO where cycle n left them."""
        a = self.applied
        if n <= a:
            return
        task, rq, rng, plan = self.task, self.rq, self.ff.rng, self.plan
        core = rng.core
        add = plan.sums(a, n)
        (exec_, vr, nvcsw, nivcsw, nr_sw, busy, waits, consumed, to_user, reads, read_bytes) = add
        task.sum_exec_runtime += exec_
        task.vruntime += vr
        task.nvcsw += nvcsw
        task.nivcsw += nivcsw
        rq.nr_switches += nr_sw
        rq.busy_ns += busy
        last = plan.cycle(n)
        # min_vruntime followed the poller, alone on its CPU, at each switch-in
        v_switch_in = task.vruntime - last.d[VRUNTIME]
        if v_switch_in > rq.min_vruntime:
            rq.min_vruntime = v_switch_in
        comm = task.comm
        rng.wait_calls[comm] = rng.wait_calls.get(comm, 0) + waits
        if consumed:
            rng.consumed_words += consumed
            core.bytes_to_user[comm] = core.bytes_to_user.get(comm, 0) + to_user
            core.reads_returned(comm, reads, read_bytes)
            # the FIFO as the last skipped consumption left it
            if rng.read_log is not None:
                for c, base, cycle in plan.each(a, n):
                    for off, seen, taken in cycle.events:
                        if taken:
                            rng.read_log.append((base + off, taken, comm))
            base, cycle = plan.last_consuming(a, n)
            for off, seen, taken in reversed(cycle.events):
                if taken:
                    rng._t_ref, rng._level_ref = base + off, seen - taken
                    break
            if rng.consumed_words > rng.produced(self.k.now):  # pragma: no cover - by construction
                raise RuntimeError("bcm2835 rng delivered more words than it generated")
        # the frames of the read(2) in progress and rng_buffer, as at the end of cycle n
        call_state, data_avail, _, _ = last.state
        call = core.reading.get(task)
        if call is not None and call_state is not None:
            call.size, call.ret = call_state
        core.data_avail = data_avail
        if rng.wait_log is not None:
            for c, base, cycle in plan.each(a, n):
                rng.wait_log.append((comm, base, base + cycle.wait_ns))
        counters = self.counters
        counters[EXEC:] = map(operator.add, counters[EXEC:], add)    # (_ADDED: EXEC onwards)
        counters[T] = plan.B(n)
        counters[WOKEN] = plan.W(n)
        self.ff.polls_skipped += n - a
        self.applied = n

    def disturb(self, kind: str, start: int, end: int, p: Task | None = None) -> None:
        """Something else happens on the poller's CPU from ``start`` (task ``p``
        enqueued now, or an interrupt until ``end``), or ``p`` blocks on
        ``reading_mutex`` (``mutex``: the poller's next unlock, in its next
        awake window, hands it over): cut the skip back to the first cycle it
        could affect, which is then simulated in detail."""
        if p is self.task:
            self._woken()     # its wakeup: the counters catch up before anything else runs
            return
        plan = self.plan
        # first skipped cycle whose last status read is not over by ``start``
        n = max(self.applied, plan.cycles_before(start)) + 1
        if n > 1 and start == plan.B(n - 1) and (kind == "enqueue" or end > start):
            # At the very nanosecond a skipped cycle's last status read ends: in
            # detail the order of the two events decides whether the poller is
            # still on its CPU (the read's end delayed by the interrupt, the task
            # woken beside it) or already waiting.  The skip does not know that
            # order and takes the poller as waiting: not known to be exact.
            self.ff.inexact += 1
        if n >= self.j:
            return            # only the real last wakeup is left: the kernel handles it
        if kind == "irq" and end < plan.W(n):
            return            # over before the next skipped wakeup: no effect
        self.rq.detach(self)
        self._apply(n - 1)
        self.j = n
        if start < plan.W(n):
            self._arm(plan.W(n))
            return
        self.ff.inexact += 1      # inside cycle n's awake window
        if kind == "enqueue" and not self.k.preemptible:
            # ``p`` cannot preempt the poller, awake since W(n) in detail: ``p``
            # waits for its next scheduling point.  A reader sees need_resched()
            # after each copy, the last one an RNG_STATUS read before B(n); one
            # of those still to come, it sleeps a jiffy there: the poller runs
            # its window first (``start - W(n)`` late), before ``p``.  With no
            # check left (a kthread, a window with no copy) it ends its window
            # and waits for cycle n+1, and ``p`` runs meanwhile.
            if plan.cycle(n).d[TO_USER] and start <= plan.B(n) - self.ff.rng.params.rng_readl_ns:
                self._disarm()
                self.k.wake_up_on_idle(self.task, run_here=False)   # (inside p's enqueue)
                return
            self.j = n + 1
            self._arm(plan.W(n + 1))
            return
        self._arm(plan.W(n))      # wake now


__all__ = ["HwrngFastForward", "HwrngLearned"]
