"""Extension of the qperf fast-forward: a mix timer's TIMER softirq on a busy CPU.

A timer-deferred mix whose softirq fires while the CPU is busy in the steady
round trip only delays what follows it, in three cases the models here know
(:meth:`BusyTicks.model`): inside qperf's own run (everything after it the
softirq's cost later); inside the NAPI poll of a message's first batches (the
last interrupt's handler later by what the poll's slack does not absorb,
checked in detail once per stretch); inside other busy stretches (a delay
learned from a round trip in detail, per host and set of stretches, once a
second one agrees).  The plan then ends with that round trip, longer by the
delay (``Plan.tick``, a :class:`~kenv.fastforward.qperf_records.BusyTick`).
Without this extension (``QperfLearned(extensions=...)`` without
``"busy_ticks"``) such a round trip stops the plan and runs in detail.

The core (:class:`~kenv.fastforward.qperf.QperfFastForward`) calls
:meth:`BusyTicks.take` when a mix timer falls on a busy stretch,
:meth:`BusyTicks.finish_plan` when a plan holds a busy tick,
:meth:`BusyTicks.start_measure` / :meth:`BusyTicks.end_measure` around a
round trip simulated in detail to check a model, and
:meth:`BusyTicks.start_size` when the message size changes.
"""

from __future__ import annotations

import bisect
from operator import sub
from typing import TYPE_CHECKING

from ..drivers.random import MIX_INFLIGHT
from ..sim.learner import TwiceAlike
from .declines import Reason
from .qperf_records import NO_REFILLS, BusyTick, RoundTrip, Snapshot, TickCheck, deltas_of

if TYPE_CHECKING:  # pragma: no cover
    from ..workloads.qperf import QperfEndpoint
    from .qperf import QperfFastForward


class BusyTicks:
    """The busy tick's models and what they learned, for one qperf fast-forward."""

    __slots__ = ("ff", "learner", "measuring")

    def __init__(self, ff: "QperfFastForward"):
        self.ff = ff
        #: the steady round trip with a mix timer's softirq on a busy CPU, per
        #: stretch: a model's prediction (the NAPI poll, key (host, stretch)) or a
        #: first measurement (other stretches, key (host, stretches)), then one in
        #: detail; a disagreement refutes the stretch for good
        self.learner: TwiceAlike[RoundTrip] = TwiceAlike({}, refute_on_disagreement=True)
        #: the check in progress (start_measure), or None
        self.measuring: TickCheck | None = None

    def start_size(self, table: dict) -> None:
        """A new message size: learn into (and replay from) ``table``'s busy ticks."""
        self.learner = TwiceAlike(table["tick"], table["tick_candidates"], refute_on_disagreement=True)
        self.measuring = None

    def take(self, host: int, ep: "QperfEndpoint", m: int, o: int, tick: int, cost: int, offsets: list) -> int:
        """A mix timer of endpoint ``host`` fires at ``tick``, ``o`` ns into
        round trip ``m`` of the plan, while its CPU is busy (a TIMER softirq of
        ``cost`` ns; ``offsets``: the host's interrupts in the steady round
        trip): ``m + 1`` if the plan ends with that round trip, longer by the
        model's delay (``Plan.tick``); else ``m`` (stop before it; a check of
        the model in detail is noted when it is the first round trip)."""
        ff = self.ff
        plan = ff.plan
        model = None if plan.tick is not None else self.model(host, o, cost, offsets)
        # after the mix the count restarts: the interrupts after it must not schedule another
        if model is not None and len(offsets) - bisect.bisect_right(offsets, o) < ep.host.random.threshold:
            key, delay, shifts = model
            if key is None or self.learner.get(key) is not None:
                plan.tick = BusyTick(host, m, o, delay, shifts)   # the last round trip, ``delay`` longer
                plan.mix_in[host] = tick
                return m + 1
            if not self.learner.settled(key):     # (else refuted)
                if m == 0:
                    plan.tick_candidate = TickCheck(key, host, o, delay, shifts)
                return ff.declines.decline(Reason.QP_TICK_NOT_LEARNED, m)
        return ff.declines.decline(Reason.QP_TICK_UNMODELLED, m)

    def finish_plan(self, t: int, k: int) -> int:
        """The plan of ``k`` round trips from ``t`` holds a busy tick: keep it
        only as the last round trip, with nothing after the tick in it that
        would move with it (a timer mix's trigger, a mix timer on an idle CPU,
        the other host's interrupts reaching its HZ rule); then the steady
        tail after it (``Plan.tail``).  The round trips to skip."""
        ff = self.ff
        plan = ff.plan
        rtt, _, dirq, offs = ff.steady
        tick_host, m, o = plan.tick.host, plan.tick.round_trip, plan.tick.offset
        shifts = plan.tick.shifts
        tick = t + m * rtt + o
        later = any(tr.t_trigger > tick and tr.index < k * dirq[0 if tr.ep is ff.client else 1]
                    for tr in plan.timer_triggers) or any(x > tick for x in plan.idle_ticks)
        for h, ep in enumerate((ff.client, ff.server)):
            # the other host's interrupts, later by the shift: still before its HZ rule
            fp = ep.host.random.fast_pool(ep.cpu)
            if h != tick_host and dirq[h] and not fp.count & MIX_INFLIGHT and (
                    t + m * rtt + offs[h] + shifts[h] >= ep.k.tick_time(fp.last + ep.k.HZ + 1)):
                later = True
        if k != m + 1 or later:
            # the busy tick's round trip is not the last one, or something after
            # the tick in it would move with it: stop before it instead
            plan.tick = None
            return ff.declines.decline(Reason.QP_TICK_NOT_LAST, min(k, m))
        if ff.tails is not None:
            plan.tail = ff.tails.after_tick(t, k, plan.tick.delay)
        return k

    def only_delays(self, host: int, offset: int, cost: int, irq_offsets: list) -> bool:
        """Does a TIMER softirq from ``offset`` into the steady round trip for
        ``cost`` ns on host ``host``'s CPU only delay everything after it by
        ``cost``?  So when it falls inside qperf's own run: within the CPU's
        busy stretch, clear of every interrupt, softirq, wakeup and context
        switch in it (the measured stretches), with none of the host's
        interrupts arriving from the tick to the end of the stretch plus
        ``cost`` (the delayed work could meet one), and ending before the
        fast-forward's own wakeup if its round trip is the last one
        (_plan_jump).  The softirq then stretches the running
        chunk (Kernel.steal) and nothing at a fixed time follows on this CPU
        before the message the delayed work sends: the other CPU is idle, the
        interrupts it takes next come from that message.  The same stolen time
        is not charged to qperf, so its counters are the steady ones."""
        ff = self.ff
        costs = ff.client.k.costs
        end = None
        for a, b in ff.busy[host]:
            if a <= offset + cost and b >= offset:
                if end is not None or not (a < offset and offset + cost < b):
                    return False     # more than qperf's stretch here, or its edge
                end = b
        if end is None:
            return False
        j = bisect.bisect_left(irq_offsets, offset)
        if j < len(irq_offsets) and irq_offsets[j] <= end + cost:
            return False
        return ff.near_end_check(offset + cost >= ff.steady.rtt - costs.wakeup_ns - costs.context_switch_ns - 1)

    def model(self, host: int, offset: int, cost: int, irq_offsets: list) -> tuple | None:
        """What a TIMER softirq from ``offset`` for ``cost`` ns on host
        ``host``'s busy CPU does to the steady round trip, if it only delays what
        follows: (key, delay, shift of each endpoint's last interrupt), key None
        when no check is needed; None otherwise.

        * Inside qperf's own run (only_delays): everything after it ``cost`` later.
        * Inside the NAPI poll of a message's first batches (a softirq stretch
          within qperf's wakeup-to-sleep stretch that ends at ``L``, the message's
          last interrupt arriving at ``A`` after its start): the poll ends
          ``cost`` later, so the last interrupt's handler starts at
          ``max(A, L + cost)`` instead of ``max(A, L)``, and what depends on it
          (qperf's copy, the reply and the other host's interrupts) moves by the
          difference; this host's interrupts are already on their way.  Checked
          in detail once per stretch before it is replayed (``learner``).
        * Inside any other busy stretches, clear of their edges (a hard IRQ, a
          NET_RX softirq, a context switch, ...): a delay and shifts learned
          from the round trip simulated in detail, per host and set of stretches
          (``learner``), and replayed once a second one agrees (the softirq runs
          after the one it interrupts, or is absorbed by a wait: measured, all of
          it or none, the same wherever in those stretches it falls)."""
        ff = self.ff
        if self.only_delays(host, offset, cost, irq_offsets):
            return None, cost, tuple(cost if off > offset else 0 for off in ff.steady.last_irq)
        costs = ff.client.k.costs
        inside = [(s, a, b) for s, (a, b) in enumerate(ff.busy[host]) if a <= offset + cost and b >= offset]
        if not inside or any(not (a < offset and offset + cost < b) for _, a, b in inside):
            return None
        poll = self.poll_model(host, offset, cost, irq_offsets, inside)
        if poll is not None:
            return poll
        key = (host, tuple(s for s, _, _ in inside))
        delay = shifts = None
        seen = self.learner.get(key) or self.learner.candidate(key)
        if seen is not None:
            delay = seen.rtt - ff.steady.rtt
            shifts = tuple(map(sub, seen.last_irq, ff.steady.last_irq))
        end = offset + cost + (cost if delay is None else delay)
        if not ff.near_end_check(end >= ff.steady.rtt - costs.wakeup_ns - costs.context_switch_ns - 1):
            return None
        return key, delay, shifts

    def poll_model(self, host: int, offset: int, cost: int, irq_offsets: list, inside: list) -> tuple | None:
        """model's NAPI-poll case (``inside``: the stretches the softirq falls in)."""
        ff = self.ff
        costs = ff.client.k.costs
        if len(inside) not in (2, 3):
            return None
        # qperf's stretch is the widest; the poll and (if qperf was woken in it)
        # the wait for its kick both end where the poll does
        inside = sorted(inside, key=lambda x: x[2] - x[1])
        s, a, poll_end = inside[-2] if len(inside) == 3 and inside[0][2] == inside[1][2] else inside[0]
        if len(inside) == 3 and inside[0][2] != inside[1][2]:
            return None
        last_arrival = irq_offsets[-1]
        handler = max(last_arrival, poll_end)
        if not irq_offsets[0] <= a < last_arrival or not any(b0 == handler for b0, _ in ff.busy[host]):
            return None      # not a poll that the last interrupt's handler follows
        delay = max(last_arrival, poll_end + cost) - handler
        if not ff.near_end_check(offset + cost + delay >= ff.steady.rtt - costs.wakeup_ns
                                 - costs.context_switch_ns - 1):
            return None
        return (host, s), delay, tuple(delay if h != host and off > offset else 0
                                       for h, off in enumerate(ff.steady.last_irq))

    def start_measure(self, t: int) -> None:
        """A clean boundary whose round trip, simulated in detail, has a mix
        timer fire in a NAPI poll whose model is not checked yet (or in
        stretches whose delay is not learned or not confirmed yet):
        snapshot, to compare with it (or learn it) at the next boundary.  What else the plan
        saw in that round trip -- the other host's mix timer firing while its
        CPU is idle, interrupts that schedule a timer mix -- is expected too."""
        ff = self.ff
        check, ff.plan.tick_candidate = ff.plan.tick_candidate, None
        rtt = ff.steady.rtt
        idle = sum(1 for x in ff.plan.idle_ticks if x < t + rtt)
        if idle > 1:
            return
        triggers = sum(1 for tr in ff.plan.timer_triggers if tr.t_trigger < t + rtt)
        check.mixes = tuple(ep.host.random.fast_pool(ep.cpu).mixes + (h == check.host) + (h != check.host and idle > 0)
                            for h, ep in enumerate((ff.client, ff.server)))
        check.snap = Snapshot(t, ff.state(), ff.irqs(), ff.disturbs())
        check.disturb = 1 + idle + triggers
        if check.delay is not None:
            # the round trip the model (or the first measurement) says
            self.learner.predict(check.key, RoundTrip(rtt + check.delay, ff.steady.deltas, ff.steady.irqs,
                                                      tuple(off + sh for off, sh in zip(ff.steady.last_irq,
                                                                                        check.shifts))))
        self.measuring = check

    def end_measure(self, t: int) -> None:
        """The boundary after that round trip: if nothing else happened in it
        (it ended clean; the mixes, and the disturbances, the plan expected; the
        timer's at the tick), it is a measurement of the busy tick's stretch --
        the steady counters and interrupts, the round trip and the last
        interrupts later by a delay of at most the mix's cost -- or the stretch
        is refuted for good."""
        ff = self.ff
        check, self.measuring = self.measuring, None
        i, o, snap, expect, disturb = check.host, check.offset, check.snap, check.mixes, check.disturb
        eps = (ff.client, ff.server)
        mixes = tuple(e.host.random.fast_pool(e.cpu).mixes for e in eps)
        last = eps[i].last_mix
        h = 1 - i
        if mixes[h] == expect[h] + 1 and eps[h].last_mix == (snap.t + o, "timer") and ff.busy_log.idle(
                h, snap.t, o, eps[h].host.random.params.mix_ns, 0, 1):
            # the other host's mix timer fired at the same tick, while its CPU was
            # idle (a plan stopped by this tick does not look at it): expected too
            expect = tuple(e + (x == h) for x, e in enumerate(expect))
            disturb += 1
        if (ff.refills_owed() != NO_REFILLS or ff.disturbs() - snap.disturb != disturb or mixes != expect
                or last is None or last != (snap.t + o, "timer")):
            return    # something else happened in it: no verdict
        steady = ff.steady
        measured = RoundTrip(t - snap.t, deltas_of(snap.state, ff.state()),
                             tuple(map(sub, ff.irqs(), snap.irqs)), ff.last_irqs_from(snap.t))
        if (measured.deltas != steady.deltas or measured.irqs != steady.irqs
                or not 0 <= measured.rtt - steady.rtt <= eps[i].host.random.params.mix_ns):
            self.learner.refute(check.key)
        else:
            self.learner.offer(check.key, measured)
