"""Reward profiles: named weights over the per-step reward components.

A step's reward is ``sum(weights[c] * sign[c] * components[c])``.  The
components are measured by the simulated kernel during the step and are all
reported in ``info["reward_components"]`` so a user can re-weight offline.

========== ====== ===========================================================
component  sign   per-step value
========== ====== ===========================================================
entropy    +      bits credited toward crng READY during the step / 256
throughput +      normalised throughput of the step (env-specific, ~[0, 1])
latency    -      normalised latency cost of the step (env-specific, >= 0)
rcu_stall  -      RCU stall reports during the step
bug        -      kernel BUGs during the step
spin       -      CPU time burned in cpu_relax() loops / step duration
========== ====== ===========================================================
"""

from __future__ import annotations

import operator
import os
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Sequence

from ..schema import check_profile_arg, check_profile_file, check_reward_weights
from .config import load_yaml, packaged_names

COMPONENTS = ("entropy", "throughput", "latency", "rcu_stall", "bug", "spin")
SIGN = MappingProxyType({"entropy": 1.0, "throughput": 1.0, "latency": -1.0, "rcu_stall": -1.0, "bug": -1.0, "spin": -1.0})


@dataclass(frozen=True)
class RewardProfile:
    name: str
    weights: Mapping[str, float]
    description: str = ""
    _signed: tuple = field(default=(), repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_signed", tuple(SIGN[c] * self.weights[c] for c in COMPONENTS))

    def reward(self, components: Mapping[str, float]) -> float:
        return self.reward_of([components[c] for c in COMPONENTS])

    def reward_of(self, values: Sequence[float]) -> float:
        """The reward of component values given in the order of COMPONENTS."""
        return float(sum(map(operator.mul, self._signed, values)))

    def with_weights(self, overrides: Mapping[str, float] | None) -> "RewardProfile":
        """This profile with some weights replaced (kenv.schema.check_reward_weights:
        None and an empty mapping replace nothing; anything else not a mapping is an error)."""
        checked = check_reward_weights(overrides)
        if not checked:
            return self
        return RewardProfile(self.name + "+overrides", {**self.weights, **checked}, self.description)


def available_profiles() -> list[str]:
    return packaged_names("reward")


def load_profile(profile: str | os.PathLike | RewardProfile = "balanced",
                 weights: Mapping[str, float] | None = None) -> RewardProfile:
    """A packaged profile by name (``balanced``, ``latency``, ``throughput``) or a YAML path,
    with optional per-component weight overrides."""
    if isinstance(profile, RewardProfile):
        return profile.with_weights(weights)
    check_profile_arg(profile)
    check_reward_weights(weights)   # (before the file: the argument's error first)
    data, label = load_yaml("reward", profile)
    f = check_profile_file(data, label)
    name = f.name if f.name is not None else os.path.splitext(os.path.basename(os.fspath(profile)))[0]
    return RewardProfile(name, f.weights.model_dump(), f.description.strip()).with_weights(weights)
