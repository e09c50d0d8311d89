"""Counter probes on driver state, attached only while a trace is being recorded.

The kernel core records its own events (kenv/kernel/*.py); two counters live
in driver state that the core does not see: the input pool's credited
entropy bits (``InputPool.init_bits``, drivers/random.py) and the words in the
bcm2835 FIFO (``Bcm2835Rng``, drivers/hwrng.py).  Like kprobes, :class:`counter_probes`
wraps the functions that change them -- ``InputPool.__init__`` and
``credit_init_bits``, ``Bcm2835Rng.bcm2835_rng_init`` and ``_consume`` --
for the duration of a ``with`` block, and restores them after.  The wrappers
only read state, and report to the recorder of the object's own kernel
(``obj.k.engine.recorder``), so engines that are not recorded see no
difference; outside the block nothing is wrapped and nothing is paid.

The FIFO level is a function of time between reads (the generator fills it
at ``word_rate_hz`` up to its depth), so at each read the probe also emits
the fill since the previous sample, one point per word that landed (at most
the FIFO depth per read), and a recorder's ``finish()`` emits the fill up to
the end of the run.
"""

from __future__ import annotations

import functools
from typing import Any

_INSTALLED: list = []   # stack of active probe sets (nesting: install once)
_SAVED: dict = {}


def _input_pool_sample(pool: Any) -> None:
    k = pool.k
    rec = k.engine.recorder
    if rec is not None:
        rec.counter("credited entropy bits", "input_pool", k.now, pool.init_bits, k.name)


class _FifoState:
    __slots__ = ("t", "level")

    def __init__(self, t: int, level: int):
        self.t = t
        self.level = level


def _fifo_states(rec: Any) -> dict:
    st = getattr(rec, "_kenv_fifo", None)
    if st is None:
        st = rec._kenv_fifo = {}
        rec.finish_hooks.append(_fifo_finish)
    return st


def _fifo_fill(rec: Any, rng: Any, st: _FifoState, t_to: int) -> None:
    """Samples for each word that landed in (st.t, t_to] until the FIFO is full."""
    if rng.t_start is None:
        return
    depth = rng.params.fifo_words
    t = st.t
    while st.level < depth:
        t = rng.next_word_time(t)
        if t > t_to:
            break
        lvl = rng.words_available(t)
        if lvl != st.level:
            st.level = lvl
            rec.counter("FIFO words", rng.name, t, lvl, rng.k.name)
    st.t = t_to


def _fifo_finish(rec: Any) -> None:
    for rng, st in list(getattr(rec, "_kenv_fifo", {}).values()):
        if rng.k.engine.recorder is rec:
            _fifo_fill(rec, rng, st, rng.k.now)


def _wrap_init(orig):
    @functools.wraps(orig)
    def __init__(self, *a, **kw):
        orig(self, *a, **kw)
        _input_pool_sample(self)
    return __init__


def _wrap_credit(orig):
    @functools.wraps(orig)
    def credit_init_bits(self, *a, **kw):
        got = orig(self, *a, **kw)
        if got:
            _input_pool_sample(self)
        return got
    return credit_init_bits


def _wrap_rng_init(orig):
    @functools.wraps(orig)
    def bcm2835_rng_init(self, *a, **kw):
        out = orig(self, *a, **kw)
        rec = self.k.engine.recorder
        if rec is not None:
            _fifo_states(rec)[id(self)] = (self, _FifoState(self.k.now, 0))
            rec.counter("FIFO words", self.name, self.k.now, 0, self.k.name)
        return out
    return bcm2835_rng_init


def _wrap_consume(orig):
    @functools.wraps(orig)
    def _consume(self, n, *a, **kw):
        rec = self.k.engine.recorder
        if rec is None:
            return orig(self, n, *a, **kw)
        states = _fifo_states(rec)
        entry = states.get(id(self))
        if entry is None or entry[0] is not self:
            entry = states[id(self)] = (self, _FifoState(self.k.now, self.words_available()))
        st = entry[1]
        _fifo_fill(rec, self, st, self.k.now)
        out = orig(self, n, *a, **kw)
        st.level = self.words_available()
        st.t = self.k.now
        rec.counter("FIFO words", self.name, self.k.now, st.level, self.k.name)
        return out
    return _consume


def _targets():
    from ..drivers.hwrng import Bcm2835Rng
    from ..drivers.random import InputPool

    return [(InputPool, "__init__", _wrap_init), (InputPool, "credit_init_bits", _wrap_credit),
            (Bcm2835Rng, "bcm2835_rng_init", _wrap_rng_init), (Bcm2835Rng, "_consume", _wrap_consume)]


class counter_probes:
    """``with counter_probes():`` -- the counter probes are attached inside the block."""

    def __enter__(self) -> "counter_probes":
        if not _INSTALLED:
            for cls, attr, wrap in _targets():
                orig = cls.__dict__.get(attr)
                if orig is None:  # the driver changed: no such probe point, no counter
                    continue
                _SAVED[(cls, attr)] = orig
                setattr(cls, attr, wrap(orig))
        _INSTALLED.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _INSTALLED.remove(self)
        if not _INSTALLED:
            for (cls, attr), orig in _SAVED.items():
                setattr(cls, attr, orig)
            _SAVED.clear()


__all__ = ["counter_probes"]
