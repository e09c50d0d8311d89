"""The qperf fast-forward's jump: a plan applied.

:class:`QperfJump` runs what a boundary of
:class:`~kenv.fastforward.qperf.QperfFastForward` planned: it blocks qperf
until the skipped round trips would have ended, puts the interrupts that
schedule a mix inside them (and that mix, :meth:`QperfJump.sync`) at their
own times as engine events, and at the end adds their effect on both hosts
-- time, interrupts counted into the fast pools, qperf's CPU time, vruntime
and switches, the runqueues' counters (kenv.kernel.observe.account_skipped_stretch),
the refills paid -- and wakes qperf.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from ..kernel.core import Task, TaskBody
from ..kernel.observe import account_skipped_stretch
from .protocol import commit_skip
from .qperf_records import Jump, Plan

if TYPE_CHECKING:  # pragma: no cover
    from ..workloads.qperf import QperfEndpoint
    from .qperf import QperfFastForward


def add_round_trips(ep: "QperfEndpoint", host: int, parts: list) -> None:
    """Add to ``ep``'s qperf task, runqueue and interrupt thread the deltas
    of host ``host`` (0: client, 1: server) of ``parts``: (record, how many
    round trips of it)."""
    task, rq, th = ep.task, ep.rq, ep.irq_thread
    for rec, times in parts:
        (vruntime, exec_ns, nvcsw, nivcsw, switches, busy_ns, min_vruntime,
         irq_exec, irq_nvcsw, irq_runs) = rec.deltas[host]
        account_skipped_stretch(task, rq, times=times, exec_ns=exec_ns, vruntime=vruntime, nvcsw=nvcsw,
                                nivcsw=nivcsw, nr_switches=switches, busy_ns=busy_ns, min_vruntime=min_vruntime)
        if th is not None:
            account_skipped_stretch(th.task, times=times, exec_ns=irq_exec, nvcsw=irq_nvcsw)
            th.runs += times * irq_runs


class QperfJump:
    """The jump in progress of one qperf fast-forward, and what it has counted."""

    __slots__ = ("ff", "jumping", "counted", "min_vr_after")

    def __init__(self, ff: "QperfFastForward"):
        self.ff = ff
        #: the fast-forward in progress (None: none)
        self.jumping: Jump | None = None
        #: per endpoint, the interrupts the jump's events have counted
        self.counted: dict = {}
        #: the client runqueue's min_vruntime the skipped round trips leave (run puts it back)
        self.min_vr_after: int | None = None

    def sync(self, ep: "QperfEndpoint") -> None:
        """A mix inside a fast-forward: count the interrupts of ``ep``'s host
        that have arrived by now (the rest are counted when it ends)."""
        ff = self.ff
        jump = self.jumping
        t, k, rec, trig, _, _ = jump
        if rec is not ff.steady:  # pragma: no cover - a refill replay is planned without mixes
            raise RuntimeError("qperf fast-forward: a mix inside a replayed refill round trip")
        i = 0 if ep is ff.client else 1
        rtt, n, off_last = rec.rtt, rec.irqs[i], rec.last_irq[i]
        offsets = ff.steady_offsets[i]
        now = ep.k.now
        m, o = divmod(now - t, rtt)
        shift = 0
        if trig is not None and m >= k - 1:
            # in the last round trip, the trigger one: its message arrives later
            m, o = k - 1, now - t - (k - 1) * rtt
            shift = trig.record.last_irq[i] - off_last
        # the offsets are in order: those <= o are the first bisect_right(offsets, o)
        total = k * n if m >= k else m * n + bisect.bisect_right(offsets, o - shift)
        counted = self.counted.get(ep, 0)
        if total > counted:
            j = total - 1
            last = t + (j // n) * rtt + offsets[j % n] + (shift if j // n == k - 1 else 0)
            ep.host.random.add_interrupt_randomness_many(ep.cpu, total - counted, last)
            self.counted[ep] = total

    def _timer_mix(self, ep: "QperfEndpoint", before: int, t_prev: int, bucket: int) -> None:
        """The interrupt that schedules a timer mix inside a fast-forward and
        that timer's expiry at its tick (the plan has it fire there, on an idle
        CPU or as the busy tick, _mix_in): one event at the tick for the two,
        as nothing looks at the pool or the timer in between -- the ``before``
        interrupts since the fast-forward began (the last at ``t_prev``), the
        trigger at its jiffy (``bucket - 1``), the expiry."""
        rnd = ep.host.random
        if before:
            rnd.add_interrupt_randomness_many(ep.cpu, before, t_prev)
        ep.k.timers.expire_now(rnd.add_interrupt_randomness_timer(ep.cpu, bucket - 1), ep.cpu, bucket)

    def _trigger(self, ep: "QperfEndpoint", before: int, t_prev: int) -> None:
        """The interrupt that schedules a mix, inside a fast-forward: count the
        ``before`` interrupts since it began (the last at ``t_prev``), then it."""
        rnd = ep.host.random
        if before:
            rnd.add_interrupt_randomness_many(ep.cpu, before, t_prev)
        if not rnd.add_interrupt_randomness(ep.cpu):  # pragma: no cover - planned so
            raise RuntimeError("qperf fast-forward: the planned mix trigger did not trigger")

    def run(self, task: Task, t: int, k: int, plan: Plan) -> TaskBody:
        """Skip ``k`` round trips of the record boundary() chose (the steady
        one, or one refill round trip; or steady ones and a trigger round trip
        last, ``_trigger``): block until they would have ended."""
        ff = self.ff
        pair = ff.pair
        rec = plan.record
        rtt = rec.rtt
        costs = ff.client.k.costs
        engine = ff.client.k.engine
        trig, tick, tail = plan.trigger, plan.tick, plan.tail
        last_rtt = trig.record.rtt if trig is not None else rtt + tick.delay if tick is not None else rtt
        after = trig.refill_after if trig is not None else None
        t_tail = t + (k - 1) * rtt + last_rtt + (after.rtt if after is not None else 0)
        t_resume = t_tail + tail * ff.steady.rtt
        if ff.wl.continuous:
            if last_rtt == rtt:
                pair.skipped.append((t, rtt, k))
            else:
                if k > 1:
                    pair.skipped.append((t, rtt, k - 1))
                pair.skipped.append((t + (k - 1) * rtt, last_rtt, 1))
            if after is not None:
                pair.skipped.append((t + (k - 1) * rtt + last_rtt, after.rtt, 1))
            if tail:
                pair.skipped.append((t_tail, ff.steady.rtt, tail))
        if trig is not None:
            ff.stats.trigger_replays += 1
            ff.stats.trigger_refill_replays += after is not None
        if tick is not None:
            ff.stats.tick_replays += 1
        ff.stats.tail_rts += tail
        # the events of the jump act on the CPU of their endpoint (Event.scope);
        # its end acts on both hosts, the client's CPU stands for it: the
        # server's is another machine's, and kenv.kernel.observe.SkipFence
        # catches a touch of a CPU whose stretch is being skipped
        counted = {}
        for tr in plan.timer_triggers:
            ep, j, t_trig = tr.ep, tr.index, tr.t_trigger
            i = 0 if ep is ff.client else 1
            if j < k * rec.irqs[i]:   # inside this jump
                # interrupts 0 .. j-1 are counted there, j is the trigger itself;
                # a timer mix fires at the next tick (expires = jiffies), in the
                # same event when it fires inside this jump and this slice (the
                # deferral may change after it)
                bucket = ep.k.jiffies_at(t_trig) + 1
                t_mix = ep.k.tick_time(bucket)
                if (plan.mix_in.get(i) == t_mix and t_mix < t_resume and engine.recorder is None
                        and (engine.until is None or t_mix <= engine.until)):
                    engine.at_on(ep.rq, t_mix, self._timer_mix, ep, j, tr.t_before, bucket)
                else:
                    engine.at_on(ep.rq, t_trig, self._trigger, ep, j, tr.t_before)
                counted[ep] = j + 1
        if trig is not None:
            ff.triggers.schedule(trig, counted)
        self.counted = counted
        self.jumping = jump = Jump(t, k, rec, trig, tick, tail)
        recorder = engine.recorder
        if recorder is not None:
            # one slice per host for the k round trips skipped, not k * (events per round trip)
            for ep in (ff.client, ff.server):
                recorder.slice("aggregated", (ep.k.name, ep.cpu), f"qperf: {k} round trips (aggregated)",
                               t, t_resume, round_trips=k, rtt_ns=rtt, msg_size=ff.wl.size)
        yield from commit_skip(ff.client.k, t_resume - costs.wakeup_ns - costs.context_switch_ns,
                               land=self._end, args=(jump,), scope=ff.client.rq)
        # the jump's own block/wake moved min_vruntime; put back what k
        # steady round trips would have left
        mv = self.min_vr_after
        if mv is not None:
            rq = ff.client.rq
            account_skipped_stretch(ff.client.task, rq, min_vruntime=mv - rq.min_vruntime)
            self.min_vr_after = None

    @staticmethod
    def _pay_refills(ep: "QperfEndpoint") -> None:
        """The refills ``ep`` owed, paid by a replayed round trip (_run_cost, _netrx_cost)."""
        paid = ep.cold_qperf + ep.cold_netrx
        ep.cold_qperf = ep.cold_netrx = False
        ep.refills += paid
        ep.disturb += paid

    def _end(self, jump: Jump) -> None:
        """The end of a fast-forward: what its round trips left, on both hosts
        -- ``k`` of its record (the last one the trigger round trip, or the
        steady one with the busy tick), the refill round trip after a trigger
        one, then ``tail`` steady ones -- and qperf woken where the last of
        them ends."""
        ff = self.ff
        t, k, rec, trig, tick, tail = jump
        counted = self.counted
        self.jumping = None
        refill = rec is not ff.steady
        after = None
        t_last = t + (k - 1) * rec.rtt               # the last of the k starts here
        if trig is not None:
            tr = trig.record
            after = trig.refill_after
            t_tail = t_last + tr.rtt + (after.rtt if after is not None else 0)
        else:
            t_tail = t_last + rec.rtt + (tick.delay if tick is not None else 0)
        rts = k + (after is not None) + tail
        steady = ff.steady     # the tail's
        # the round trips' deltas, as (record, how many): k - 1 of the record,
        # then the last of the k -- the record's again (with a busy tick too:
        # it only delays), or the trigger round trip's; the refill round trip
        # after it; and the tail's steady ones (with the record's, if steady)
        n_rec = k - (trig is not None) + (tail if rec is steady else 0)
        parts = [(rec, n_rec)] if n_rec else []
        if trig is not None:
            parts.append((tr, 1))
        if after is not None:
            parts.append((after, 1))
        if tail and rec is not steady:
            parts.append((steady, tail))
        for i, ep in enumerate((ff.client, ff.server)):
            n = rec.irqs[i]
            if refill:
                self._pay_refills(ep)
            if tail:
                last = t_tail + (tail - 1) * steady.rtt + steady.last_irq[i]   # in the last steady one after it
            elif after is not None:
                last = t_last + tr.rtt + after.last_irq[i]        # in the refill round trip after it
            elif trig is not None:
                last = t_last + tr.last_irq[i]
            else:
                last = t_last + rec.last_irq[i]
                if tick is not None:
                    last += tick.shifts[i]    # after the busy tick: later by its delay
            if n:
                left = rts * n - counted.get(ep, 0)
                if left:
                    ep.host.random.add_interrupt_randomness_many(ep.cpu, left, last)
                ep.last_irq_t = last
            add_round_trips(ep, i, parts)
            if trig is not None:
                # what the trigger round trip paid and left owed (its mix's own
                # hook set both refills and counted itself)
                ep.cold_qperf, ep.cold_netrx = tr.owed_after[i]
                ep.refills += tr.refills[i]
                ep.disturb += tr.disturbs[i] - (tr.mix_at[i] is not None)
            if after is not None:
                self._pay_refills(ep)
            ep.msgs_received += rts
        cl = ff.client
        crq = cl.rq
        # the jump's own BLOCK and switch-in are not round trips
        cl.task.nvcsw -= 1
        crq.nr_switches -= 1
        self.min_vr_after = crq.min_vruntime
        ff.pair.rts += rts
        ff.prev = None
        cl.k.wake_up_on_idle(cl.task)
