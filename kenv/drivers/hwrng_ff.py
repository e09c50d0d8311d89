"""Fast-forward of the bcm2835 wait loop: simulator machinery, not kernel code.

A reader (or the ``hwrng`` kthread) that sleeps in ``bcm2835_rng_read()``
while the FIFO stays empty -- the generator warming up after
``bcm2835_rng_init()``, or a board whose generator is silent for the first 30
seconds -- repeats one cycle: wait (``hwrng_yield``: 2 jiffies; ``hwrng_msleep``,
``usleep_range``: their own period), wake, read ``RNG_STATUS``, find it empty,
wait again.  Each cycle is a handful of engine events (the timer, the wakeup,
the switch, the status read) that change nothing but counters.
:meth:`HwrngFastForward.skip_polls` replaces a run of such cycles by one sleep, the way
kenv.workloads.qperf fast-forwards steady round trips:

* **Measure.**  At the top of each wait (just after a status read found the
  FIFO empty) it takes a snapshot of the poller and its CPU: the time, the
  time of the last wakeup, CPU time, vruntime, context switches, the CPU's
  busy time and ``min_vruntime``, the rng's wait and read counters.  Two
  consecutive cycles that agree in every delta, with nothing else on the CPU
  (its busy time grew exactly by the poller's own CPU time), make the cycle
  steady.
* **Skip.**  From a steady state it sleeps once, to the moment the last
  skipped cycle's wait would have ended: for the timer-wheel waits a timer in
  that cycle's bucket (:meth:`TimerWheel.enqueue_bucket`), on the
  cancellable ``rng->dying`` completion like the real sleep; for
  ``usleep_range`` an hrtimer-style wakeup.  Then the loop reads
  ``RNG_STATUS`` itself, as the real cycle would.  The skipped cycles' CPU
  time, vruntime, switches, wait counts and ``wait_log`` entries are added
  when the poller wakes.
* **How far.**  Every skipped status read must still find the FIFO empty
  (before :meth:`Bcm2835Rng.next_word_time`), and the skip ends before the
  rng's ``quiet_until`` (the end of the step, as far as the driver of the
  simulation knows it: until then it neither changes the wait nor looks at
  the rng), before the engine's ``until`` and before the next timer on the
  poller's CPU.  Without a declared ``quiet_until`` nothing is skipped.
* **Disturbed.**  While the poller sleeps its CPU reports to this module
  (``CPU.ff``) anything else that happens there: a task enqueued or an
  interrupt.  The skip is cut back to the next cycle that could be affected,
  which is then simulated in detail -- exact, unless the disturbance falls
  inside a skipped cycle's awake window (a few microseconds of every period),
  which :attr:`HwrngFastForward.inexact` counts.

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
as :attr:`HwrngFastForward.inexact`.

The equivalence with the detailed simulation is a test (same trajectories
with :data:`kenv.drivers.hwrng.FAST_FORWARD` on and off).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..kernel.core import BLOCK, NICE_0_LOAD, TASK_DEAD, TASK_SLEEPING, RunUntil, Task, TaskBody
from ..kernel.mutex import mutex_lock, mutex_unlock
from ..kernel.sleep import _process_timeout
from ..kernel.timer import timer_list
from ..sim.engine import NSEC_PER_SEC

if TYPE_CHECKING:  # pragma: no cover
    from .hwrng import Bcm2835Rng, HwrngCore

#: snapshot fields: time, last wakeup, CPU time, vruntime, nvcsw, nivcsw, the CPU's
#: nr_switches, busy_ns and min_vruntime, the rng's wait calls and words consumed
T, WOKEN, EXEC, VRUNTIME, NVCSW, NIVCSW, NR_SWITCHES, BUSY, MIN_VRUNTIME, WAITS, READS = range(11)


class HwrngFastForward:
    """The fast-forwards of one rng: idle polls (:meth:`skip_polls`) and
    back-to-back ``cpu_relax()`` reads (:meth:`skip_reads`); see the module doc."""

    def __init__(self, rng: "Bcm2835Rng"):
        self.rng = rng
        #: per poller: the last snapshots (at most 3) of a run of clean boundaries
        self._hist: dict[Task, list[tuple]] = {}
        self.jumps = 0
        self.polls_skipped = 0
        self.reads_skipped = 0
        #: disturbances the fast-forward could not follow exactly (inside a
        #: skipped poll's awake window, or anything else during skipped reads)
        self.inexact = 0

    # ------------------------------------------------------------ measuring
    def _snapshot(self, task: Task) -> tuple | None:
        """The poller's state at a boundary, or None if the boundary is not clean."""
        k = task.k
        rng = self.rng
        rq = k.cpus[task.cpu]
        now = k.now
        if (rng.quiet_until is None or k.engine.recorder is not None or rq.cfs_queue or rq.rt_queue
                or rq.irq_until > now or rq.need_resched or task.woken_ns is None):
            return None
        comm = task.comm
        return (now, task.woken_ns, task.sum_exec_runtime, task.vruntime, task.nvcsw, task.nivcsw,
                rq.nr_switches, rq.busy_ns, rq.min_vruntime, rng.wait_calls.get(comm, 0),
                rng.consumed_words)

    def skip_polls(self, task: Task) -> TaskBody:
        """Called by ``_wait`` with the FIFO just found empty; if the polls
        from here on are steady, sleep past as many as is safe and return
        True (the loop then reads ``RNG_STATUS``); else return False at once
        (the loop waits for real)."""
        plan = self._plan(task)
        if plan is None:
            return False
        yield from _Skip(self, task, *plan).sleep()
        return True

    def _plan(self, task: Task):
        snap = self._snapshot(task)
        rng = self.rng
        wait = rng.wait
        hist = self._hist.get(task)
        if snap is None:
            self._hist.pop(task, None)
            return None
        if hist is None or hist[-1][1] != wait:
            self._hist[task] = [(snap, wait)]
            return None
        hist.append((snap, wait))
        if len(hist) > 3:
            del hist[0]
        if len(hist) < 3:
            return None
        s0, s1, s2 = (h[0] for h in hist)
        d = tuple(b - a for a, b in zip(s1, s2))
        if d != tuple(b - a for a, b in zip(s0, s1)):
            return None
        delta = d[T]
        if (delta <= 0 or d[WOKEN] != delta or d[EXEC] != d[BUSY] or d[NVCSW] != 1 or d[NIVCSW] != 0
                or d[NR_SWITCHES] != 1 or d[WAITS] != 1 or d[READS] != 0):
            return None
        k = task.k
        now = snap[T]
        latency = now - snap[WOKEN]               # wakeup to the end of the status read
        # one wait, from its call (a boundary) to its return, for the wait_log entries
        wait_ns = None
        log = rng.wait_log
        if log is not None:
            if not log or log[-1][0] != task.comm or log[-1][1] != s1[T]:
                return None
            wait_ns = log[-1][2] - log[-1][1]
        # how far: every skipped status read finds the FIFO empty, and the
        # landing boundary is within the step and before the CPU's next timer
        horizon = rng.quiet_until
        until = k.engine._until
        if until is not None and until < horizon:
            horizon = until
        nxt = k.timers.next_expiry(task.cpu)
        if nxt is not None and k.tick_time(nxt) < horizon:
            horizon = k.tick_time(nxt)
        j = (horizon - now) // delta
        if rng.t_start is not None:
            j = min(j, (rng.next_word_time(now) - 1 - now) // delta)
        if j < 2 or rng.dying.done or rng._level_ref != 0:
            return None
        timer_wait = wait.kind in ("hwrng_yield", "hwrng_msleep")
        if timer_wait and (delta % k.TICK_NSEC or (now - latency) % k.TICK_NSEC):
            return None  # a wheel timer's wakeup is at a tick
        return j, delta, latency, wait_ns, d, timer_wait


    # ---------------------------------------------------- back-to-back reads
    def skip_reads(self, task: Task, core: "HwrngCore", size: int, max_reads: int | None) -> TaskBody:
        """Called by a reader between two ``read(size)`` of /dev/hwrng: skip
        up to ``max_reads`` (None: no limit) whole reads when the driver
        spins, returning how many (0: the reader reads for real)."""
        plan = self._plan_reads(task, core, size, max_reads)
        if plan is None:
            return 0
        return (yield from _SpinReads(self, task, core, size, *plan).run())

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
                or rng.t_start is None or max_reads == 0 or rq.ff is not None):
            return None
        r, c = rng.params.rng_readl_ns, rng.params.copy_chunk_ns
        if NSEC_PER_SEC // rng.params.word_rate_hz <= 4 * r + c:
            return None  # words could land while one is processed: not one word per read
        horizon = rng.quiet_until
        until = k.engine._until
        if until is not None and until < horizon:
            horizon = until
        cpus = [task.cpu]
        kthread = core.hwrng_fill
        if kthread is not None and kthread is not task and kthread.state != TASK_DEAD:
            if kthread.state != TASK_SLEEPING or kthread in lock.wait_list:
                return None
            cpus.append(kthread.cpu)   # it sleeps on a timer of its CPU's base
        for cpu in cpus:
            nxt = k.timers.next_expiry(cpu)
            if nxt is not None and k.tick_time(nxt) < horizon:
                horizon = k.tick_time(nxt)
        # the status read that starts now must find the FIFO empty
        if rng.words_available(now + r):
            return None
        n_first = rng.produced(now + r) + 1          # the generator's index of the first word
        w = size // 4
        # read q ends with its last word: landing + status + data read + copy
        landed = rng.produced(horizon - 3 * r - c) - n_first + 1
        q = landed // w
        if max_reads is not None:
            q = min(q, max_reads)
        # A spin that crosses recheck_at stops there for one more RNG_STATUS
        # read (bcm2835_rng_read's loop), then spins on: one more wait, ``r``
        # less spinning -- unless the word lands during that read.
        cap = None
        R = rng.recheck_at
        if R is not None and R > now and q >= 1:
            def landing(i: int) -> int:
                return rng.t_start + -(-(n_first + i) * NSEC_PER_SEC // rng.params.word_rate_hz)
            i = rng.produced(R) + 1 - n_first            # the first word landing after R
            if 0 <= i < q * w and (now + r if i == 0 else landing(i - 1) + 4 * r + c) < R:
                if R + r >= landing(i):
                    q = i // w       # not followed here: stop before that word's read
                else:
                    cap = i
        if q < 1:
            return None
        return q, n_first, r, c, cap


class _SpinReads:
    """``q`` whole reads of ``w = size / 4`` words each, spun through as one interval."""

    def __init__(self, ff: HwrngFastForward, task: Task, core: "HwrngCore", size: int, q: int,
                 n_first: int, r: int, c: int, cap: int | None):
        self.ff, self.task, self.core, self.size = ff, task, core, size
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
        rng = self.rng
        return rng.t_start + -(-(self.n_first + i) * NSEC_PER_SEC // rng.params.word_rate_hz)

    def end(self, q: int) -> int:
        return self.T(q * self.w - 1) + 3 * self.r + self.c

    def run(self) -> TaskBody:
        task, core, rng, k = self.task, self.core, self.rng, self.k
        lock = core.reading_mutex
        yield from mutex_lock(task, lock)   # free: no sleep
        rq = k.cpus[task.cpu]
        rq.ff = self
        self.ff.jumps += 1
        yield RunUntil(self.end(self.q))
        if rq.ff is self:
            rq.ff = None
        t = self.k.now if self.cut_at is None else self.cut_at
        # words picked up by ``t`` (their status read over) and whole reads done
        nw = min(self.q * self.w, max(0, rng.produced(t - self.r) - self.n_first + 1))
        done = min(self.q, max(0, rng.produced(t - 3 * self.r - self.c) - self.n_first + 1) // self.w)
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
        rng.wait_calls[comm] = rng.wait_calls.get(comm, 0) + nw + capped + (self.cut_at is not None)
        core.bytes_to_user[comm] = core.bytes_to_user.get(comm, 0) + done * self.size
        core.data_avail = 4 * (nw - done * self.w)   # a cut: a partial read's words wait in rng_buffer
        mutex_unlock(task, lock)
        self.ff.reads_skipped += done
        return done

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
        on the reader's CPU cuts the skip at ``start`` (approximate)."""
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
        self.task.k.cpus[self.task.cpu].ff = None
        self.task.k.end_spin(self.task, max(start, self.task.k.now))


class _Skip:
    """One skip in progress: the poller asleep across cycles 1 .. j-1.

    Cycle ``n`` (1 <= n <= j) wakes at ``W(n) = t0 + n * delta - latency``
    and ends with its status read at ``B(n) = t0 + n * delta``; cycles 1 .. j-1
    are skipped, the sleep ends with cycle j's wakeup, and the loop's own
    status read then ends at ``B(j)``.
    """

    def __init__(self, ff: HwrngFastForward, task: Task, j: int, delta: int, latency: int, wait_ns: int,
                 d: tuple, timer_wait: bool):
        self.ff, self.task = ff, task
        self.k = task.k
        self.rq = self.k.cpus[task.cpu]
        self.t0 = self.k.now
        self.j, self.delta, self.latency, self.wait_ns, self.d = j, delta, latency, wait_ns, d
        self.timer_wait = timer_wait
        self.applied = 0          # skipped cycles already added to the counters
        self.planned = j          # j as planned (a cut or an early wakeup lowers j)
        self.timer: timer_list | None = None
        self.ev = None

    def W(self, n: int) -> int:
        return self.t0 + n * self.delta - self.latency

    def B(self, n: int) -> int:
        return self.t0 + n * self.delta

    def _arm(self, t: int) -> None:
        """The wakeup that ends the sleep, at ``t``."""
        k = self.k
        if self.timer is not None:
            k.timers.del_timer(self.timer)
            self.timer = None
        if self.ev is not None:
            self.ev.cancel()
            self.ev = None
        if self.timer_wait and t > k.now and t % k.TICK_NSEC == 0:
            timer = timer_list(_process_timeout, name="process_timeout", data=self.task)
            timer.expires = k.jiffies_at(t) - 1
            k.timers.enqueue_bucket(timer, self.task.cpu, k.jiffies_at(t))
            self.timer = timer
        else:
            self.ev = k.engine.at(max(t, k.now), k.wake_up_process, self.task)

    def sleep(self) -> TaskBody:
        task, rng = self.task, self.ff.rng
        if self.timer_wait:  # cancellable through rng->dying, as hwrng_msleep/hwrng_yield are
            rng.dying.waiters.append(task)
        self._arm(self.W(self.j))
        self.rq.ff = self
        self.ff.jumps += 1
        yield BLOCK
        self._woken()
        self._arm_cancel()
        if task in rng.dying.waiters:
            rng.dying.waiters.remove(task)
        n = self.applied
        if rng.wait_log is not None:  # the wait in progress (cycle n+1's), as the real one logs it
            rng.wait_log.append((task.comm, self.B(n), self.k.now))
        if self.j == self.planned:
            # steady on: the landing boundary is checked against these
            hist = self.ff._hist.get(task)
            if hist:
                s2, wait = hist[-1]
                self.ff._hist[task] = [(tuple(v + m * dv for v, dv in zip(s2, self.d)), wait)
                                       for m in (self.j - 2, self.j - 1)]
        else:
            self.ff._hist.pop(task, None)

    def _woken(self) -> None:
        """The poller has been woken (by the skip's own wakeup or anything
        else): the skipped cycles whose status read was over by then are done."""
        if self.rq.ff is self:
            self.rq.ff = None
        if self.applied == self.j - 1:
            return
        woke = self.task.woken_ns
        n = min(self.j - 1, (woke - self.t0) // self.delta)
        if n + 1 < self.j and woke >= self.W(n + 1):
            self.ff.inexact += 1   # woken inside cycle n+1's awake window
        self._apply(n)
        self.j = n + 1

    def _arm_cancel(self) -> None:
        if self.timer is not None:
            self.k.timers.del_timer(self.timer)
            self.timer = None
        if self.ev is not None:
            self.ev.cancel()
            self.ev = None

    def _apply(self, n: int) -> None:
        """Add skipped cycles ``applied+1 .. n`` to the counters (each: a status
        read's CPU time, a sleep and a wakeup, a wait)."""
        m = n - self.applied
        if m <= 0:
            return
        task, rq, d, rng = self.task, self.rq, self.d, self.ff.rng
        task.sum_exec_runtime += m * d[EXEC]
        task.vruntime += m * d[VRUNTIME]
        task.nvcsw += m
        rq.nr_switches += m
        rq.busy_ns += m * d[BUSY]
        rq.min_vruntime += m * d[MIN_VRUNTIME]
        comm = task.comm
        rng.wait_calls[comm] = rng.wait_calls.get(comm, 0) + m
        if rng.wait_log is not None:
            for c in range(self.applied, n):
                b = self.B(c)
                rng.wait_log.append((comm, b, b + self.wait_ns))
        self.ff.polls_skipped += m
        self.applied = n

    def disturb(self, kind: str, start: int, end: int, p: Task | None = None) -> None:
        """Something else happens on the poller's CPU from ``start`` (task ``p``
        enqueued now, or an interrupt until ``end``): cut the skip back to the
        first cycle it could affect, which is then simulated in detail."""
        if p is self.task:
            self._woken()     # its wakeup: the counters catch up before anything else runs
            return
        # first skipped cycle whose status read is not over by ``start``
        n = max(self.applied, (start - self.t0) // self.delta) + 1
        if n >= self.j:
            return            # only the real last wakeup is left: the kernel handles it
        if kind == "irq" and end < self.W(n):
            return            # over before the next skipped wakeup: no effect
        self.rq.ff = None
        self._apply(n - 1)
        self.j = n
        if start >= self.W(n):
            self.ff.inexact += 1  # inside cycle n's awake window: wake now
        self._arm(self.W(n))


__all__ = ["HwrngFastForward"]
