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

    @property
    def ff(self) -> str:
        return self.value[0]

    @property
    def meaning(self) -> str:
        return self.value[1]


class Declines(Counter):
    """How many times each :class:`Reason` declined."""

    def decline(self, reason: Reason) -> None:
        """Count ``reason``; return None (what a declining plan returns)."""
        self[reason] += 1
        return None


def reasons_markdown(ff: str) -> str:
    """The bullet list of ``ff``'s declines, as docs/fast-forward.md holds it."""
    return "\n".join(f"- `{r.name}`: {r.meaning}." for r in Reason if r.ff == ff) + "\n"
