"""The busy stretches of both CPUs in qperf's steady round trip.

While the steady round trip is measured, :class:`BusyStretches` logs when
each host's CPU is busy (:class:`~kenv.kernel.observe.BusyLog` on its
runqueue) from each boundary to the next; the core keeps them with the
steady round trip when two measured round trips agree on them too
(``QperfFastForward.busy``).  A mix timer's softirq that falls while its CPU
is idle in the steady round trip is taken into a fast-forward
(:meth:`BusyStretches.idle`); one on a busy stretch is the busy_ticks
extension's (kenv.fastforward.qperf_ticks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..kernel.observe import BusyLog

if TYPE_CHECKING:  # pragma: no cover
    from .qperf import QperfFastForward


class BusyStretches:
    """Logging and querying the steady round trip's busy stretches, for one qperf fast-forward."""

    __slots__ = ("ff", "candidate", "logging_from", "logs")

    def __init__(self, ff: "QperfFastForward"):
        self.ff = ff
        #: the stretches of the first of two measured round trips (the second must agree)
        self.candidate: tuple | None = None
        self.logging_from = 0
        self.logs: list[BusyLog] | None = None   # both CPUs' while measuring

    def log(self, t: int, clean: bool) -> tuple | None:
        """During the measurement: the busy stretches of both CPUs since the
        last boundary (relative to it), and a new log from here."""
        ff = self.ff
        out = None
        if self.logs is not None:
            t0 = self.logging_from
            out = tuple(tuple((a - t0, b - t0) for a, b in log.until(t)) for log in self.logs)
        self.stop()
        if clean and ff.steady is None:
            self.logging_from = t
            self.logs = []
            for ep in (ff.client, ff.server):
                rq = ep.rq
                log = BusyLog(t if rq.curr is not None else None)
                rq.attach(log)
                self.logs.append(log)
        return out

    def stop(self) -> None:
        """Stop logging (the steady round trip is measured)."""
        if self.logs is not None:
            for ep, log in zip((self.ff.client, self.ff.server), self.logs):
                ep.rq.detach(log)
            self.logs = None

    def idle(self, host: int, start: int, offset: int, duration: int, round_trip: int, k: int) -> bool:
        """Is host ``host``'s CPU idle from ``offset`` into round trip
        ``round_trip`` for ``duration`` ns, in a fast-forward of ``k`` round
        trips from ``start``?"""
        ff = self.ff
        if ff.busy is None:
            return False
        rtt = ff.steady.rtt
        costs = ff.client.k.costs
        end = start + round_trip * rtt + offset + duration
        stretches = ff.busy[host]
        for shift in (0, rtt):      # this round trip, and the next one if it spills over
            lo, hi = offset - shift, offset + duration - shift
            if hi < 0:
                break
            for a, b in stretches:
                if a <= hi and b >= lo:
                    return False
        # the fast-forward's own wakeup at its end
        return ff.near_end_check(end >= start + k * rtt - costs.wakeup_ns - costs.context_switch_ns - 1)
