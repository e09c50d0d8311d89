"""Extension of the qperf fast-forward: the steady round trips after a rare one.

A fast-forward whose last planned round trip is a rare one (a busy tick's,
kenv.fastforward.qperf_ticks; a trigger round trip and the refill one after
it; a refill round trip from a boundary of its own) ends clean: the steady
round trips that follow, up to the one whose interrupts would schedule the
next mix by the count or the HZ rule, are the ones the next boundary would
plan.  :class:`SteadyTails` takes them on in the same fast-forward
(``Plan.tail``) instead of ending there.  Without this extension
(``QperfLearned(extensions=...)`` without ``"tails"``) the fast-forward
ends after the rare round trip and the next boundary plans them.

The core (:class:`~kenv.fastforward.qperf.QperfFastForward`) and the other
extensions call :meth:`SteadyTails.after` (from a boundary inside a plan,
the fast pools given), :meth:`SteadyTails.after_tick` and
:meth:`SteadyTails.after_refill`.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from ..drivers.random import MIX_INFLIGHT
from .declines import Reason
from .qperf_records import MAX_JUMP_ROUND_TRIPS, RoundTrip

if TYPE_CHECKING:  # pragma: no cover
    from .qperf import QperfFastForward


class SteadyTails:
    """The steady tail after a rare round trip, for one qperf fast-forward."""

    __slots__ = ("ff",)

    def __init__(self, ff: "QperfFastForward"):
        self.ff = ff

    def after(self, b: int, pools: list) -> int:
        """How many steady round trips from ``b`` -- a clean boundary inside a
        plan, after its last rare event, each host's fast pool then at ``pools``
        (count, last) with no mix in flight -- the same fast-forward takes on:
        all of them up to the one whose interrupts would schedule a mix by the
        count or the HZ rule, as the core's plan would from that boundary."""
        ff = self.ff
        steady = ff.steady
        tail = min(-(-(ff.pair.t_limit - b) // steady.rtt), MAX_JUMP_ROUND_TRIPS)
        for ep, n, off, (count, last) in zip((ff.client, ff.server), steady.irqs, steady.last_irq, pools):
            if n > 0:
                tail = min(tail, ff.rts_before_mix(ep, n, off, b, count, last))
        return max(0, tail)

    def after_tick(self, t: int, k: int, delay: int) -> int:
        """:meth:`after` a busy tick's round trip, the last of the ``k``
        planned from ``t`` (``delay`` longer): on each host the count restarted
        at its mix in the plan (that tick's, or one while its CPU was idle,
        ``Plan.mix_in``) or goes on; none if a host still has a mix to come."""
        ff = self.ff
        plan = ff.plan
        rtt, dirq = ff.steady.rtt, ff.steady.irqs
        pools = []
        for h, ep in enumerate((ff.client, ff.server)):
            fp = ep.host.random.fast_pool(ep.cpu)
            n = dirq[h]
            x = plan.mix_in.get(h)
            if x is not None:
                # the interrupts after the mix in its round trip, and all of those after it
                mh, oh = divmod(x - t, rtt)
                count = n - bisect.bisect_right(ff.steady_offsets[h], oh) + (k - 1 - mh) * n
                pools.append((count, ep.k.jiffies_at(x)))
            elif fp.count & MIX_INFLIGHT or any(tr.ep is ep and tr.index < k * n for tr in plan.timer_triggers):
                return ff.declines.decline(Reason.QP_TAIL_MIX_PENDING, 0)
            else:
                pools.append((fp.count + k * n, fp.last))
        return self.after(t + k * rtt + delay, pools)

    def after_refill(self, t: int, rec: RoundTrip) -> int:
        """:meth:`after` the refill round trip ``rec`` replayed from the
        boundary ``t``: none if a host has a mix in flight or its timer pending."""
        ff = self.ff
        pools = []
        for ep, n in zip((ff.client, ff.server), rec.irqs):
            fp = ep.host.random.fast_pool(ep.cpu)
            ev = getattr(fp.mix, "_event", None)
            if fp.count & MIX_INFLIGHT or (ev is not None and ev.pending):
                return ff.declines.decline(Reason.QP_TAIL_MIX_PENDING, 0)
            pools.append((fp.count + n, fp.last))
        return self.after(t + rec.rtt, pools)
