"""kenv.schema.check_int, the one rule for counts given to functions (seeds, steps,
workers, budgets): the hand-written checks it replaced accepted exactly the Python
integers in range (no bools, floats, numpy or strings), and so must it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kenv.errors import ConfigError
from kenv.schema import check_int

ANY = st.one_of(st.integers(-10**20, 10**20), st.booleans(), st.floats(allow_nan=True), st.none(),
                st.text(max_size=5), st.integers(-5, 5).map(np.int64), st.lists(st.integers(), max_size=2))


@given(value=ANY, lo=st.integers(-3, 3), span=st.one_of(st.none(), st.integers(0, 10)), optional=st.booleans())
def test_accepts_exactly_python_integers_in_range(value, lo, span, optional):
    hi = None if span is None else lo + span
    ok = (value is None and optional) or (
        type(value) is int and lo <= value and (hi is None or value <= hi))
    if ok:
        assert check_int(value, "--n", lo, hi, optional=optional) == value
    else:
        with pytest.raises(ConfigError) as e:
            check_int(value, "--n", lo, hi, optional=optional)
        assert e.value.field == "--n" and e.value.allowed == (
            f"an integer in {lo}..{hi}" if hi is not None else f"an integer >= {lo}")


def test_the_allowed_text_is_the_callers_exactly():
    with pytest.raises(ConfigError) as e:
        check_int(1, "--seeds", 2, 9, "an integer in 2..9 (a 95% interval needs at least 2 episodes)")
    assert str(e.value) == "--seeds: got 1; allowed: an integer in 2..9 (a 95% interval needs at least 2 episodes)"
