"""The qperf fast-forward: steady round trips skipped arithmetically.

A :class:`QperfFastForward` belongs to one :class:`~kenv.workloads.qperf.QperfPair`
(None when the workload runs in ``mode="exact"``).  At the top of the client's
loop the pair asks it (:meth:`QperfFastForward.boundary`) how many round trips
to skip; :meth:`QperfFastForward.jump` then blocks qperf until they would have
ended, and adds their effect on both hosts in one step.

What it learns, each from round trips simulated in detail, two alike (or a
model checked against one in detail) before it replays anything:

* the **steady** round trip (nothing rare in it), with the busy stretches of
  both CPUs in it;
* the **refill** round trip that pays the refills a kworker left owed, per set
  of refills owed;
* the **trigger** round trip that holds the interrupt scheduling a workqueue
  mix, with its kworker's run, per deferral, index of that interrupt on each
  host and refills owed at its start;
* what a mix timer's TIMER softirq on a **busy** CPU does to the steady round
  trip (a delay of what follows), per host and stretch.

The contract: a fast-forward only skips a stretch whose outcome it computes
exactly -- the same state, at the same times, as every round trip simulated.
Where it cannot (a timer or an interrupt at the very nanosecond a round trip
ends, a rare event it has not learned, the engine's ``until`` inside the
stretch, tracing on), the plan stops before that round trip and the detailed
simulation runs it.  On PREEMPT_RT with the forced interrupt threads simulated
(``Kernel(irq_threads=True)``, :mod:`kenv.kernel.irq`) it skips steady round
trips only (with what ``irq/N-mlx4-ib0`` did in them): a round trip with a
mix trigger (but for ``none``), a pending mix timer, a kworker or a refill owed
runs in detail.  What was learned lives in a :class:`QperfLearned` owned
by whoever runs the simulation, bounded (least recently used tables
forgotten), keyed by everything a round trip depends on: no figure depends on
what ran before in the process.

In detail: between rare events (a mix trigger, a pending mix timer, a
kworker, a refill owed) whole round trips are skipped arithmetically: the
steady round trip is measured in detail once per size, and a fast-forward
adds ``k`` times its effect (time, interrupts counted, CPU time and vruntime
of qperf) in one step, where ``k`` is computed from the fast pool state so
that the next mix trigger falls in the first round trip simulated in detail
again.  The round trip after a kworker ran, which pays the refills it left owed
and is otherwise clean, is learned the same way (per set of refills owed, two
alike) and replayed when nothing rare can happen in it.  So is the round trip
that holds the interrupt scheduling a workqueue mix, per deferral and index of
that interrupt in the message on each host and refills owed at its start: it
is replayed as the last round trip of a fast-forward (or as one on its own,
after a kworker's round trip) -- the interrupt counted at its time, at the time the
kworker ran its work that kworker's CPU time, switches and vruntime (placed by
the sleeper credit, as when it was learned, or early in a boot at its own
vruntime when that decides nothing differently) and mix_interrupt_randomness()
itself, at the end the refills left owed -- when no timer is due on either CPU,
the count rule (not the HZ rule) triggers, and before the engine's ``until``
(the next step may change the deferral).  A timer-deferred mix whose TIMER
softirq steals from qperf's own run (not an interrupt, a wakeup or a switch,
and no interrupt of that host arriving until the run's end) only delays
everything after it: that round trip is replayed as the steady one that much
longer; one that fires in the NAPI poll of a message's first batches delays the
message's last interrupt handler by what the poll's slack does not absorb
(checked in detail once per poll stretch); one inside other stretches (a hard
IRQ, a softirq, a context switch) delays what follows by what a detailed round
trip showed there, per host and set of stretches, once a second one agrees.
A fast-forward goes on past its last rare round trip -- the refill round trip
after a trigger one, then steady round trips up to the next mix -- instead of
ending there, and a trigger interrupt and the mix it schedules (the kworker's
run, or the timer's expiry at its tick) are one event when both fall inside
the slice.  What a run learned (a :class:`QperfLearned`, keyed by the machine
and the size, owned by the simulation and passed down explicitly: an
environment keeps one across its episodes, an experiment run makes its own)
starts the next runs of the same machine and size that share it, and the
latency reference of the environments comes from :func:`~kenv.workloads.qperf.steady_round_trip`,
so no figure depends on what ran before.  ``mode="exact"`` turns the fast-forward off (every
round trip is simulated); the test and the benchmark check that both modes give
the same figures.
"""

from __future__ import annotations

from operator import sub
from typing import TYPE_CHECKING

from ..drivers.random import MIX_INFLIGHT
from ..kernel.core import Task, TaskBody
from ..sim.learner import TwiceAlike
from .declines import Declines, Reason
from .protocol import Horizon, JumpRule
from .qperf_records import (LEARNED, MAX_JUMP_ROUND_TRIPS, NO_REFILLS, STEADY, FastForwardStats, Jump, Plan, RoundTrip,
                            Snapshot, TimerTrigger, deltas_of, machine_key, new_table)
from .qperf_busy import BusyStretches
from .qperf_jump import QperfJump
from .qperf_guards import take_timer
from .qperf_refills import Refills
from .qperf_tails import SteadyTails
from .qperf_ticks import BusyTicks
from .qperf_triggers import WqTriggers

if TYPE_CHECKING:  # pragma: no cover
    from ..workloads.qperf import QperfEndpoint, QperfPair


class QperfFastForward(JumpRule):
    """The fast-forward of one qperf pair: what it learned, and the jump in
    progress; a jump rule (kenv.fastforward.protocol) whose boundary is the
    top of the client's loop (``at``: its time)."""

    nothing = 0

    def __init__(self, pair: "QperfPair"):
        self.pair = pair
        self.client = pair.client
        self.server = pair.server
        self.wl = pair.wl
        #: the declines counted, in the workload's QperfLearned
        self.declines: Declines = pair.wl.learned.declines
        self.fresh = False   # the next boundary is a run's first (client_body)
        self.prev: Snapshot | None = None
        self.steady: RoundTrip | None = None
        self.steady_size: int | None = None  # the message size ``steady`` was measured at
        #: per endpoint, the offsets from the steady round trip's start of its
        #: interrupts (_set_steady), or None
        self.steady_offsets: tuple = (None, None)
        # the busy stretches of each host's CPU in the steady round trip (from its
        # start), measured with it; a fast-forward takes in a mix timer that fires
        # while the CPU is idle (busy_log: kenv.fastforward.qperf_busy measures and queries them)
        self.busy: tuple | None = None
        self.busy_log = BusyStretches(self)
        # the steady round trip's learner (STEADY: two consecutive clean round trips
        # alike), its records in the workload's QperfLearned (start_size); the
        # extensions below have their own
        self.steadies: TwiceAlike[RoundTrip] = TwiceAlike({})
        self._learned: dict = new_table()   # from the workload's QperfLearned
        #: the jump in progress, applying a plan (kenv.fastforward.qperf_jump)
        self.jumper = QperfJump(self)
        self.plan: Plan | None = None      # what the next jump() skips, made at a boundary
        #: the extensions on (QperfLearned.extensions), None where off: the busy
        #: tick's models (kenv.fastforward.qperf_ticks)
        extensions = pair.wl.learned.extensions
        self.busy_ticks = BusyTicks(self) if "busy_ticks" in extensions else None
        #: the steady round trips after a rare one (kenv.fastforward.qperf_tails)
        self.tails = SteadyTails(self) if "tails" in extensions else None
        #: the round trip paying the refills a kworker left owed (kenv.fastforward.qperf_refills)
        self.refills = Refills(self) if "refills" in extensions else None
        #: the round trip holding a workqueue mix's trigger (kenv.fastforward.qperf_triggers)
        self.triggers = WqTriggers(self) if "wq_triggers" in extensions else None
        self.stats = FastForwardStats()
        #: PREEMPT_RT with the interrupt threads simulated (kenv.kernel.irq): only
        #: steady round trips are skipped (their irq/N-mlx4-ib0 runs in the
        #: record); a round trip with a mix trigger, a mix timer (its callback
        #: runs in ksoftirqd/N or ktimers/N), a kworker or a refill runs in detail
        self.threaded = any(ep.irq_thread is not None for ep in (self.client, self.server))
        #: the deferrals whose mix-scheduling interrupt a fast-forward takes in
        #: (it only sets MIX_INFLIGHT, and queues a timer; threaded: its
        #: callback runs in a thread, which no record holds)
        self._taken_in = ("none",) if self.threaded else ("timer", "none")
        #: threaded: each host's min_vruntime - qperf's vruntime at the steady
        #: round trip's boundary; a CFS thread (ksoftirqd/N, a kworker) that ran
        #: moves it, and steady round trips add the same to both only from that
        #: lag on: a fast-forward starts only where it is the steady one's
        self._vr_lag: tuple | None = None

    def start_run(self, size: int) -> None:
        """qperf starts (again) at ``size``: the next boundary is a run's first."""
        self.prev = None
        if self.steady_size != size:
            # the steady round trip is a property of the size: measure it
            # again only when the size changes
            self.start_size(size)
        self.steadies.forget(STEADY)
        self.fresh = True

    # state of both hosts that the fast-forward must carry
    def state(self) -> tuple:
        out = []
        for ep in (self.client, self.server):
            t = ep.task
            rq = ep.rq
            th = ep.irq_thread
            irq = (0, 0, 0) if th is None else (th.task.sum_exec_runtime, th.task.nvcsw, th.runs)
            out.append((t.vruntime, t.sum_exec_runtime, t.nvcsw, t.nivcsw, rq.nr_switches,
                        rq.busy_ns, rq.min_vruntime) + irq)
        return tuple(out)

    def irqs(self) -> tuple:
        c, s = self.client, self.server
        return c.host.random.fast_pool(c.cpu).irqs, s.host.random.fast_pool(s.cpu).irqs

    def disturbs(self) -> int:
        return self.client.disturb + self.server.disturb

    def last_irqs_from(self, t0: int) -> tuple[int, int]:
        """Offsets from ``t0`` of both endpoints' last interrupts counted."""
        return self.client.last_irq_t - t0, self.server.last_irq_t - t0

    def refills_owed(self) -> tuple | None:
        """The refills owed, ``((cold_qperf, cold_netrx) of the client, of the
        server)``, if that is all that keeps the state from clean (NO_REFILLS:
        clean -- no rare event pending: nothing but qperf runnable, no refill
        owed, no interrupt left to count, no mix in a kworker pending); None if
        anything else does."""
        now = self.wl.engine.now      # (both hosts')
        owed = ()
        for ep in (self.client, self.server):
            rq = ep.rq
            if rq.cfs_queue or rq.rt_queue:
                return None
            if ep.rx is not None or ep.sock_avail:
                return None
            cur = rq.curr
            if cur is not None and cur is not ep.task:
                return None
            if rq.irq_until > now:
                return None
            rnd = ep.host.random
            if rnd.fast_pool(ep.cpu).count & MIX_INFLIGHT and rnd.deferral in ("workqueue", "schedule_work",
                                                                              "hardirq"):
                return None
            owed += ((ep.cold_qperf, ep.cold_netrx),)
        if not self.server.waiting:
            return None
        return owed

    def boundary(self, t: int) -> int:
        """At the top of the client loop: record, and return how many round
        trips can be skipped (0: simulate the next one in detail).

        The steady round trip is measured once per size: two consecutive
        round trips that start and end clean, without a rare event, and
        agree in every recorded delta.  After that, any boundary at which the
        state is clean may be followed by a fast-forward: from a clean state
        the next round trips are the steady one (the model is deterministic
        between rare events), and the exact mode checks it.
        """
        return self.jump_at(t)

    # --------------------------- the jump rule (kenv.fastforward.protocol)
    def key(self, t: int):
        """The refills owed at a clean boundary (NO_REFILLS: none,
        refills_owed), LEARNED where the steady round trip was just learned,
        or None (declined)."""
        owed = self.refills_owed()
        clean = owed == NO_REFILLS
        fresh, self.fresh = self.fresh, False
        if self.steady is None:
            return self._learn_steady(t, clean)
        # measured already (only a new size measures again, from a fresh
        # ``prev``): no snapshot needed
        if self.refills is not None and self.refills.measuring is not None:
            self.refills.end_measure(t, clean)
        if self.triggers is not None and self.triggers.measuring is not None:
            self.triggers.end_measure(t)
        if self.busy_ticks is not None and self.busy_ticks.measuring is not None:
            self.busy_ticks.end_measure(t)
        if fresh:
            # (the first round trip of a run, from qperf's wakeup, is not a steady
            # one for min_vruntime: the steady lag of min_vruntime behind qperf's
            # vruntime builds up in it)
            return self.declines.decline(Reason.QP_RUN_START)
        if owed is None:
            return self.declines.decline(Reason.QP_NOT_CLEAN)
        return owed

    def stretch(self, t: int, owed):
        """The steady round trip from a clean boundary; the refill round trip
        (Refills, WqTriggers) from one that owes refills."""
        if owed is LEARNED or owed == NO_REFILLS:
            return self.steady
        if self.threaded:
            return self.declines.decline(Reason.QP_THREADED)
        return owed

    def guards(self, t: int, stretch) -> Horizon:
        """The slice's bound (run_slice: the rare events bound it, t_hold
        where the traffic changes); the rest, driver thresholds and timers, cut
        the repetitions (_plan)."""
        return Horizon(self.pair.t_limit)

    def repetitions(self, t: int, owed, stretch, horizon: Horizon) -> int:
        if stretch is not self.steady:      # the refill round trip
            k = (self.refills.plan(t, owed) if self.refills is not None
                 else self.declines.decline(Reason.QP_REFILL_NOT_LEARNED, 0))
            return k or (self.triggers.plan_from_refill(t, owed) if self.triggers is not None else 0)
        k = self._plan_jump(t, horizon.limit)
        if k == 0 and not self.threaded and owed is not LEARNED:
            if self.triggers is not None:
                self.triggers.start_measure(t)
            if self.plan.tick_candidate is not None:
                self.busy_ticks.start_measure(t)
        return k

    def apply(self, t: int, owed, stretch, horizon: Horizon, k: int) -> int:
        return k     # (jump() runs them)

    def _learn_steady(self, t: int, clean: bool):
        """Two consecutive clean round trips alike: the steady one (LEARNED), else None."""
        snap = Snapshot(t, self.state(), self.irqs(), self.disturbs() if clean else -1)
        prev = self.prev
        self.prev = snap
        busy = self.busy_log.log(t, clean)
        if not clean:
            return self.declines.decline(Reason.QP_STEADY_UNKNOWN)
        if prev is None or prev.disturb < 0 or prev.disturb != snap.disturb:
            self.steadies.forget(STEADY)     # (two consecutive ones)
            return self.declines.decline(Reason.QP_STEADY_UNKNOWN)
        rec = RoundTrip(t - prev.t, deltas_of(prev.state, snap.state),
                        tuple(map(sub, snap.irqs, prev.irqs)), self.last_irqs_from(prev.t))
        if self.steadies.offer(STEADY, rec) is None:
            self.busy_log.candidate = busy
            return self.declines.decline(Reason.QP_STEADY_UNKNOWN)
        self._set_steady(rec)
        self._vr_lag = tuple(h[6] - h[0] for h in snap.state)   # min_vruntime - qperf's vruntime
        self._learned["vr_lag"][STEADY] = self._vr_lag
        # the CPUs' busy stretches, if both measured round trips agree on them too
        self.busy = busy if busy is not None and busy == self.busy_log.candidate else None
        self.busy_log.stop()
        self._learned["busy"][STEADY] = self.busy
        return LEARNED

    def near_end_check(self, near: bool) -> bool:
        """A mix timer's softirq that the plan takes in: is it clear of the
        fast-forward's own wakeup?  One that ``near`` its round trip's end is,
        if steady round trips follow in the same fast-forward; _plan_jump
        notes it (``_near_end``) and checks that they do."""
        if not near:
            return True
        plan = self.plan
        if plan is None or not plan.near_end_ok:
            return False
        plan.near_end = True
        return True

    def _set_steady(self, rec: RoundTrip | None) -> None:
        """The steady round trip is ``rec`` (None: not measured at this size),
        and its interrupts' offsets (steady_offsets) are worked out once."""
        self.steady = rec
        self.steady_offsets = (None, None) if rec is None else (self._irq_offsets_of(0), self._irq_offsets_of(1))

    def _irq_offsets_of(self, host: int) -> list[int]:
        """Offsets from the round trip's start of endpoint ``host``'s interrupts in a
        steady round trip (the last one measured, the others from the message's
        NAPI batches).  They always match the message's: in a clean round trip
        each endpoint receives one message of the size, both endpoints' shapes
        come from the workload's NIC and the kernel's interrupt overhead, and
        only QperfEndpoint counts interrupts into its CPU's fast pool, each once."""
        n, off_last = self.steady.irqs[host], self.steady.last_irq[host]
        at = self.pair.irq_arrivals()
        if n != len(at):  # pragma: no cover - see above
            raise RuntimeError(f"qperf fast-forward: {n} interrupts in the steady round trip, "
                               f"{len(at)} in its message")
        return [off_last - (at[-1] - a) for a in at]

    def _plan_jump(self, t: int, limit: int) -> int:
        if self.threaded and tuple(h[6] - h[0] for h in self.state()) != self._vr_lag:
            self.plan = Plan(self.steady)
            return self.declines.decline(Reason.QP_THREADED, 0)
        return self._plan_jump_checked(t, limit)

    def _plan_jump_checked(self, t: int, limit: int) -> int:
        """How many round trips from the clean boundary ``t`` to skip (0: the
        next one in detail), and what the jump needs (_trigger, _tick,
        _triggers, _tail).  A mix timer's softirq near the end of the round
        trip it falls in could meet the fast-forward's own wakeup if that round
        trip were its last: it is taken in when steady round trips follow it
        in the same fast-forward (a busy tick's tail); else the plan is made
        again without it."""
        k = self._plan(t, limit, near_end_ok=True)
        if self.plan.near_end:
            if self.plan.tick is not None and self.plan.tail:
                self.stats.near_end_plans += 1
            else:
                self.declines.decline(Reason.QP_NEAR_END)
                k = self._plan(t, limit, near_end_ok=False)
        self.plan.near_end_ok = False
        return k

    def _plan(self, t: int, limit: int, near_end_ok: bool) -> int:
        self.plan = Plan(self.steady, near_end_ok=near_end_ok)
        rtt, deltas, dirq, offs = self.steady
        # rounds that still start before t_end (run_slice: none, the rare events
        # bound it) and t_hold (run_slice: where the traffic changes): t_limit
        k = k_end = min(-(-(limit - t) // rtt), MAX_JUMP_ROUND_TRIPS)
        wq = []            # (endpoint index, endpoint, index of its next trigger interrupt)
        timers = False
        for i, (ep, n, off) in enumerate(zip((self.client, self.server), dirq, offs)):
            if n <= 0:
                continue
            rnd = ep.host.random
            fp = rnd.fast_pool(ep.cpu)
            mix = fp.mix
            ev = getattr(mix, "_event", None)
            if ev is not None and ev.pending:
                # a pending mix timer: in the fast-forward if it fires while the CPU
                # is idle, else stop before the round trip it fires in (threaded:
                # its callback runs in a thread, which no record holds)
                timers = True
                if self.threaded:
                    k = self.declines.decline(Reason.QP_THREADED, 0)
                else:
                    k = take_timer(self, i, ep, t, k, ev.time, mix.cost_ns)
            if fp.count & MIX_INFLIGHT:
                continue
            if rnd.deferral not in self._taken_in:
                # the interrupt that schedules the next mix is simulated in detail
                # (unless a learned trigger round trip takes it in, below)
                x = max(0, self.rts_before_mix(ep, n, off, t, fp.count, fp.last))
                if x < k:
                    k = self.declines.decline(Reason.QP_MIX_AHEAD, x)
                wq.append((i, ep, rnd.threshold - 1 - fp.count))
                continue
            offsets = self.steady_offsets[i]
            # timer (or no) deferral: the interrupt that schedules the mix only sets
            # MIX_INFLIGHT and queues the timer -- nothing a round trip would notice;
            # it happens inside the fast-forward, which ends before the timer fires
            def time_of(j, offsets=offsets, n=n):
                m, r = divmod(j, n)
                return t + m * rtt + offsets[r]
            j = rnd.first_trigger(ep.cpu, k * n, time_of)
            if j is None:
                continue
            t_trig = time_of(j)
            until = ep.k.engine.until
            if until is not None and t_trig > until:
                # the deferral may change after this slice: stop before that round trip
                if j // n < k:
                    k = self.declines.decline(Reason.QP_AFTER_UNTIL, j // n)
                continue
            self.plan.timer_triggers.append(TimerTrigger(ep, j, t_trig, time_of(j - 1) if j else t))
            if rnd.deferral == "timer":
                tick = ep.k.tick_time(ep.k.jiffies_at(t_trig) + 1)   # expires = jiffies: the next tick
                k = take_timer(self, i, ep, t, k, tick, rnd.params.mix_ns)
        if (len(wq) == 2 and not timers and 0 <= k < k_end and self.triggers is not None and self.triggers.learner
                and not self.threaded and self.triggers.plan(t, k, wq)):
            k += 1     # the round trip with the trigger(s), replayed as the last one
        if self.plan.tick is not None:
            k = self.busy_ticks.finish_plan(t, k)
        return max(0, k)

    # ------------------------------------------- rules the take-ins share
    @staticmethod
    def timer_due(ep: "QperfEndpoint", t: int) -> bool:
        """Does a timer of ``ep``'s CPU fire by ``t`` (next_expiry's tick)?"""
        nxt = ep.k.timers.next_expiry(ep.cpu)
        return nxt is not None and ep.k.tick_time(nxt) <= t

    def rts_before_mix(self, ep: "QperfEndpoint", irqs: int, last_irq: int, start: int, count: int,
                       last_jiffy: int) -> int:
        """Steady round trips from ``start`` none of whose ``irqs`` interrupts
        (the last at offset ``last_irq``) schedules a mix on ``ep``'s host, its
        fast pool then at ``count`` and ``last_jiffy`` with no mix in flight:
        those before the one the count rule triggers in, whose last interrupt
        comes before the HZ rule's jiffy (may be negative: none)."""
        x = ep.k.tick_time(last_jiffy + ep.k.HZ + 1) - start - last_irq
        return min((ep.host.random.threshold - 1 - count) // irqs, -(-x // self.steady.rtt))

    def start_size(self, size: int) -> None:
        """A new message size: what was measured at another size does not
        hold; take what the workload's QperfLearned holds for this one, if
        anything, and learn into it."""
        self.steady_size = size
        k = self.client.k
        key = (machine_key(self.wl.nic, self.wl.stack, k.costs, k.HZ, k.preempt, k.nr_cpus, k.irq is not None)
               + (self.pair.cpu, size))
        table = self._learned = self.wl.learned.table(key)
        self.steadies = TwiceAlike(table["steady"])
        if self.refills is not None:
            self.refills.start_size(table)
        if self.triggers is not None:
            self.triggers.start_size(table)
        if self.busy_ticks is not None:
            self.busy_ticks.start_size(table)
        self._set_steady(self.steadies.get(STEADY))
        self.busy = table["busy"].get(STEADY)
        self._vr_lag = table["vr_lag"].get(STEADY)

    # ------------------------------------------------------------- the jump
    @property
    def jumping(self) -> Jump | None:
        """The fast-forward in progress (None: none)."""
        return self.jumper.jumping

    def sync_jump(self, ep: "QperfEndpoint") -> None:
        """A mix inside a fast-forward: count the interrupts of ``ep``'s host
        that have arrived by now (QperfJump.sync)."""
        self.jumper.sync(ep)

    def jump(self, task: Task, t: int, k: int) -> TaskBody:
        """Skip ``k`` round trips of the plan boundary() made: block until
        they would have ended (QperfJump.run)."""
        plan, self.plan = self.plan, None
        return self.jumper.run(task, t, k, plan)
