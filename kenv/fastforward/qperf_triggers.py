"""Extension of the qperf fast-forward: the round trip of a workqueue mix.

The round trip that holds the interrupt scheduling a workqueue mix (on one
host or both), with its kworker's run, is the same each time per deferral,
index of that interrupt in the message on each host and refills owed at its
start.  :class:`WqTriggers` learns it from round trips simulated in detail
(two alike) and replays it as the last round trip of a fast-forward
(:meth:`WqTriggers.plan`), or alone from a boundary clean but for refills
(:meth:`WqTriggers.plan_from_refill`): the interrupt counted at its time, at
the time the kworker ran its work that kworker's CPU time, switches and
vruntime (placed by the sleeper credit, as when it was learned, or early in a
boot at its own vruntime when that decides nothing differently) and
mix_interrupt_randomness() itself (:meth:`WqTriggers.schedule`), at the end
the refills left owed -- when no timer is due on either CPU, the count rule
(not the HZ rule) triggers, and before the engine's ``until`` (the next step
may change the deferral).  Without this extension (``QperfLearned(extensions=...)``
without ``"wq_triggers"``) that round trip runs in detail.

The core (:class:`~kenv.fastforward.qperf.QperfFastForward`) calls
:meth:`WqTriggers.plan`, :meth:`WqTriggers.plan_from_refill`,
:meth:`WqTriggers.start_measure` / :meth:`WqTriggers.end_measure`,
:meth:`WqTriggers.schedule` (from its jump) and :meth:`WqTriggers.start_size`.
"""

from __future__ import annotations

from operator import sub
from typing import TYPE_CHECKING

from ..drivers.random import MIX_INFLIGHT
from ..kernel.core import NICE_0_LOAD, TASK_SLEEPING, Task
from ..kernel.observe import account_skipped_stretch
from ..kernel.workqueue import get_pool, system_highpri_wq, system_wq
from ..sim.learner import TwiceAlike
from .declines import Reason
from .qperf_records import (NO_REFILLS, KworkerRun, KworkerStart, Plan, SchedCounters, Snapshot, TriggerPlan,
                            TriggerRoundTrip, WqTrigger, deltas_of)

if TYPE_CHECKING:  # pragma: no cover
    from ..workloads.qperf import QperfEndpoint
    from .qperf import QperfFastForward


class WqTriggers:
    """The workqueue mix's trigger round trips learned and replayed, for one qperf fast-forward."""

    __slots__ = ("ff", "learner", "measuring")

    def __init__(self, ff: "QperfFastForward"):
        self.ff = ff
        #: the round trip that holds the interrupt scheduling a workqueue mix (on one
        #: host or both), with its kworker run(s), per (deferral, trigger index on the
        #: client, on the server, refills owed at its start)
        self.learner: TwiceAlike[TriggerRoundTrip] = TwiceAlike({})
        #: (key, snapshot, KworkerStart per host) of the one being measured, or None
        self.measuring: tuple | None = None

    def start_size(self, table: dict) -> None:
        """A new message size: learn into (and replay from) ``table``'s trigger round trips."""
        self.learner = TwiceAlike(table["trigger"])
        self.measuring = None

    def schedule(self, trig: TriggerPlan, counted: dict) -> None:
        """The jump replaying ``trig`` as its last round trip: the trigger
        interrupt and the kworker's mix as engine events at their times, one
        event for both when the mix falls inside the slice (nothing looks at
        the pool in between); ``counted``: per endpoint, the interrupts they count."""
        engine = self.ff.client.k.engine
        until = engine.until
        for wt in trig.hosts:
            run = trig.record.kworkers[wt.host]
            if until is None or wt.t_mix <= until:
                engine.at_on(wt.ep.rq, wt.t_mix, self._jump_wq_mix, wt.ep, wt.index, wt.t_before,
                             wt.t_trigger, run, wt.kworker, wt.vruntime_end)
            else:
                engine.at_on(wt.ep.rq, wt.t_trigger, self._jump_wq_trigger, wt.ep, wt.index, wt.t_before)
                engine.at_on(wt.ep.rq, wt.t_mix, self._jump_kworker, wt.ep, run, wt.kworker,
                             wt.vruntime_end, wt.t_trigger)
            counted[wt.ep] = wt.index + 1

    def plan(self, t: int, m: int, wq: list, owed: tuple = NO_REFILLS) -> bool:
        """Round trip ``m`` after ``t`` (both hosts clean and on a workqueue
        deferral, nothing else bounding the fast-forward before it) holds the
        interrupt that schedules a mix on one host or both: take it into the
        fast-forward as its last round trip if it is known (``learner``) and
        nothing rare can happen in it -- no timer due on either CPU, the HZ rule
        not earlier than the count rule, each trigger within the engine's
        ``until`` (the deferral may change after it), each kworker placed as
        _kworker_after allows.  ``owed``: the refills owed at
        its start (a refill boundary; then ``m`` is 0).  Sets ``Plan.trigger``."""
        ff = self.ff
        rtt, deltas, dirq, offs = ff.steady
        deferral = self._wq_deferral()
        if deferral is None:
            return ff.declines.decline(Reason.QP_TRIGGER_NO_WQ, False)
        js = tuple(j - m * dirq[i] if j // dirq[i] == m else None for i, ep, j in wq)
        rec = self.learner.get((deferral,) + js + (owed,))
        if rec is None:
            return ff.declines.decline(Reason.QP_TRIGGER_NOT_LEARNED, False)
        t_m = t + m * rtt                      # the trigger round trip starts here
        until = ff.client.k.engine.until
        hosts = []
        for (i, ep, j), jm in zip(wq, js):
            k = ep.k
            if ff.timer_due(ep, t_m + rec.rtt):
                return ff.declines.decline(Reason.QP_TIMER_DUE, False)
            fp = ep.host.random.fast_pool(ep.cpu)
            t_hz = k.tick_time(fp.last + k.HZ + 1)
            if jm is None:
                if t_m + rec.last_irq[i] >= t_hz:       # its last interrupt in the fast-forward
                    return ff.declines.decline(Reason.QP_MIX_NOT_IN_RECORD, False)
                continue
            steady_offs = ff.steady_offsets[i]
            shift = rec.last_irq[i] - offs[i]           # the message arrives later in this round trip
            t_trig = t_m + steady_offs[jm] + shift
            if t_trig >= t_hz:
                return ff.declines.decline(Reason.QP_MIX_NOT_IN_RECORD, False)
            if until is not None and t_trig > until:
                return ff.declines.decline(Reason.QP_AFTER_UNTIL, False)
            start = self._kworker_after(ep, m, deltas[i], rec.kworkers[i])
            if start is None:
                return ff.declines.decline(Reason.QP_KWORKER_PLACEMENT, False)
            if jm:
                t_before = t_m + steady_offs[jm - 1] + shift
            else:
                t_before = t_m - rtt + offs[i] if m else t
            hosts.append(WqTrigger(ep, i, j, t_trig, t_before, t_m + rec.mix_at[i], *start))
        after = ff.refills.after_trigger(t_m, m, rec, wq, js) if ff.refills is not None else None
        ff.plan.trigger = TriggerPlan(rec, hosts, after)
        return True

    def plan_from_refill(self, t: int, owed: tuple) -> int:
        """A boundary clean but for the refills ``owed`` whose round trip (not
        replayable as a refill one) holds a workqueue mix's trigger: replay it
        as a one-round-trip fast-forward (1) if that trigger round trip, with
        these refills owed at its start, is known; else measure it (0)."""
        ff = self.ff
        wq = self._wq_next()
        if wq is None:
            return 0     # (Refills.plan counted why it declined)
        ff.plan = Plan(ff.steady)
        if self.plan(t, 0, wq, owed):
            return 1
        self.start_measure(t, owed)
        return 0     # (plan counted why it declined)

    def start_measure(self, t: int, owed: tuple = NO_REFILLS) -> None:
        """A boundary, clean but for the refills ``owed``, whose next round
        trip, simulated in detail, holds an interrupt that schedules a workqueue
        mix, of a kind not learned yet: snapshot both hosts (and their kworkers)
        to learn it at the next boundary."""
        ff = self.ff
        wq = self._wq_next()
        if wq is None:
            return
        dirq = ff.steady.irqs
        js, starts = [], []
        for i, ep, j in wq:
            start = self._trigger_start(ep, ep.rq.min_vruntime)
            if start is None:
                return
            js.append(j if j < dirq[i] else None)
            w, floor = start
            starts.append(KworkerStart(w, floor, w.sum_exec_runtime, w.nvcsw, w.nivcsw,
                                       ep.host.random.fast_pool(ep.cpu).mixes, ep.k.timers.next_expiry(ep.cpu),
                                       ep.refills, ep.disturb))
        key = (self._wq_deferral(),) + tuple(js) + (owed,)
        if js == [None, None] or self.learner.settled(key):
            return
        self.measuring = (key, Snapshot(t, ff.state(), ff.irqs(), 0), starts)

    def end_measure(self, t: int) -> None:
        """The boundary after a trigger round trip simulated in detail: keep it
        if it went as its key says (the mixes where and when the count rule
        puts them, in a kworker, nothing else on the CPUs' timers, ending clean
        but for refills) and learn it once two of them agree."""
        ff = self.ff
        key, snap, starts = self.measuring
        self.measuring = None
        eps = (ff.client, ff.server)
        if ff.refills_owed() is None or any(ep.host.random.deferral != key[0] for ep in eps):
            return
        offs = ff.steady.last_irq
        t0 = snap.t
        if tuple(map(sub, ff.irqs(), snap.irqs)) != ff.steady.irqs:
            return
        toffs = ff.last_irqs_from(t0)
        mix_offs, kw = [], []
        for i, (ep, j, st) in enumerate(zip(eps, key[1:3], starts)):
            w = st.kworker
            fp = ep.host.random.fast_pool(ep.cpu)
            nxt = ep.k.timers.next_expiry(ep.cpu)
            if nxt != st.next_expiry or (nxt is not None and ep.k.tick_time(nxt) <= t):
                return
            if j is None:
                if fp.mixes != st.mixes or w.nvcsw != st.nvcsw:
                    return
                mix_offs.append(None)
                kw.append(None)
                continue
            steady_offs = ff.steady_offsets[i]
            if (fp.mixes != st.mixes + 1 or ep.last_mix is None
                    or ep.last_mix[1] != "kworker"
                    or ep.last_trigger_t != t0 + steady_offs[j] + toffs[i] - offs[i]):
                return
            if w.woken_ns is None or w.woken_ns < t0:
                return     # (woken in this round trip: woken_vruntime is its placement here)
            mix_offs.append(ep.last_mix[0] - t0)
            kw.append(KworkerRun(w.woken_vruntime - st.floor, w.vruntime - w.woken_vruntime,
                                 w.sum_exec_runtime - st.exec_ns, w.nvcsw - st.nvcsw, w.nivcsw - st.nivcsw))
        rec = TriggerRoundTrip(t - t0, deltas_of(snap.state, ff.state()), toffs, tuple(mix_offs), tuple(kw),
                               tuple((ep.cold_qperf, ep.cold_netrx) for ep in eps),
                               tuple(ep.refills - st.refills for ep, st in zip(eps, starts)),
                               tuple(ep.disturb - st.disturb for ep, st in zip(eps, starts)))
        self.learner.offer(key, rec)

    def _kworker(self, ep: "QperfEndpoint") -> Task:
        """The kworker that runs ``ep``'s CPU's workqueue mix (the queue _schedule_mix picks)."""
        wq = system_highpri_wq if ep.host.random.deferral == "workqueue" else system_wq
        return get_pool(ep.k, ep.cpu, wq).worker

    def _trigger_start(self, ep: "QperfEndpoint", min_vruntime: int) -> tuple | None:
        """(kworker, its vruntime floor) if ``ep``'s kworker sleeps and will be
        placed by the sleeper credit (place_entity: ``min_vruntime -
        sched_latency / 2`` is above its own vruntime), else None: where a
        trigger round trip is learned."""
        w = self._kworker(ep)
        floor = min_vruntime - ep.k.sysctl_sched_latency // 2
        if w.state != TASK_SLEEPING or w.vruntime > floor:
            return None
        return w, floor

    def _kworker_after(self, ep: "QperfEndpoint", round_trip: int, deltas: SchedCounters,
                       run: KworkerRun) -> tuple | None:
        """(kworker, its vruntime after the trigger round trip ``round_trip``
        rounds on from now, each with steady ``deltas``) when the kworker
        replays ``run`` -- recorded where the sleeper credit placed it
        (_trigger_start): at its wakeup ``run.place`` above that round trip's
        floor (the floor's rise by then), and ``run.run`` more by the round
        trip's end.  Placed by the credit again (its own vruntime not above the
        floor at the wakeup): floor + place + run.  Placed at its own vruntime
        instead (early in a boot, while ``min_vruntime`` is below half a
        latency), the round trip is the same if the kworker, woken once, stays
        more than the wakeup granularity behind qperf and ``min_vruntime`` all
        along: then it wakes preempting or on the idle CPU, is picked first,
        and moves neither ``min_vruntime`` nor qperf's placement, as with the
        credit; it ends ``run.run`` above its own vruntime.  Else None."""
        ff = self.ff
        w = self._kworker(ep)
        if w.state != TASK_SLEEPING:
            return None
        k = ep.k
        min_vr = ep.rq.min_vruntime + round_trip * deltas.min_vruntime
        floor = min_vr - k.sysctl_sched_latency // 2
        if w.vruntime <= floor + run.place:
            return w, floor + run.place + run.run
        gran = k.sysctl_sched_wakeup_granularity * NICE_0_LOAD // w.weight
        if run.nvcsw == 1 and w.vruntime + run.run + gran < min(min_vr,
                                                                ep.task.vruntime + round_trip * deltas.vruntime):
            ff.stats.own_placement_replays += 1
            return w, w.vruntime + run.run
        return None

    def _wq_deferral(self) -> str | None:
        """The workqueue deferral both hosts are on (``workqueue`` or
        ``schedule_work``), or None -- None as well while tracing (the trigger
        round trip is then simulated in detail, for the trace)."""
        ff = self.ff
        d = ff.client.host.random.deferral
        if (d not in ("workqueue", "schedule_work") or ff.server.host.random.deferral != d
                or ff.client.k.engine.recorder is not None):
            return None
        return d

    def _wq_next(self) -> list | None:
        """Both hosts on one workqueue deferral (_wq_deferral) with no mix in
        flight or pending: (endpoint index, endpoint, index of its next trigger
        interrupt by the count rule) for each, else None."""
        ff = self.ff
        if self._wq_deferral() is None:
            return None
        out = []
        for i, (ep, n) in enumerate(zip((ff.client, ff.server), ff.steady.irqs)):
            rnd = ep.host.random
            fp = rnd.fast_pool(ep.cpu)
            ev = getattr(fp.mix, "_event", None)
            if n <= 0 or fp.count & MIX_INFLIGHT or (ev is not None and ev.pending):
                return None
            out.append((i, ep, rnd.threshold - 1 - fp.count))
        return out

    def _jump_wq_trigger(self, ep: "QperfEndpoint", before: int, t_prev: int, jiffies: int | None = None) -> None:
        """The interrupt that schedules a workqueue mix, inside a fast-forward
        that replays a trigger round trip: count the ``before`` interrupts since
        it began (the last at ``t_prev``), then it, at ``jiffies`` (default now;
        the work queued, its kworker's run replayed by _jump_kworker)."""
        rnd = ep.host.random
        if before:
            rnd.add_interrupt_randomness_many(ep.cpu, before, t_prev)
        rnd.add_interrupt_randomness_queued(ep.cpu, jiffies)

    def _jump_wq_mix(self, ep: "QperfEndpoint", before: int, t_prev: int, t_trig: int, run: KworkerRun, w: Task,
                     v_end: int) -> None:
        """_jump_wq_trigger (as at ``t_trig``) and _jump_kworker in one event
        at the kworker's mix, when both fall inside the slice (the deferral
        cannot change in between) and nothing looks at the pool in between."""
        self._jump_wq_trigger(ep, before, t_prev, ep.k.jiffies_at(t_trig))
        self._jump_kworker(ep, run, w, v_end, t_trig)

    def _jump_kworker(self, ep: "QperfEndpoint", run: KworkerRun, w: Task, v_end: int, t_woken: int) -> None:
        """Where the kworker of a trigger round trip ran its work: its CPU
        time, switches and vruntime (``v_end``, _kworker_after), then
        mix_interrupt_randomness() as worker_thread() calls it."""
        w.woken_ns = t_woken
        w.woken_vruntime = v_end - run.run
        account_skipped_stretch(w, exec_ns=run.exec_ns, vruntime=v_end - w.vruntime, nvcsw=run.nvcsw,
                                nivcsw=run.nivcsw)
        rnd = ep.host.random
        rnd.mix_interrupt_randomness(rnd.fast_pool(ep.cpu), "kworker")
