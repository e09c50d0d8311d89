"""The action of an env: ``Discrete`` over one kernel decision's choices, or
``MultiDiscrete`` over several (Kernel-v3), as one codec the env shell uses.

A codec checks the ``actions=`` argument, gives the action space, reads an
action (an index, or a ConfigError naming what is allowed), names it, turns a
baseline's choice into an action, gives what the simulation episode receives
for it, and the previous-action entries of the observation.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping, Sequence

import numpy as np
from gymnasium import spaces

from ..errors import ConfigError
from ..schema import check_actions_per_decision
from ..subsystems.common import Decision
from .observation import one_hot


class DiscreteCodec:
    """``Discrete(n)`` over the choices of one decision."""

    def __init__(self, decision: Decision, actions: Sequence[str] | None):
        #: the action names (env.actions)
        self.names: tuple[str, ...] = decision.check(actions)
        #: what the episode receives for each (the decision's kernel form)
        self.kernel = tuple(map(decision.kernel_form, self.names))
        self.space = spaces.Discrete(len(self.names))

    def rows(self) -> list[tuple[str, float, float]]:
        """The previous action's observation entries: (name, min, max)."""
        return [(f"previous action == {a}", 0.0, 1.0) for a in self.names]

    def features(self, index: int | None) -> list[float]:
        """The previous action's entries (all zero before the first step)."""
        return one_hot(-1 if index is None else index, len(self.names))

    def index(self, action: Any) -> int:
        """The index of ``action``, or a ConfigError naming what is allowed."""
        n = len(self.names)
        if type(action) is int or isinstance(action, np.integer):   # the common case, fast
            if 0 <= action < n:
                return int(action)
        allowed = f"an integer in 0..{n - 1} ({', '.join(self.names)})"
        try:
            v = np.asarray(action) if action is not None else None
        except Exception:  # noqa: BLE001 - anything numpy cannot read (ragged lists, ...) is a bad action
            raise ConfigError("action", action, allowed) from None
        if v is None or v.shape not in ((), (1,)) or not np.issubdtype(v.dtype, np.integer):
            raise ConfigError("action", action, allowed)
        a = int(v.reshape(()))
        if not 0 <= a < n:
            raise ConfigError("action", action, allowed)
        return a

    def label(self, index: int) -> str:
        """The name of an already read action."""
        return self.names[index]

    def action_for(self, choice: str, baseline: str = "") -> int:
        """The action of a named choice (the fixed baselines)."""
        if choice not in self.names:
            raise ConfigError(f"baseline {baseline}".strip(), choice,
                              f"a choice in this env's action set ({', '.join(self.names)}); "
                              f"pass actions=[...] to include it")
        return self.names.index(choice)

    def kernel_action(self, index: int) -> Any:
        """What the episode's ``step`` receives for action ``index``."""
        return self.kernel[index]


class MultiDiscreteCodec:
    """``MultiDiscrete`` over several decisions, one dimension each, in ``decisions``' order."""

    def __init__(self, decisions: Mapping[str, Decision], actions: Mapping[str, Sequence[str]] | None):
        dims = self.dims = tuple(decisions)
        actions = check_actions_per_decision(actions, dims)
        #: the action names of each dimension (env.actions)
        self.names: tuple[tuple[str, ...], ...] = tuple(decisions[d].check(actions.get(d), f"actions.{d}")
                                                        for d in dims)
        kernel = [tuple(map(decisions[d].kernel_form, names)) for d, names in zip(dims, self.names)]
        #: what the episode receives for each action, by index tuple (also index's
        #: fast check: a few dozen actions, one dict look-up a step)
        self.kernel = {idx: tuple(k[i] for k, i in zip(kernel, idx))
                       for idx in itertools.product(*(range(len(names)) for names in self.names))}
        self.space = spaces.MultiDiscrete([len(names) for names in self.names])

    def rows(self) -> list[tuple[str, float, float]]:
        return [(f"previous {d} == {a}", 0.0, 1.0) for d, names in zip(self.dims, self.names) for a in names]

    def features(self, index: tuple[int, ...] | None) -> list[float]:
        out: list[float] = []
        for i, names in enumerate(self.names):
            out += one_hot(-1 if index is None else index[i], len(names))
        return out

    def index(self, action: Any) -> tuple[int, ...]:
        n = len(self.dims)
        if type(action) is np.ndarray and action.shape == (n,) and action.dtype.kind in "iu":
            idx = tuple(action.tolist())        # the common case, fast
            if idx in self.kernel:
                return idx
        allowed = f"an integer array of shape ({n},) with entries in " + ", ".join(
            f"0..{len(a) - 1}" for a in self.names)
        if isinstance(action, (list, tuple)) and any(isinstance(x, (bool, np.bool_)) for x in action):
            raise ConfigError("action", action, allowed)   # (numpy reads [True, 0, 0] as integers)
        try:
            v = np.asarray(action)
        except Exception:  # noqa: BLE001 - anything numpy cannot read is a bad action
            raise ConfigError("action", action, allowed) from None
        if v.shape != (n,) or not np.issubdtype(v.dtype, np.integer):
            raise ConfigError("action", action, allowed)
        idx = tuple(int(x) for x in v)
        if not all(0 <= i < len(names) for i, names in zip(idx, self.names)):
            raise ConfigError("action", action, allowed)
        return idx

    def label(self, index: tuple[int, ...]) -> str:
        return "|".join(names[i] for i, names in zip(index, self.names))

    def action_for(self, choice: Sequence[str], baseline: str = "") -> np.ndarray:
        out = []
        for d, c, names in zip(self.dims, choice, self.names):
            if c not in names:
                raise ConfigError(f"baseline {baseline} ({d})".strip(), c,
                                  f"a choice in this env's {d} set ({', '.join(names)})")
            out.append(names.index(c))
        return np.array(out, dtype=np.int64)

    def kernel_action(self, index: tuple[int, ...]) -> tuple:
        return self.kernel[index]
