"""Fast-forward of the bcm2835 wait loop: simulator machinery, not kernel code.

The contract, what is skipped, when a skip declines and how to test a
change: docs/fast-forward.md.  In short, a skip commits only a stretch in
which nothing that can touch it runs (no engine event that may act on the
CPUs of the rng's users before the stretch's last poller action:
:meth:`~kenv.sim.engine.Engine.quiet_limit`, :meth:`HwrngFastForward._scopes`),
so its outcome is the detailed one by arithmetic; otherwise it declines or
ends earlier, and the detailed simulation runs.  Events of other CPUs run
inside a skipped stretch; a :class:`~kenv.kernel.observe.SkipFence` raises
if one of them reaches the fenced CPUs before the stretch ends.

* :meth:`HwrngFastForward.skip_polls`: a poller whose driver sleeps in
  ``bcm2835_rng_read()`` goes round *wait cycles* (sleep, wake, read
  ``RNG_STATUS``, take what the FIFO holds, copy it out, find the FIFO empty,
  sleep again).  A cycle runs from one *boundary* (a status read just found
  the FIFO empty) to the next.  Cycles are learned from the detailed runs
  (:class:`WaitCycle`, filed by :class:`StartKey` in a :class:`HwrngLearned`
  that the simulation owns and passes down), predicted against the
  generator's landings, and skipped: the poller sleeps once, to the wakeup of
  the first cycle it runs in detail, with the skipped cycles' effects applied.
* :meth:`HwrngFastForward.skip_reads` / :meth:`~HwrngFastForward.skip_words`:
  a reader that calls ``read(2)`` back to back while the driver spins
  (``cpu_relax``) picks up each word the instant it lands, so whole reads (or
  the words of one) follow from the landing times by arithmetic and are spun
  through as one ``RunUntil`` interval.

The equivalence with the detailed simulation is a test (tests/test_hwrng_ff.py,
tests/search_fast_forward.py): an rng made with ``learned=None`` simulates
every cycle.
"""

from __future__ import annotations

import math
import operator
from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import repeat
from typing import TYPE_CHECKING, NamedTuple

from ..kernel.core import BLOCK, NICE_0_LOAD, RunUntil, Task, TaskBody
from ..kernel.mutex import mutex_lock, mutex_unlock
from ..kernel.observe import account_skipped_stretch
from ..kernel.sleep import schedule_timeout, schedule_timeout_arm, schedule_timeout_left
from ..kernel.timer import LVL_GRAN, calc_wheel_index, timer_list
from ..sim.engine import NSEC_PER_SEC
from .declines import Declines, Reason
from .protocol import Horizon, JumpRule, commit_skip, quiet_horizon

if TYPE_CHECKING:  # pragma: no cover
    from ..kernel.core import CPU, Kernel
    from ..drivers.hwrng import Bcm2835Rng, HwrngCore, ReadCall

#: learned cycles kept per start key (different FIFO inputs give different cycles)
MAX_RECORDS = 8
#: status reads recorded per cycle; a longer one is not learned
MAX_EVENTS = 32
#: start keys kept per table: a full table learns no new start key (a cycle
#: not learned is simulated in detail).  Kernel-v3's default mix needs 78 in
#: all tables together; HwrngWait-v2 with seven waits ~930 over its tables.
MAX_KEYS = 2048
#: What a HwrngLearned keeps: at most MAX_TABLES tables (one per machine,
#: poller and wait) holding MAX_LEARNED_KEYS start keys and MAX_LEARNED_PLANS
#: plans in all, the least recently used table forgotten first to make room
#: (its cycles are simulated in detail again when they come back); with
#: MAX_RECORDS cycles per key and MAX_EVENTS status reads per cycle this
#: bounds what a long-lived environment keeps (benchmarks/ff_memory.py).
MAX_TABLES = 64
MAX_LEARNED_KEYS = 4096
MAX_LEARNED_PLANS = 4096
_UNPLANNED = object()    # (a plan not made yet; None is "no plan")


# ------------------------------------------------------------------ records

class Counters(NamedTuple):
    """What a poller's wait cycle adds to, read at a boundary (or a cycle's deltas)."""

    time: int            # now
    woken: int           # the poller's last wakeup
    exec_ns: int         # its sum_exec_runtime
    vruntime: int
    nvcsw: int
    nivcsw: int
    nr_switches: int     # its CPU's
    busy_ns: int         # its CPU's
    waits: int           # the rng's wait calls of its comm
    consumed: int        # words the rng has delivered
    to_user: int         # the core's bytes to user of its comm
    reads: int           # the core's read(2)s returned of its comm ...
    read_bytes: int      # ... and their bytes


class FrameState(NamedTuple):
    """What the poller's frames and the lock hold at a boundary."""

    call: tuple[int, int] | None   # the read(2) in progress: (size, ret) (ReadCall), None: the kthread
    data_avail: int                # rng_buffer's bytes
    mutex_waiters: int             # reading_mutex's wait list ...
    mutex_contended: int           # ... and its contended count


class StartKey(NamedTuple):
    """What a wait cycle depends on besides its table and the FIFO: the frame
    state and, for a timer-wheel wait, the time within the jiffy and the
    jiffy within the timeout's wheel granularity (calc_index rounding)."""

    state: FrameState
    phase: tuple


class StatusRead(NamedTuple):
    """An RNG_STATUS read of a cycle: its time after the cycle's start, the
    words it saw and the words then taken."""

    offset: int
    seen: int
    taken: int


class Boundary(NamedTuple):
    """A poller's clean boundary: its counters and the key of the cycle that starts there."""

    counters: Counters
    key: StartKey


class FifoState(NamedTuple):
    """The FIFO as a cycle leaves it: level after the last read, that read's
    time, and the words the generator had produced by then."""

    level: int
    last_read_ns: int
    produced: int


@dataclass(slots=True, eq=False)
class WaitCycle:
    """One wait cycle, boundary to boundary, as measured."""

    deltas: Counters
    wake_offset: int                      # its wakeup after the cycle's start
    end_state: FrameState
    status_reads: tuple[StatusRead, ...]
    wait_ns: int | None                   # its wait's duration (for wait_log; None: not logged)
    #: everything measured: two cycles with the same identity are the same cycle
    identity: tuple = field(init=False)
    #: it took nothing and every status read saw an empty FIFO
    empty: bool = field(init=False)

    def __post_init__(self) -> None:
        self.identity = (self.deltas, self.wake_offset, self.end_state, self.status_reads, self.wait_ns)
        self.empty = not self.deltas.consumed and all(r.seen == 0 for r in self.status_reads)


class PlanRun(NamedTuple):
    """``count`` repetitions of ``cycle``: cycles ``first`` .. first+count-1 of a
    plan, the first starting at ``start``."""

    cycle: WaitCycle
    count: int
    first: int
    start: int


class SpinPlan(NamedTuple):
    """What :class:`SpinReads` spins through: ``reads`` reads, the first word
    being the generator's ``first_word``-th, ``recheck_word`` the word whose
    spin crosses ``recheck_at`` (one more RNG_STATUS read there) or None;
    ``scopes``: the CPUs to fence while it does (None: nothing else runs)."""

    reads: int
    first_word: int
    recheck_word: int | None
    scopes: "frozenset[CPU] | None"


class SpinAsk(NamedTuple):
    """A reader's boundary for :class:`SpinRule`: spin through reads of
    ``size`` bytes, at most ``max_reads`` (None: no limit); ``call``: the
    read in progress whose words these are (skip_words), None: whole reads."""

    task: Task
    core: "HwrngCore"
    size: int
    max_reads: int | None
    call: "ReadCall | None"


class ScopeSet(NamedTuple):
    """The CPUs that the rng's users -- the readers seen, the hwrng kthread and
    the task that skips -- may run on (:meth:`HwrngFastForward._scopes`;
    None: one may run anywhere), and what they were worked out from."""

    seen: frozenset          # HwrngFastForward.users then
    fill: "Task | None"      # the hwrng kthread then
    masks: tuple             # (user, its cpus_allowed) for each of them then
    cpus: "frozenset[CPU] | None"

    @classmethod
    def of(cls, ff: "HwrngFastForward", task: Task) -> "ScopeSet":
        fill = ff.rng.core.hwrng_fill
        users = ff.users | {task}
        if fill is not None:
            users.add(fill)
        masks = tuple((user, user.cpus_allowed) for user in users)
        cpus = None
        if all(mask is not None for _, mask in masks):
            cpus = frozenset(task.k.cpus[c] for _, mask in masks for c in mask)
        return cls(frozenset(ff.users), fill, masks, cpus)

    def holds(self, ff: "HwrngFastForward") -> bool:
        """Whether the users and their affinities are still those it was
        worked out from (set_cpus_allowed_ptr() gives a task a new mask)."""
        if self.seen != ff.users or self.fill is not ff.rng.core.hwrng_fill:
            return False
        for user, mask in self.masks:
            if user.cpus_allowed is not mask:
                return False
        return True


# ------------------------------------------------------------------ memory

class HwrngLearned:
    """The wait cycles one simulation has learned, per machine, poller and
    wait (:func:`_cycle_table_key`), by start key, and the plans made from
    them.  Owned by whoever runs the simulation (an environment keeps one
    across its episodes, an experiment run makes its own) and passed down to
    each rng (:class:`~kenv.drivers.hwrng.Bcm2835Rng`); bounded: at most
    ``max_tables`` tables (the least recently used forgotten first),
    ``max_keys`` start keys and ``max_plans`` plans in all."""

    __slots__ = ("_tables", "max_tables", "max_keys", "max_plans", "keys", "plans", "declines")

    def __init__(self, max_tables: int = MAX_TABLES, max_keys: int = MAX_LEARNED_KEYS,
                 max_plans: int = MAX_LEARNED_PLANS):
        self._tables: OrderedDict[tuple, CycleTable] = OrderedDict()
        self.max_tables = max_tables
        self.max_keys = max_keys
        self.max_plans = max_plans
        #: start keys and plans in the tables kept
        self.keys = 0
        self.plans = 0
        #: why the rngs using this memory declined, counted (kenv.fastforward.declines)
        self.declines = Declines()

    def table(self, key: tuple) -> "CycleTable":
        """The table of ``key`` (a new, empty one if there is none)."""
        tables = self._tables
        table = tables.get(key)
        if table is None:
            table = tables[key] = CycleTable()
            if len(tables) > self.max_tables:
                self._forget_oldest()
        else:
            tables.move_to_end(key)
        return table

    def room_for_key(self, table: "CycleTable") -> bool:
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

    def keep_plan(self, table: "CycleTable", pkey: tuple, plan: tuple | None) -> None:
        """File ``plan`` in ``table`` under ``pkey``; past ``max_plans`` in all,
        every table's plans are forgotten first (they are made again as needed)."""
        if not table.kept:
            return
        if self.plans >= self.max_plans:
            for t in self._tables.values():
                t.plans.clear()
            self.plans = 0
        table.plans[pkey] = plan
        self.plans += 1

    def forget_plans(self, table: "CycleTable") -> None:
        """``table`` changed (a cycle learned): the plans made from it go."""
        if table.kept:
            self.plans -= len(table.plans)
        table.plans.clear()

    def _forget_oldest(self) -> None:
        _, table = self._tables.popitem(last=False)
        table.kept = False
        self.keys -= len(table)
        self.plans -= len(table.plans)

    def tables(self) -> list["CycleTable"]:
        """The tables kept, least recently used first."""
        return list(self._tables.values())

    def clear(self) -> None:
        """Forget everything learned."""
        while self._tables:
            self._forget_oldest()

    def __len__(self) -> int:
        return len(self._tables)


class CycleTable(dict):
    """One table of a :class:`HwrngLearned`: start key -> the cycles seen to
    follow it (a list of :class:`WaitCycle`).  ``plans`` keeps the plans made
    from it, by what a plan depends on besides the table (see
    :meth:`HwrngFastForward._plan`)."""

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


# ------------------------------------------------------------------ the fast-forward

class HwrngFastForward:
    """The fast-forwards of one rng: wait cycles (:meth:`skip_polls`) and
    back-to-back ``cpu_relax()`` reads (:meth:`skip_reads`, :meth:`skip_words`)."""

    @staticmethod
    def covers(k: "Kernel") -> bool:
        """Whether its records hold every way ``k`` runs a poller's cycle: not
        when timers expire in the timer softirq's thread (PREEMPT_RT with
        interrupt threads, kenv.kernel.irq), where a poller's ``msleep()``
        wakeup is a ksoftirqd/ktimers run that no record holds."""
        return k.irq is None

    def __init__(self, rng: "Bcm2835Rng", learned: HwrngLearned):
        self.rng = rng
        #: what this and other rngs of the same simulation have learned
        self.learned = learned
        #: the landing times repeat, shifted, every _period ns: the shortest time
        #: in which the generator produces a whole number of words
        self._period = NSEC_PER_SEC // math.gcd(NSEC_PER_SEC, rng.params.word_rate_hz)
        #: a spinning reader's RNG_STATUS/RNG_DATA read and copy costs, and whether
        #: a word is processed (status, data read, copy, the next status) before
        #: the next one lands: one word per read, the one that just landed
        self.readl_ns, self.copy_ns = rng.params.rng_readl_ns, rng.params.copy_chunk_ns
        self._word_by_word = NSEC_PER_SEC // rng.params.word_rate_hz > 4 * self.readl_ns + self.copy_ns
        #: per poller: its last clean boundary
        self._last: dict[Task, Boundary] = {}
        #: per (poller, wait kind, wait args): its table in self.learned
        self._tables: dict[tuple, CycleTable] = {}
        #: per poller: the RNG_STATUS reads of the cycle in progress (offset: their time)
        self._status_reads: dict[Task, list[StatusRead] | None] = {}
        #: every task that has read RNG_STATUS (the rng's users: _scopes)
        self.users: set[Task] = set()
        #: per task: the CPUs its skips fence, while they hold (_scopes)
        self._scope_sets: dict[Task, ScopeSet] = {}
        self.jumps = 0
        self.polls_skipped = 0
        self.reads_skipped = 0
        self.words_skipped = 0
        #: calls of forget(): a skip that slept across one learns nothing from its end
        self.forgotten = 0
        #: the jump rules of the wait cycles (skip_polls) and the spinning reads (skip_reads, skip_words)
        self.polls = PollRule(self)
        self.spins = SpinRule(self)

    # ------------------------------------------------------------ measuring
    def forget(self) -> None:
        """The wait changed (the driver rebound): the cycles in progress end
        abnormally (their sleep may be cut short); learn nothing from them."""
        self._last.clear()
        self._status_reads.clear()
        self.forgotten += 1

    def status_read(self, task: Task, seen: int, taken: int) -> None:
        """bcm2835_rng_read() read RNG_STATUS: ``seen`` words, ``taken`` read."""
        self.users.add(task)
        reads = self._status_reads.get(task)
        if reads is not None:
            if len(reads) < MAX_EVENTS:
                reads.append(StatusRead(task.k.now, seen, taken))
            else:
                self._status_reads[task] = None   # not a short wait cycle: nothing to learn

    def resume_at(self, task: Task, boundary: Boundary | None) -> None:
        """After a skip: the poller's next cycle starts at ``boundary`` (the
        one the skip computed: learning goes on), or at no clean boundary
        (None: nothing is learned from the cycle in progress)."""
        if boundary is None:
            self._last.pop(task, None)
            self._status_reads.pop(task, None)
        else:
            self._last[task] = boundary
            self._status_reads[task] = []

    def start_key(self, k, t: int, state: FrameState) -> StartKey:
        """The start key of a wait begun at ``t`` from frame state ``state``."""
        return StartKey(state, self._phase(k, t))

    def _scopes(self, task: Task) -> "frozenset[CPU] | None":
        """The CPUs whose events can touch a skip of ``task`` (see
        Engine.quiet_limit): those the rng's users (``task``, the readers
        seen, the hwrng kthread) may run on.  None -- every event counts --
        if one may run anywhere, if the kernel balances load (every CPU's
        __schedule() looks at every runqueue), or if one of those CPUs has an
        observer (another fast-forward's: no fence can go there).  The CPUs
        are kept per task (:class:`ScopeSet`) while the users and their
        affinities stay as they were; the observers are looked at each time."""
        if task.k.lb is not None:
            return None
        known = self._scope_sets.get(task)
        if known is None or not known.holds(self):
            known = self._scope_sets[task] = ScopeSet.of(self, task)
        cpus = known.cpus
        if cpus is not None:
            for rq in cpus:
                if rq.observer is not None:
                    return None
        return cpus

    def _table(self, task: Task) -> CycleTable:
        """The cycles learned for ``task`` with the current wait, by start key."""
        wait = self.rng.wait
        key = (task, wait.kind, wait.args)     # (what WaitStrategy compares, hashed in C)
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = self.learned.table(_cycle_table_key(task, self.rng))
        return table

    def _phase(self, k, t: int) -> tuple:
        """What a wait started at ``t`` depends on besides the frames (see StartKey)."""
        w = self.rng.wait
        if w.on_timer_wheel:
            # the tick phase, and the phase within the wheel level's granularity
            # its expiry rounds to (calc_index(); level 0, granularity 1 for a
            # one-jiffy timeout)
            timeout = w.timeout_jiffies(k.HZ)
            j = k.jiffies_at(t)
            lvl, _ = calc_wheel_index(j + timeout, j, k.HZ)
            return (t % k.TICK_NSEC, j % LVL_GRAN(lvl))
        return (0, 0)

    def _boundary(self, task: Task) -> Boundary | None:
        """The poller's counters and start key now, or None if this boundary
        is not clean (something else queued or pending on its CPU or another
        fast-forward there, no declared step, a trace being recorded, the lock
        not the poller's)."""
        k = task.k
        rng = self.rng
        rq = k.cpus[task.cpu]
        now = k.now
        core = rng.core
        if (rng.quiet_until is None or k.engine.recorder is not None or rq.cfs_queue or rq.rt_queue
                or rq.irq_until > now or rq.need_resched or rq.observer is not None or task.woken_ns is None
                or core is None or core.reading_mutex.owner is not task or not rng.wait.sleeps):
            return None
        comm = task.comm
        call = core.reading.get(task)
        counters = Counters(now, task.woken_ns, task.sum_exec_runtime, task.vruntime, task.nvcsw, task.nivcsw,
                            rq.nr_switches, rq.busy_ns, rng.wait_calls.get(comm, 0), rng.consumed_words,
                            core.bytes_to_user.get(comm, 0), core.reads.get(comm, 0),
                            core.read_bytes.get(comm, 0))
        state = FrameState(None if call is None else (call.size, call.ret), core.data_avail,
                           len(core.reading_mutex.wait_list), core.reading_mutex.contended)
        return Boundary(counters, StartKey(state, self._phase(k, now)))

    def _learn(self, task: Task) -> Boundary | None:
        """At a boundary: learn the cycle that ends here; return the boundary
        (None if it is not clean)."""
        rng = self.rng
        reads = self._status_reads.get(task)
        self._status_reads[task] = []          # the next cycle's status reads
        here = self._boundary(task)
        last = self._last.get(task)
        if here is None:
            self._last.pop(task, None)
            return None
        self._last[task] = here
        if last is None or reads is None:
            return here
        t0 = last.counters.time
        d = Counters._make(map(operator.sub, here.counters, last.counters))
        if (d.time <= 0 or d.exec_ns != d.busy_ns or d.nvcsw != 1 or d.nivcsw != 0 or d.nr_switches != 1
                or d.waits != 1 or (d.consumed and last.key.state.call is None)):
            return here   # not one sleep with nothing else on the CPU (or the kthread's loop)
        start, end = last.key.state, here.key.state
        if (start.mutex_waiters, start.mutex_contended) != (end.mutex_waiters, end.mutex_contended) or (
                d.consumed and start.mutex_waiters):
            # someone blocked on reading_mutex meanwhile, or the reader's unlock
            # after its copy woke a waiter: the cycle touched another task
            return here
        wait_ns = None
        log = rng.wait_log
        if log is not None:
            if not log or log[-1][0] != task.comm or log[-1][1] != t0:
                return here
            wait_ns = log[-1][2] - log[-1][1]
        cycle = WaitCycle(d, here.counters.woken - t0, here.key.state,
                          tuple(StatusRead(r.offset - t0, r.seen, r.taken) for r in reads), wait_ns)
        table = self._table(task)
        known = table.get(last.key)
        if known is None:
            if not self.learned.room_for_key(table):
                return here
            known = table[last.key] = []
        if any(c.identity == cycle.identity for c in known):
            return here      # known already
        if len(known) >= MAX_RECORDS:
            del known[0]
        known.append(cycle)
        self.learned.forget_plans(table)     # made with the table as it was
        return here

    # ------------------------------------------------------------ wait cycles
    def skip_polls(self, task: Task) -> TaskBody:
        """Called by ``_wait`` with the FIFO just found empty; if the cycles
        from here on are known and nothing else runs meanwhile, sleep past
        them and return True (the loop then reads ``RNG_STATUS``); else return
        False at once (the loop waits for real)."""
        skip = self.polls.jump_at(task)
        if skip is None:
            return False
        yield from skip.sleep()
        return True

    def _make_plan(self, k, table: CycleTable, key: StartKey, now: int, horizon: int,
                   no_reads: bool) -> "CyclePlan | None":
        """The known cycles from a boundary at ``now`` with start ``key``: at
        each boundary the one cycle learned from its key whose status reads see
        what the FIFO will hold (two that fit: the key misses something, the
        plan stops), ending by ``horizon``; or None."""
        rng = self.rng
        plan = CyclePlan(now)
        logs = rng.wait_log is not None      # (a cycle learned without its wait's length cannot log it)
        last_read = rng.last_read_ns
        fifo = FifoState(rng.level_after_last_read, last_read, rng.produced(last_read))
        while True:
            known = table.get(key)
            if not known:
                break
            base = plan.end
            match = None
            for c in known:
                if (base + c.deltas.time > horizon or (no_reads and c.deltas.reads)
                        or (logs and c.wait_ns is None)):
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
            next_key = StartKey(c.end_state, self._phase(k, base + c.deltas.time))
            reps = 1
            if next_key == key and not c.deltas.consumed and len(known) == 1:
                # the same cycle over and over (polls of an empty FIFO): as many as fit
                reps = (horizon - base) // c.deltas.time
                if rng.t_start is not None:
                    reps = min(reps, (rng.word_time(fifo.produced + 1) - 1 - base) // c.deltas.time)
                reps = max(1, reps)
            plan.add(c, reps)
            key = next_key if reps == 1 else StartKey(c.end_state, self._phase(k, plan.end))
        return plan if plan.n else None

    def _fifo_after(self, c: WaitCycle, base: int, fifo: FifoState) -> FifoState | None:
        """The FIFO after cycle ``c`` started at ``base``, or None if one of its
        status reads would see something else than when it was measured."""
        rng = self.rng
        if not fifo.level and c.empty:
            # empty all along unless a word lands: its last read, at base + dt, decides
            if rng.t_start is None or base + c.deltas.time < rng.word_time(fifo.produced + 1):
                return fifo
            return None
        produced = rng.produced
        cap = rng.params.fifo_words
        level, last_read, p_ref = fifo
        for read in c.status_reads:
            t = base + read.offset
            p = produced(t)
            avail = min(cap, level + p - p_ref)
            if avail != read.seen:
                return None
            if read.taken:
                level, last_read, p_ref = avail - read.taken, t, p
        return FifoState(level, last_read, p_ref)

    # ---------------------------------------------------- back-to-back reads
    def skip_reads(self, task: Task, core: "HwrngCore", size: int, max_reads: int | None) -> TaskBody:
        """Called by a reader between two ``read(size)`` of /dev/hwrng: spin
        through up to ``max_reads`` (None: no limit) whole reads when the
        driver spins, returning how many (0: the reader reads for real)."""
        spin = self.spins.jump_at(SpinAsk(task, core, size, max_reads, None))
        if spin is None:
            return 0
        return (yield from spin.run())

    def skip_words(self, task: Task, core: "HwrngCore", call: "ReadCall") -> TaskBody:
        """Called by rng_dev_read() at the top of its loop, ``rng_buffer``
        empty: spin through the next words of the read in progress as
        skip_reads does whole reads (one word per turn of the loop); returns
        how many (0: none).  Not when steps end at a read's completion
        (:attr:`HwrngCore.read_budget`): the next read starts in the same
        event, and its words after the first wait the next step's way."""
        if call.size < 4 or call.size % 4 or core.read_budget is not None:
            return 0
        spin = self.spins.jump_at(SpinAsk(task, core, 4, call.size // 4, call))
        if spin is None:
            return 0
        return (yield from spin.run())


class PollRule(JumpRule):
    """The jump rule (kenv.fastforward.protocol) of a poller's wait cycles
    (:meth:`HwrngFastForward.skip_polls`), ``at`` the poller: the key, the
    boundary where a status read just found the FIFO empty (its counters and
    start key, :meth:`HwrngFastForward._learn`); the stretch, the
    :class:`CyclePlan` of known cycles to the step's end and the engine's
    ``until``, checked against the generator's landings; the guard, the first
    event that may act on the CPUs of the rng's users
    (:meth:`HwrngFastForward._scopes`); applied by a :class:`PollSkip`."""

    __slots__ = ("ff", "declines")

    def __init__(self, ff: HwrngFastForward):
        self.ff = ff
        self.declines = ff.learned.declines

    def key(self, task: Task) -> Boundary | None:
        here = self.ff._learn(task)
        if here is None:
            return self.declines.decline(Reason.POLL_BOUNDARY_NOT_CLEAN)
        return here

    def stretch(self, task: Task, here: Boundary) -> "CyclePlan | None":
        ff = self.ff
        rng = ff.rng
        k = task.k
        table = ff._table(task)
        if not table or rng.dying.done:
            return self.declines.decline(Reason.POLL_NOTHING_LEARNED)
        now = here.counters.time
        horizon = rng.quiet_until
        until = k.engine.until
        if until is not None and until < horizon:
            horizon = until
        no_reads = rng.core.read_budget is not None   # the step ends at a read: it must be real
        if no_reads:
            # (a plan that may not take a read is short and seldom made twice alike)
            plan = ff._make_plan(k, table, here.key, now, horizon, no_reads)
        else:
            # the same start key, FIFO, generator phase and horizon make the same plan
            pkey = (here.key, rng.level_after_last_read, self._generator_phase(now), horizon - now,
                    rng.wait_log is not None)
            made = table.plans.get(pkey, _UNPLANNED)
            if made is _UNPLANNED:
                plan = ff._make_plan(k, table, here.key, now, horizon, no_reads)
                ff.learned.keep_plan(table, pkey, None if plan is None else plan.relative())
            else:
                plan = None if made is None else CyclePlan.from_relative(now, made)
        if plan is None:
            return self.declines.decline(Reason.POLL_NO_PLAN)
        return plan

    def guards(self, task: Task, plan: "CyclePlan") -> Horizon | None:
        return quiet_horizon(task.k.engine, self.ff._scopes(task), self.declines)

    def repetitions(self, task: Task, here: Boundary, plan: "CyclePlan", horizon: Horizon) -> int:
        # Commit only the cycles that end before anything else runs: the first
        # one still going on at the limit is the one run in detail.
        n = min(plan.n, plan.cycles_ending_by(horizon.limit))
        if n < 1:
            return self.declines.decline(Reason.POLL_TOO_SHORT, 0)
        return n

    def apply(self, task: Task, here: Boundary, plan: "CyclePlan", horizon: Horizon, k: int) -> "PollSkip":
        return PollSkip(self.ff, task, plan, k + 1, here.counters, horizon.scopes)

    def _generator_phase(self, now: int):
        """What the FIFO's status reads from ``now`` on depend on besides its
        level: the phase of ``now`` within the generator's landing period
        (before the generator starts, the time to its start) and the words
        landed since the last read."""
        rng = self.ff.rng
        t_start = rng.t_start
        if t_start is None:
            return None
        phase = (now - t_start) % self.ff._period if now >= t_start else ("before", t_start - now)
        return phase, rng.produced(now) - rng.produced(rng.last_read_ns)


class SpinRule(JumpRule):
    """The jump rule (kenv.fastforward.protocol) of a reader's ``cpu_relax()``
    reads (:meth:`HwrngFastForward.skip_reads`, :meth:`~HwrngFastForward.skip_words`),
    ``at`` a :class:`SpinAsk`: no key but the ask itself once the reader's
    CPU and the lock are quiet (the reads follow from the generator's
    landings alone); the stretch, the reads whose last word's copy ends by the
    step's end (a :class:`SpinPlan`); the guard, the first event that may act
    on the CPUs of the rng's users; the repetitions, the reads that end by
    then, stopping at the driver's recheck (:meth:`_recheck`); applied by
    :class:`SpinReads`."""

    __slots__ = ("ff", "declines")

    def __init__(self, ff: HwrngFastForward):
        self.ff = ff
        self.declines = ff.learned.declines

    def key(self, ask: SpinAsk) -> SpinAsk | None:
        ff = self.ff
        rng = ff.rng
        task, core, size, max_reads, _ = ask
        k = task.k
        rq = k.cpus[task.cpu]
        now = k.now
        lock = core.reading_mutex
        if (rng.wait.sleeps or rng.quiet_until is None or k.engine.recorder is not None
                or size < 4 or size % 4 or core.data_avail or core.buffer_size < 4 or lock.owner is not None
                or lock.wait_list or rq.curr is not task or rq.cfs_queue or rq.rt_queue
                or rq.irq_until > now or rq.need_resched or task.weight != NICE_0_LOAD
                or rng.t_start is None or max_reads == 0 or rq.observer is not None):
            return self.declines.decline(Reason.SPIN_NOT_QUIET)
        if not ff._word_by_word:
            # words could land while one is processed: not one word per read
            return self.declines.decline(Reason.SPIN_WORDS_OVERLAP)
        return ask

    def stretch(self, ask: SpinAsk, _) -> SpinPlan | None:
        ff = self.ff
        rng = ff.rng
        r, c = ff.readl_ns, ff.copy_ns
        w = ask.size // 4
        now = ask.task.k.now
        produced = rng.produced
        first = produced(now + r) + 1            # the generator's index of the first word
        # read q ends with its last word's copy (landing + status + data read +
        # copy) before the step's end and before anything else can touch the
        # reader: quiet_until's bound here, the engine's (which may look at
        # every pending event) in guards() and repetitions()
        q = (produced(rng.quiet_until - 3 * r - c) - first + 1) // w
        if ask.max_reads is not None:
            q = min(q, ask.max_reads)
        if q < 1:
            return self.declines.decline(Reason.SPIN_TOO_SHORT)
        # the status read that starts now must find the FIFO empty
        if rng.words_available(now + r):
            return self.declines.decline(Reason.SPIN_FIFO_NOT_EMPTY)
        return SpinPlan(q, first, None, None)

    def guards(self, ask: SpinAsk, plan: SpinPlan) -> Horizon | None:
        return quiet_horizon(ask.task.k.engine, self.ff._scopes(ask.task), self.declines)

    def repetitions(self, ask: SpinAsk, _, plan: SpinPlan, horizon: Horizon) -> int:
        ff = self.ff
        rng = ff.rng
        q = plan.reads
        if horizon.limit < rng.quiet_until:
            q = min(q, (rng.produced(horizon.limit - 3 * ff.readl_ns - ff.copy_ns) - plan.first_word + 1)
                    // (ask.size // 4))
        q, _ = self._recheck(ask, plan.first_word, q)
        if q < 1:
            return self.declines.decline(Reason.SPIN_TOO_SHORT, 0)
        return q

    def apply(self, ask: SpinAsk, _, plan: SpinPlan, horizon: Horizon, q: int) -> "SpinReads":
        _, recheck_word = self._recheck(ask, plan.first_word, q)
        return SpinReads(self.ff, ask.task, ask.core, ask.size, SpinPlan(q, plan.first_word, recheck_word,
                                                                         horizon.scopes), call=ask.call)

    def _recheck(self, ask: SpinAsk, first: int, q: int) -> tuple[int, int | None]:
        """A spin that crosses recheck_at stops there for one more RNG_STATUS
        read (bcm2835_rng_read's loop), then spins on: one more wait, ``r``
        less spinning -- unless the word lands during that read.  The reads
        (``q`` or fewer: stop before that word's read) and the word whose spin
        crosses it (or None).  The same for the ``q`` it returns."""
        ff = self.ff
        rng = ff.rng
        r, c = ff.readl_ns, ff.copy_ns
        w = ask.size // 4
        now = ask.task.k.now
        R = rng.recheck_at
        if R is not None and R > now and q >= 1:
            i = rng.produced(R) + 1 - first            # the first word landing after R
            if 0 <= i < q * w and (now + r if i == 0 else rng.word_time(first + i - 1) + 4 * r + c) < R:
                if R + r >= rng.word_time(first + i):
                    return i // w, None       # not followed here: stop before that word's read
                return q, i
        return q, None


class CyclePlan:
    """The known cycles ahead of a boundary at ``t0``: cycle ``n`` (n >= 1)
    starts at ``boundary(n - 1)``, wakes at ``wakeup(n)`` and ends at
    ``boundary(n)``, right after a status read found the FIFO empty.  Kept as
    runs of one cycle repeated (thousands of identical polls of a silent
    generator); the cycle after the last one skipped runs in detail."""

    __slots__ = ("t0", "runs", "n", "end")

    def __init__(self, t0: int):
        self.t0 = t0
        self.runs: list[PlanRun] = []
        self.n = 0
        self.end = t0              # boundary(n): where the known cycles end

    def add(self, cycle: WaitCycle, count: int) -> None:
        self.runs.append(PlanRun(cycle, count, self.n + 1, self.end))
        self.n += count
        self.end += count * cycle.deltas.time

    def relative(self) -> tuple:
        """The plan with its times relative to ``t0`` (kept in CycleTable.plans)."""
        t0 = self.t0
        return (tuple(PlanRun(r.cycle, r.count, r.first, r.start - t0) for r in self.runs),
                self.n, self.end - t0)

    @classmethod
    def from_relative(cls, t0: int, rel: tuple) -> "CyclePlan":
        """The plan :meth:`relative` gave, from a boundary at ``t0``."""
        runs, n, end = rel
        plan = cls(t0)
        plan.runs = [PlanRun(r.cycle, r.count, r.first, t0 + r.start) for r in runs]
        plan.n = n
        plan.end = t0 + end
        return plan

    def cycle(self, n: int) -> WaitCycle:
        for run in reversed(self.runs):
            if n >= run.first:
                return run.cycle
        raise IndexError(n)

    def boundary(self, n: int) -> int:
        """Where cycle ``n`` ends (0: the plan's start)."""
        if n == self.n:
            return self.end
        if n == 0:
            return self.t0
        for run in reversed(self.runs):
            if n >= run.first:
                return run.start + (n - run.first + 1) * run.cycle.deltas.time
        raise IndexError(n)

    def wakeup(self, n: int) -> int:
        """When cycle ``n`` (1 .. n) wakes."""
        return self.boundary(n - 1) + self.cycle(n).wake_offset

    def cycles_ending_by(self, t: int) -> int:
        """The largest n <= self.n with boundary(n) <= t."""
        best = 0
        for run in self.runs:
            dt = run.cycle.deltas.time
            if run.start + dt > t:
                break
            best = run.first - 1 + min(run.count, (t - run.start) // dt)
        return best

    def sums(self, n: int) -> Counters:
        """What cycles 1 .. n add to the counters (``time``: their length;
        ``woken``: not a sum, 0)."""
        out = repeat(0, len(Counters._fields))
        for cycle, count, first, _ in self.runs:
            m = min(n, first + count - 1) - first + 1
            if m <= 0:
                break
            add = cycle.deltas if m == 1 else map(operator.mul, cycle.deltas, repeat(m))
            out = map(operator.add, out, add)
        return Counters._make(out)._replace(woken=0)

    def last_consuming(self, n: int) -> tuple[int, WaitCycle]:
        """(its start, cycle m) for the last cycle m in 1 .. n that takes words (there must be one)."""
        for cycle, count, first, start in reversed(self.runs):
            hi = min(n, first + count - 1)
            if first <= hi and cycle.deltas.consumed:
                return start + (hi - first) * cycle.deltas.time, cycle
        raise ValueError(f"no cycle in 1..{n} takes words")

    def logged(self, n: int):
        """(start, cycle) for the cycles 1 .. n that take words or log their wait."""
        for cycle, count, first, start in self.runs:
            if cycle.deltas.consumed or cycle.wait_ns is not None:
                for c in range(first, min(n, first + count - 1) + 1):
                    yield start + (c - first) * cycle.deltas.time, cycle


class PollSkip:
    """One committed skip: the poller sleeps across cycles 1 .. landing-1 of
    ``plan`` (nothing else runs before the last of them ends), whose effects
    are applied where that one ends; it wakes with the landing cycle, the rest
    of which runs in detail."""

    def __init__(self, ff: HwrngFastForward, task: Task, plan: CyclePlan, landing: int, counters: Counters,
                 scopes: "frozenset[CPU] | None"):
        self.ff, self.task, self.plan = ff, task, plan
        self.scopes = scopes              # the CPUs to fence while it sleeps (None: nothing else runs)
        self.k = task.k
        self.landing = landing
        self.counters = counters          # at the plan's start
        self.forgotten = ff.forgotten     # forget() calls before the skip
        self.added: Counters | None = None   # what the skipped cycles added
        #: the landing cycle's wait (set by _land): the wheel timer of a
        #: timer-wheel wait, with rng->dying if the wait is cancellable, or the
        #: hrtimer event of usleep_range()
        self.dying = None
        self.timer: timer_list | None = None
        self.ev = None
        self.wake_at: int | None = None      # when the landing wait's timer fires

    def sleep(self) -> TaskBody:
        task, ff, plan, k = self.task, self.ff, self.plan, self.k
        rng = ff.rng
        n = self.landing - 1
        ff.jumps += 1
        # the skipped cycles end at boundary(n), before anything else runs: their
        # effects then, and the landing cycle's wait begins there (_land)
        land, fence = yield from commit_skip(k, plan.boundary(n), land=self._land, fence=self.scopes,
                                             what="a hwrng poll skip")
        while self.timer is None and self.ev is None:
            # back before the skipped stretch ended: a wakeup was pending as the
            # poller went to sleep, and schedule() returned at once, as in detail
            if rng.wait.on_timer_wheel:
                yield BLOCK    # schedule_timeout() sleeps again to the same expiry
                continue
            land.cancel()      # usleep_range(): the wait is over, nothing skipped
            if fence is not None:
                fence.lift()
            if rng.wait_log is not None:
                rng.wait_log.append((task.comm, plan.t0, k.now))
            ff.resume_at(task, None)
            return
        if fence is not None:
            fence.lift()       # the poller runs again, after the skipped stretch
        if self.timer is not None:
            # the second half of the landing wait's schedule_timeout(), and for a
            # cancellable wait the rest of wait_for_completion_interruptible_timeout(&rng->dying, timeout)
            timeout = schedule_timeout_left(task, self.timer)
            if self.dying is not None:
                while timeout and not self.dying.done:
                    timeout = yield from schedule_timeout(task, timeout)
                if task in self.dying.waiters:
                    self.dying.waiters.remove(task)
        else:
            self.ev.cancel()
        start = plan.boundary(n)
        if rng.wait_log is not None:  # the landing cycle's wait, as the real one logs it
            rng.wait_log.append((task.comm, start, k.now))
        if task.woken_ns == self.wake_at and ff.forgotten == self.forgotten:
            # learning goes on: the landing cycle starts from the boundary the
            # skip computed -- unless the wait changed meanwhile (forget()) or
            # something else woke the poller
            counters = Counters._make(map(operator.add, self.counters, self.added))._replace(
                time=start, woken=plan.wakeup(n))
            state = plan.cycle(n).end_state
            ff.resume_at(task, Boundary(counters, ff.start_key(k, start, state)))
        else:
            ff.resume_at(task, None)

    def _land(self) -> None:
        """At the end of the last skipped cycle: apply the skipped cycles and
        begin the landing cycle's wait as ``_wait`` does there."""
        task, k, rng = self.task, self.k, self.ff.rng
        self._apply(self.landing - 1)
        wait = rng.wait
        if wait.on_timer_wheel:
            # schedule_timeout(timeout): a wheel timer; a cancellable wait
            # (wait_for_completion_interruptible_timeout(&rng->dying, timeout))
            # is on rng->dying's waiters too (WaitKind, declared by the driver)
            if wait.cancellable:
                self.dying = rng.dying
                self.dying.waiters.append(task)
            self.timer = schedule_timeout_arm(task, wait.timeout_jiffies(k.HZ))
            self.wake_at = k.tick_time(self.timer.bucket_expiry)
        else:
            # usleep_range(MIN, MAX): the hrtimer at MAX (the poller's CPU has
            # nothing queued: nothing has run on it since the skip began)
            self.wake_at = k.now + wait.hrtimer_ns
            self.ev = k.engine.at(self.wake_at, k.wake_up_process, task)

    def _apply(self, n: int) -> None:
        """Add cycles 1 .. n to the counters and put the reader's frame state,
        rng_buffer and the FIFO where cycle n left them."""
        task, plan, rng = self.task, self.plan, self.ff.rng
        rq = self.k.cpus[task.cpu]
        core = rng.core
        add = self.added = plan.sums(n)
        last = plan.cycle(n)
        # min_vruntime followed the poller, alone on its CPU, at each switch-in:
        # it is at least the poller's vruntime at the last one
        v_switch_in = task.vruntime + add.vruntime - last.deltas.vruntime
        account_skipped_stretch(task, rq, exec_ns=add.exec_ns, vruntime=add.vruntime, nvcsw=add.nvcsw,
                                nivcsw=add.nivcsw, nr_switches=add.nr_switches, busy_ns=add.busy_ns,
                                min_vruntime=max(0, v_switch_in - rq.min_vruntime))
        comm = task.comm
        rng.wait_calls[comm] = rng.wait_calls.get(comm, 0) + add.waits
        if add.consumed:
            core.bytes_to_user[comm] = core.bytes_to_user.get(comm, 0) + add.to_user
            core.reads_returned(comm, add.reads, add.read_bytes)
            if rng.read_log is not None:
                for base, cycle in plan.logged(n):
                    for read in cycle.status_reads:
                        if read.taken:
                            rng.read_log.append((base + read.offset, read.taken, comm))
            # the FIFO as the last skipped read left it
            base, cycle = plan.last_consuming(n)
            read = next(r for r in reversed(cycle.status_reads) if r.taken)
            rng.words_read(add.consumed, base + read.offset, read.seen - read.taken)
        # the frames of the read(2) in progress and rng_buffer, as at the end of cycle n
        call = core.reading.get(task)
        if call is not None and last.end_state.call is not None:
            call.size, call.ret = last.end_state.call
        core.data_avail = last.end_state.data_avail
        if rng.wait_log is not None:
            for base, cycle in plan.logged(n):
                if cycle.wait_ns is not None:
                    rng.wait_log.append((comm, base, base + cycle.wait_ns))
        self.ff.polls_skipped += n


class SpinReads:
    """Whole reads of ``w = size / 4`` words each (or the words of the read in
    progress, ``size`` 4), spun through as one interval: with the FIFO empty
    each word is picked up the instant it lands -- spin to the landing,
    RNG_STATUS, one RNG_DATA word, the copy, the next RNG_STATUS (empty again)."""

    def __init__(self, ff: HwrngFastForward, task: Task, core: "HwrngCore", size: int, plan: SpinPlan,
                 call: "ReadCall | None" = None):
        self.ff, self.task, self.core, self.size = ff, task, core, size
        #: the read in progress whose words these are (skip_words), or None: whole reads
        self.call = call
        self.rng = core.rng
        self.t0 = task.k.now
        self.plan = plan
        self.w = size // 4
        self.readl = ff.readl_ns
        self.copy = ff.copy_ns

    def landing(self, i: int) -> int:
        """Landing time of the i-th word read (0-based)."""
        return self.rng.word_time(self.plan.first_word + i)

    def run(self) -> TaskBody:
        task, core, rng = self.task, self.core, self.rng
        r, c, plan = self.readl, self.copy, self.plan
        lock = core.reading_mutex
        yield from mutex_lock(task, lock)   # free: no sleep
        self.ff.jumps += 1
        nw = plan.reads * self.w
        last = self.landing(nw - 1)
        end = last + 3 * r + c               # the last word's copy ends
        _, fence = yield from commit_skip(task.k, end, RunUntil(end), fence=plan.scopes,
                                          what="a hwrng spin-read skip")
        if fence is not None:
            fence.lift()
        comm = task.comm
        rng.words_read(nw, last + r, 0)
        if rng.read_log is not None:
            rng.read_log.extend((self.landing(i) + r, 1, comm) for i in range(nw))
        # spinning: before the first word (less its status read), then between
        # consecutive words (less each word's status, data read, copy and next
        # status read), less the extra status read where the spin crosses
        # recheck_at: the time to the last landing less what is not spinning
        rechecked = plan.recheck_word is not None
        spin = last - self.t0 - r - (nw - 1) * (4 * r + c) - rechecked * r
        rng.spin_ns[comm] = rng.spin_ns.get(comm, 0) + max(0, spin)
        rng.wait_calls[comm] = rng.wait_calls.get(comm, 0) + nw + rechecked
        core.bytes_to_user[comm] = core.bytes_to_user.get(comm, 0) + plan.reads * self.size
        call = self.call
        if call is None:
            core.reads_returned(comm, plan.reads, plan.reads * self.size)
            self.ff.reads_skipped += plan.reads
        else:
            call.size -= 4 * plan.reads
            call.ret += 4 * plan.reads
            self.ff.words_skipped += plan.reads
        core.data_avail = 0
        mutex_unlock(task, lock)
        return plan.reads


__all__ = ["HwrngFastForward", "HwrngLearned"]
