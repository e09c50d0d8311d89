"""The jump rule of the fast-forwards is written once (kenv/fastforward/protocol.py)."""

from __future__ import annotations

import ast
import pathlib

import pytest

from kenv.fastforward.declines import Declines, Reason
from kenv.fastforward.hwrng import PollRule, SpinRule
from kenv.fastforward.protocol import Horizon, JumpRule
from kenv.fastforward.qperf import QperfFastForward

FASTFORWARD = pathlib.Path(__file__).resolve().parent.parent / "kenv" / "fastforward"


class Scripted(JumpRule):
    """A rule whose steps return what a test gives them, recording the calls."""

    nothing = "nothing"

    def __init__(self, key="key", stretch="stretch", horizon=Horizon(10), k=3):
        self.out = {"key": key, "stretch": stretch, "guards": horizon, "repetitions": k}
        self.calls = []
        self.declines = Declines()

    def _step(self, name):
        self.calls.append(name)
        out = self.out[name]
        return self.declines.decline(Reason.NO_QUIET_TIME, None if name != "repetitions" else 0) \
            if out is None else out

    def key(self, at):
        return self._step("key")

    def stretch(self, at, key):
        return self._step("stretch")

    def guards(self, at, stretch):
        return self._step("guards")

    def repetitions(self, at, key, stretch, horizon):
        return self._step("repetitions")

    def apply(self, at, key, stretch, horizon, k):
        self.calls.append("apply")
        return (at, key, stretch, horizon, k)


def test_the_loop_applies_what_every_step_allows():
    rule = Scripted()
    assert rule.jump_at("t") == ("t", "key", "stretch", Horizon(10), 3)
    assert rule.calls == ["key", "stretch", "guards", "repetitions", "apply"]


@pytest.mark.parametrize("step", ["key", "stretch", "guards", "repetitions"])
def test_a_declining_step_ends_the_loop(step):
    rule = Scripted(**{{"key": "key", "stretch": "stretch", "guards": "horizon",
                        "repetitions": "k"}[step]: None})
    assert rule.jump_at("t") == "nothing"
    order = ["key", "stretch", "guards", "repetitions"]
    assert rule.calls == order[:order.index(step) + 1]
    assert rule.declines[Reason.NO_QUIET_TIME] == 1


def test_every_fast_forward_runs_the_one_loop():
    for rule in (PollRule, SpinRule, QperfFastForward):
        assert issubclass(rule, JumpRule)
        assert rule.jump_at is JumpRule.jump_at, f"{rule.__name__} writes its own jump loop"


def test_no_fast_forward_class_over_400_lines():
    for path in sorted(FASTFORWARD.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                lines = node.end_lineno - node.lineno + 1
                assert lines <= 400, f"{path.name}: class {node.name} is {lines} lines (at most 400)"
