"""A guard of the qperf fast-forward's jump rule: a mix timer's expiry.

:func:`take_timer` cuts the round trips a plan of
:class:`~kenv.fastforward.qperf.QperfFastForward` may skip at a mix timer
that fires inside them (kenv.fastforward.protocol: the guards that could make
the next repetition differ), or takes the timer in.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from .declines import Reason

if TYPE_CHECKING:  # pragma: no cover
    from ..workloads.qperf import QperfEndpoint
    from .qperf import QperfFastForward


def take_timer(ff: "QperfFastForward", host: int, ep: "QperfEndpoint", t: int, k: int, tick: int,
               cost: int) -> int:
    """A mix timer of endpoint ``host`` fires at ``tick`` (a TIMER softirq of
    ``cost`` ns on its CPU): the fast-forward of ``k`` round trips from
    ``t`` takes it in when that CPU is idle then in the steady round trip
    (the mix counts the interrupts so far, see _sync_jump) and ends before
    the next mix could be scheduled; when the CPU is busy and _tick_model
    knows what the softirq does there, it ends with that round trip, longer
    by the model's delay (``_tick``); else it stops before that round trip.
    A timer at the very nanosecond a round trip ends or one of the host's
    interrupts arrives is left to the detailed simulation: there the order
    of the same-time events (the order they were scheduled in) decides."""
    rtt = ff.steady.rtt
    m, o = divmod(tick - t, rtt)
    if o == 0 and 0 < m <= k:
        # at the very nanosecond round trip m - 1 ends: the timer, armed before
        # that round trip's last stretch began, expires first and ends it late
        # (in detail; the fast-forward would end it on time): simulate it
        return ff.declines.decline(Reason.QP_TIMER_SAME_NS, m - 1)
    if m >= k:
        return k
    offsets = ff.steady_offsets[host]
    if o in offsets:
        # at the very nanosecond one of this host's interrupts arrives: which
        # counts first, the mix (count restarts) or the interrupt, is the
        # order of the two events in detail: simulate that round trip
        return ff.declines.decline(Reason.QP_TIMER_SAME_NS, m)
    if not ff.busy_log.idle(host, t, o, cost, m, k):
        if ff.busy_ticks is None:
            return ff.declines.decline(Reason.QP_TICK_UNMODELLED, m)
        return ff.busy_ticks.take(host, ep, m, o, tick, cost, offsets)
    ff.plan.idle_ticks.append(tick)
    ff.plan.mix_in[host] = tick
    # after the mix: count restarts; no new trigger before the fast-forward ends
    n = ff.steady.irqs[host]
    rnd = ep.host.random
    after_in_m = len(offsets) - bisect.bisect_right(offsets, o)   # offsets are in order
    by_count = m + 1 + (rnd.threshold - 1 - after_in_m) // n
    last = ep.k.jiffies_at(tick)
    x = ep.k.tick_time(last + ep.k.HZ + 1) - t - ff.steady.last_irq[host]
    by_hz = max(m + 1, -(-x // rtt))
    if min(by_count, by_hz) < k:
        return ff.declines.decline(Reason.QP_MIX_AHEAD, min(by_count, by_hz))
    return k
