"""Measure a stretch twice, check that both agree, then replay it: the one
learning rule of the fast-forwards."""

from __future__ import annotations

from typing import Generic, Hashable, TypeVar

R = TypeVar("R")

#: the value a refuted key holds in a learner's table
REFUTED = False


class TwiceAlike(Generic[R]):
    """Records learned per key: one is known (:meth:`get`) once two
    measurements of its stretch, simulated in detail, agree (:meth:`offer`).
    The first may also be a model's prediction (:meth:`predict`), which the
    next measurement then confirms or refutes.

    ``known``: the table the records go to (kept by the caller, e.g. a
    :class:`~kenv.fastforward.qperf.QperfLearned` table), ``candidates``:
    where first measurements wait for their second (a fresh dict if None).
    ``refute_on_disagreement``: a second measurement unlike the first refutes
    the key for good (a model that the detailed simulation contradicted);
    otherwise it becomes the candidate, waiting for a second like it.
    Memory: one record and one candidate per key; the caller bounds the keys."""

    __slots__ = ("known", "candidates", "refute_on_disagreement")

    def __init__(self, known: dict, candidates: dict | None = None, *, refute_on_disagreement: bool = False):
        self.known = known
        self.candidates = {} if candidates is None else candidates
        self.refute_on_disagreement = refute_on_disagreement

    def get(self, key: Hashable) -> R | None:
        """The record known for ``key``, or None (not learned yet, or refuted)."""
        rec = self.known.get(key)
        return None if rec is REFUTED else rec

    def settled(self, key: Hashable) -> bool:
        """Is ``key`` known or refuted (nothing more to measure)?"""
        return key in self.known

    def candidate(self, key: Hashable) -> R | None:
        """The first measurement (or prediction) of ``key`` waiting for its second."""
        return self.candidates.get(key)

    def __bool__(self) -> bool:
        return bool(self.known)

    def offer(self, key: Hashable, rec: R) -> R | None:
        """A measurement of ``key``'s stretch: the record if it is now known
        (it agrees with the candidate), else None."""
        if key in self.known:
            return self.get(key)
        cand = self.candidates.get(key)
        if cand is not None and cand == rec:
            del self.candidates[key]
            self.known[key] = rec
            return rec
        if cand is not None and self.refute_on_disagreement:
            self.refute(key)
        else:
            self.candidates[key] = rec
        return None

    def predict(self, key: Hashable, rec: R) -> None:
        """A model's prediction of ``key``'s stretch, for the next measurement to check."""
        if key not in self.known:
            self.candidates[key] = rec

    def refute(self, key: Hashable) -> None:
        """``key``'s stretch is not one to replay: never learn it."""
        self.candidates.pop(key, None)
        self.known[key] = REFUTED

    def forget(self, key: Hashable) -> None:
        """Drop ``key``'s candidate (its next measurement is a first one again)."""
        self.candidates.pop(key, None)
