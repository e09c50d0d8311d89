"""Extension of the qperf fast-forward: the refill round trip.

A kworker that ran a workqueue mix leaves refills owed (``cold_qperf``,
``cold_netrx``: qperf's and NET_RX's caches to warm again); the round trip
that pays them is otherwise clean and the same each time, per set of refills
owed.  :class:`Refills` learns it (two alike, as the steady round trip is
learned) and replays it: from a boundary clean but for those refills
(:meth:`Refills.plan`), or right after a trigger round trip in the same
fast-forward (:meth:`Refills.after_trigger`), when nothing rare can happen
in it -- no timer due on either CPU, none of its interrupts scheduling a mix.
Without this extension (``QperfLearned(extensions=...)`` without
``"refills"``) that round trip runs in detail.

The core (:class:`~kenv.fastforward.qperf.QperfFastForward`) calls
:meth:`Refills.plan` at a boundary clean but for refills owed,
:meth:`Refills.end_measure` at the boundary after one measured,
:meth:`Refills.after_trigger` when it plans a trigger round trip and
:meth:`Refills.start_size` when the message size changes.
"""

from __future__ import annotations

import bisect
from operator import sub
from typing import TYPE_CHECKING

from ..drivers.random import MIX_INFLIGHT
from ..sim.learner import TwiceAlike
from .declines import Reason
from .qperf_records import NO_REFILLS, Plan, RoundTrip, Snapshot, TriggerRoundTrip, deltas_of

if TYPE_CHECKING:  # pragma: no cover
    from .qperf import QperfFastForward


class Refills:
    """The refill round trips learned and replayed, for one qperf fast-forward."""

    __slots__ = ("ff", "learner", "measuring")

    def __init__(self, ff: "QperfFastForward"):
        self.ff = ff
        #: the round trip that pays the refills a kworker left owed on one or both
        #: hosts, otherwise clean, per set of refills owed
        self.learner: TwiceAlike[RoundTrip] = TwiceAlike({})
        #: (refills owed, snapshot) of the one being measured, or None
        self.measuring: tuple | None = None

    def start_size(self, table: dict) -> None:
        """A new message size: learn into (and replay from) ``table``'s refill round trips."""
        self.learner = TwiceAlike(table["refill"])
        self.measuring = None

    def plan(self, t: int, owed: tuple) -> int:
        """A boundary that is clean but for the refills ``owed``: replay the
        round trip that pays them (1) if it is known and nothing rare can
        happen in it -- no timer due on either CPU, no interrupt of it
        scheduling a mix (count or HZ rule) -- else simulate it in detail
        (0), measuring it if it is not known yet."""
        ff = self.ff
        rec = self.learner.get(owed)
        if rec is None:
            self.measuring = (owed, Snapshot(t, ff.state(), ff.irqs(), ff.disturbs()))
            return ff.declines.decline(Reason.QP_REFILL_NOT_LEARNED, 0)
        for ep, n, off in zip((ff.client, ff.server), rec.irqs, rec.last_irq):
            k = ep.k
            if ff.timer_due(ep, t + rec.rtt):
                return ff.declines.decline(Reason.QP_TIMER_DUE, 0)
            if n:
                rnd = ep.host.random
                fp = rnd.fast_pool(ep.cpu)
                if not fp.count & MIX_INFLIGHT and (
                        fp.count + n >= rnd.threshold or t + off >= k.tick_time(fp.last + k.HZ + 1)):
                    return ff.declines.decline(Reason.QP_MIX_NOT_IN_RECORD, 0)
        ff.plan = Plan(rec)
        # after it the state is clean: steady round trips follow, in the same fast-forward
        if ff.tails is not None:
            ff.plan.tail = ff.tails.after_refill(t, rec)
        return 1

    def end_measure(self, t: int, clean: bool) -> None:
        """The boundary after a refill round trip simulated in detail: keep it
        if it ended clean with no rare event but its refills, and learn it
        once two of them agree (as the steady round trip is learned)."""
        ff = self.ff
        owed, snap = self.measuring
        self.measuring = None
        refills = sum(owed[0]) + sum(owed[1])
        if not clean or ff.disturbs() - snap.disturb != refills:
            return
        dirq = tuple(map(sub, ff.irqs(), snap.irqs))
        if dirq != ff.steady.irqs:
            return
        rec = RoundTrip(t - snap.t, deltas_of(snap.state, ff.state()), dirq, ff.last_irqs_from(snap.t))
        self.learner.offer(owed, rec)

    def after_trigger(self, t_m: int, m: int, rec: TriggerRoundTrip, wq: list, js: tuple) -> RoundTrip | None:
        """The refill round trip that pays what trigger round trip ``rec`` (from
        ``t_m``, ``m`` steady ones after the plan's start) leaves owed, if it is
        known and nothing rare can happen in it: replayed right after it, in
        the same fast-forward, instead of from a boundary of its own (as
        plan would).  No timer due on either CPU before it ends, and none
        of its interrupts schedules a mix: on a host that mixed in the trigger
        round trip the count restarts at the mix (the interrupts after it count
        on), ``last`` is the mix's jiffy; on the other the count goes on."""
        ff = self.ff
        if rec.owed_after == NO_REFILLS:
            return None
        after = self.learner.get(rec.owed_after)
        if after is None:
            return ff.declines.decline(Reason.QP_REFILL_NOT_LEARNED)
        dirq, offs = ff.steady.irqs, ff.steady.last_irq
        b = t_m + rec.rtt                          # the refill round trip starts here
        if b >= ff.pair.t_limit:
            return ff.declines.decline(Reason.QP_PAST_LIMIT)     # (run_size: the client stops there)
        t_end = b + after.rtt
        pools = []
        for (i, ep, j), jm in zip(wq, js):
            k = ep.k
            if ff.timer_due(ep, t_end):
                return ff.declines.decline(Reason.QP_TIMER_DUE)
            n = dirq[i]
            fp = ep.host.random.fast_pool(ep.cpu)
            if jm is None:
                count, last = fp.count + (m + 1) * n, fp.last
            else:
                # the interrupts of the trigger round trip later than its mix (_sync_jump)
                shift = rec.last_irq[i] - offs[i]
                count = n - bisect.bisect_right(ff.steady_offsets[i], rec.mix_at[i] - shift)
                last = k.jiffies_at(t_m + rec.mix_at[i])
            if count + n >= ep.host.random.threshold or b + after.last_irq[i] >= k.tick_time(last + k.HZ + 1):
                return ff.declines.decline(Reason.QP_MIX_NOT_IN_RECORD)
            pools.append((count + n, last))
        # after it the state is clean: steady round trips follow, in the same fast-forward
        if ff.tails is not None:
            ff.plan.tail = ff.tails.after(t_end, pools)
        return after
