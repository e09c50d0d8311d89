"""Why a fast-forward declined: one :class:`Reason` per condition, counted.

Every place a fast-forward gives a stretch back to the detailed simulation
returns ``declines.decline(Reason.X)``; the counts live in the fast-forward's
learned memory (owned by the simulation that uses it, like the tables), so a
test can run the suite's scenarios and see which reasons were reached
(tests/test_ff_declines.py), and docs/fast-forward.md's lists of declines are
generated from this enum (:func:`reasons_markdown`, checked by the same test).
Counting never changes what a fast-forward does.
"""

from __future__ import annotations

import enum
from collections import Counter


class Reason(enum.Enum):
    """A decline: (the fast-forward it belongs to, what it means)."""

    # hwrng wait cycles (HwrngFastForward.skip_polls)
    POLL_BOUNDARY_NOT_CLEAN = ("hwrng", "wait cycles: the boundary is not clean: something else queued or pending "
                               "on the poller's CPU, another fast-forward observing it, a trace being recorded, "
                               "no declared step end, the reading_mutex not the poller's, or a wait that does not sleep")
    POLL_NOTHING_LEARNED = ("hwrng", "wait cycles: no cycle learned yet for this poller and wait, or the rng is "
                            "being removed")
    POLL_NO_PLAN = ("hwrng", "wait cycles: no chain of learned cycles from this key whose status reads see, against "
                    "the generator's landing times, what they saw when learned (at least two cycles before the horizon)")
    POLL_TOO_SHORT = ("hwrng", "wait cycles: fewer than one whole cycle ends before the next event in scope")
    # hwrng cpu_relax() reads (HwrngFastForward.skip_reads / skip_words)
    SPIN_NOT_QUIET = ("hwrng", "spinning reads: not a cpu_relax() wait, no declared step end, a trace being "
                      "recorded, a read that is not whole words, words or a lock holder or waiter already there, "
                      "something else queued or pending on the reader's CPU, a reweighted reader, a generator "
                      "not started, a read budget of zero, or another fast-forward observing the CPU")
    SPIN_WORDS_OVERLAP = ("hwrng", "spinning reads: a word can land while the previous one is processed (not one "
                          "word per read)")
    SPIN_TOO_SHORT = ("hwrng", "spinning reads: not one whole read ends before the step's end, the next event in "
                      "scope or the driver's recheck")
    SPIN_FIFO_NOT_EMPTY = ("hwrng", "spinning reads: the status read starting now would find a word")
    # both
    NO_QUIET_TIME = ("hwrng", "an event is due now, or the run has a stop test that could end it after any event "
                     "(Engine.quiet_limit): not even the first cycle or read can be committed")

    # qperf round trips (QperfFastForward.boundary and its planners): the plan
    # stops before the round trip meeting the condition, which runs in detail
    QP_RUN_START = ("qperf", "the first round trip of a run: from qperf's wakeup the steady lag of min_vruntime "
                    "behind qperf's vruntime builds up in it")
    QP_STEADY_UNKNOWN = ("qperf", "the steady round trip is not learned yet at this message size (two consecutive "
                         "clean round trips with no rare event that agree)")
    QP_NOT_CLEAN = ("qperf", "the boundary is not clean, nor clean but for refills owed: a task other than qperf "
                    "queued or running, a message or data in flight, an interrupt in progress, a workqueue or "
                    "hardirq mix in flight, or the server not waiting")
    QP_THREADED = ("qperf", "PREEMPT_RT with the interrupt threads simulated, where only steady round trips are "
                   "replayed: a refill owed, a pending mix timer (its callback runs in a thread), or qperf's "
                   "min_vruntime lag not the steady round trip's")
    QP_MIX_AHEAD = ("qperf", "a mix the count or HZ rule schedules that no steady round trip takes in (a workqueue, "
                    "schedule_work or hardirq deferral's, or the next one after a mix timer taken in): the plan "
                    "stops before its round trip, which runs in detail unless a learned trigger round trip is "
                    "replayed there")
    QP_AFTER_UNTIL = ("qperf", "a mix trigger after the engine's until (the next step may change the deferral)")
    QP_TIMER_SAME_NS = ("qperf", "a mix timer at the very nanosecond a round trip ends or one of its host's "
                        "interrupts arrives (the order of the same-time events decides, in detail)")
    QP_TICK_UNMODELLED = ("qperf", "a mix timer's softirq on a busy CPU that the plan cannot take in: on a stretch's "
                          "edge or one no model covers, a second busy tick in the plan, interrupts after it that "
                          "could schedule another mix, ending near the fast-forward's own wakeup, or the steady "
                          "round trip's busy stretches unknown")
    QP_TICK_NOT_LEARNED = ("qperf", "a mix timer's softirq on busy stretches whose delay is not learned or not "
                           "confirmed yet (the round trip is measured in detail)")
    QP_TICK_NOT_LAST = ("qperf", "a busy tick's round trip would not be the plan's last, or something after the "
                        "tick in it (a timer mix's trigger, a mix timer on an idle CPU, the other host's HZ rule) "
                        "would move with it")
    QP_NEAR_END = ("qperf", "a mix timer's softirq near a round trip's end with no steady round trip after it in "
                   "the plan (it could meet the fast-forward's own wakeup): planned again without it")
    QP_TAIL_MIX_PENDING = ("qperf", "no steady round trips after a busy tick or a replayed refill round trip: a "
                           "host still has a mix in flight, its timer pending, or a timer mix's trigger planned")
    QP_TIMER_DUE = ("qperf", "a timer due on either CPU within a refill or trigger round trip")
    QP_REFILL_NOT_LEARNED = ("qperf", "the round trip paying the refills owed is not learned yet")
    QP_MIX_NOT_IN_RECORD = ("qperf", "an interrupt of a refill or trigger round trip would schedule a mix its "
                            "record does not hold (by the count rule, or by the HZ rule before the count rule's "
                            "trigger or on the host without one)")
    QP_PAST_LIMIT = ("qperf", "the refill round trip after a trigger one would start at the pair's t_limit (the "
                     "client stops, or the traffic changes, there)")
    QP_TRIGGER_NO_WQ = ("qperf", "a trigger round trip not taken in: the hosts not both on one workqueue deferral "
                        "(hardirq), or a trace being recorded (it is then simulated for the trace)")
    QP_TRIGGER_NOT_LEARNED = ("qperf", "no trigger round trip learned for this deferral, trigger index per host "
                              "and refills owed")
    QP_KWORKER_PLACEMENT = ("qperf", "a kworker would not be placed as when the trigger round trip was learned: "
                            "not sleeping, or neither the sleeper credit nor (early in a boot) its own vruntime "
                            "places it so")

    @property
    def ff(self) -> str:
        return self.value[0]

    @property
    def meaning(self) -> str:
        return self.value[1]


class Declines(Counter):
    """How many times each :class:`Reason` declined."""

    def decline(self, reason: Reason, result=None):
        """Count ``reason``; return ``result`` (what the declining plan returns:
        None, False, or the round trips left in a plan cut short)."""
        self[reason] += 1
        return result


def reasons_markdown(ff: str) -> str:
    """The bullet list of ``ff``'s declines, as docs/fast-forward.md holds it."""
    return "\n".join(f"- `{r.name}`: {r.meaning}." for r in Reason if r.ff == ff) + "\n"
