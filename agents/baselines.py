"""Fixed baseline policies for the kenv environments.

* ``original``: the kernel before the regressions each patch answered
  (random.c: mix in hard IRQ; hwrng: ``cpu_relax``; raid6: ``preempt_disable``).
* ``pre_patch``: the state each patch fixed (``workqueue``,
  ``hwrng_msleep(1000)``, ``preempt_disable``).
* ``patched``: the patch (``timer``, ``hwrng_yield``, ``migrate_disable``).
* ``random``: uniform over the env's actions, seeded.
* ``oracle``: exhaustive search over *static* policies, per scenario context:
  for every context the mix can draw and every constant action, the mean
  return over a few seeded episodes; it then plays the best one for the
  context it finds at reset.

Each env class names its choices in ``ORIGINAL``, ``PRE_PATCH`` and
``PATCHED``.  A baseline whose choice is not in the env's action set (e.g.
``original`` = ``hardirq`` on the default RandomMix action set) raises
:class:`BaselineUnavailable`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Sequence

import gymnasium as gym
import numpy as np

BASELINES = ("original", "pre_patch", "patched", "random", "oracle")


class BaselineUnavailable(ValueError):
    pass


def _base(env: gym.Env):
    return env.unwrapped


def static_actions(env: gym.Env) -> list[Any]:
    """Every constant action of the env (for MultiDiscrete: every combination)."""
    space = env.action_space
    if isinstance(space, gym.spaces.Discrete):
        return list(range(int(space.n)))
    if isinstance(space, gym.spaces.MultiDiscrete):
        return [np.array(c, dtype=np.int64) for c in itertools.product(*(range(int(n)) for n in space.nvec))]
    raise TypeError(f"unsupported action space {space}")


def action_label(env: gym.Env, action: Any) -> str:
    return _base(env).action_label(action)


class Policy:
    name = "policy"

    def reset(self, env: gym.Env, obs: np.ndarray, info: dict) -> None:
        pass

    def act(self, obs: np.ndarray, info: dict) -> Any:  # pragma: no cover
        raise NotImplementedError


class StaticPolicy(Policy):
    def __init__(self, name: str, action: Any):
        self.name = name
        self.action = action

    def act(self, obs, info):
        return self.action


class RandomPolicy(Policy):
    name = "random"

    def __init__(self, env: gym.Env, seed: int = 0):
        self.space = env.action_space
        self.space.seed(seed)

    def act(self, obs, info):
        return self.space.sample()


def context_key(scenario: dict, fields: Sequence[str]) -> tuple:
    return tuple((f, scenario[f]) for f in fields)


@dataclass
class OraclePolicy(Policy):
    """Best static action per scenario context, found by exhaustive search."""

    fields: list[str]
    table: dict[tuple, Any]
    #: context -> action label -> the returns of its episodes
    returns: dict[tuple, dict[str, list[float]]] = field(default_factory=dict)
    name: str = "oracle"
    _action: Any = None

    def reset(self, env, obs, info):
        # the scenario with the mix's own values (info["scenario"] types them per field)
        self._action = self.table[context_key(env.unwrapped.scenario, self.fields)]

    def act(self, obs, info):
        return self._action


def run_episode(env: gym.Env, policy: Policy, seed: int, options: dict | None = None, *,
                states: list | None = None, infos: list | None = None) -> tuple[float, dict, dict]:
    """One episode; returns (return, summed reward components, last info).  With
    ``states``, each step's (observation, action) is appended to it; with ``infos``,
    each step's info."""
    obs, info = env.reset(seed=seed, options=options)
    policy.reset(env, obs, info)
    total = 0.0
    comps: dict[str, float] = {}
    while True:
        a = policy.act(obs, info)
        if states is not None:
            states.append((np.array(obs, dtype=np.float32), a))
        obs, r, term, trunc, info = env.step(a)
        total += r
        for c, v in info["reward_components"].items():
            comps[c] = comps.get(c, 0.0) + v
        if infos is not None:
            infos.append(info)
        if term or trunc:
            return total, comps, info


def build_oracle(env: gym.Env, episodes: int = 3, seed: int = 10_000) -> OraclePolicy:
    """Exhaustive search over static policies for every context of the env's mix."""
    base = _base(env)
    fields = base.mix.context_fields()
    table: dict[tuple, Any] = {}
    returns: dict[tuple, dict[str, list[float]]] = {}
    for ctx in base.mix.contexts():
        key = context_key(ctx, fields)
        best, best_score = None, -np.inf
        returns[key] = {}
        for a in static_actions(env):
            pol = StaticPolicy("static", a)
            rets = [run_episode(env, pol, seed + i, {"scenario": ctx})[0] for i in range(episodes)]
            returns[key][action_label(env, a)] = rets
            score = float(np.mean(rets))
            if score > best_score:
                best, best_score = a, score
        table[key] = best
    return OraclePolicy(fields, table, returns)


def make_policy(name: str, env: gym.Env, seed: int = 0, oracle_episodes: int = 3) -> Policy:
    """A baseline by name for this env instance."""
    base = _base(env)
    if name in ("original", "pre_patch", "patched"):
        choice = getattr(base, name.upper())
        return StaticPolicy(name, base.action_for(choice, baseline=name))
    if name == "random":
        return RandomPolicy(env, seed)
    if name == "oracle":
        return build_oracle(env, episodes=oracle_episodes)
    raise BaselineUnavailable(f"policy: got {name!r}; allowed: {', '.join(BASELINES)}")
