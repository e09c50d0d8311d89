"""Scenario mixes: the domain randomisation of each environment.

Every episode draws one *scenario* (platform, preemption model, HZ, load, ...)
from a mix.  A mix maps each field to a distribution ``{choice: weight}``; a
bare value means "always this".  Mixes are YAML files in ``configs/scenarios/``
(packaged), a path to such a file, or a dict given to the env constructor;
a dict is applied on top of the env's default mix, field by field.

    gym.make("kenv/Raid6Bench-v3", scenario={"preempt": "full", "load": {True: 1, False: 1}})
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import ConfigError
from ..schema import check_mix, check_mix_file, check_scenario_arg
from .config import load_yaml
from .registration import ENV_KWARGS, ENVS, canonical_id


@dataclass(frozen=True)
class ScenarioMix:
    name: str
    fields: Mapping[str, Mapping[Any, float]]
    #: fields drawn for every episode that are not contexts (:meth:`contexts`):
    #: the phase schedules, how a workload changes within an episode.  A policy
    #: chosen per context meets their whole mix; reacting to them is what a
    #: state-dependent policy may do better (issue #31)
    within_episode: tuple[str, ...] = ()
    #: per field: (choices, cumulative distribution) -- built once, see sample()
    _draws: tuple = dataclasses.field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self):
        draws = []
        for name, dist in self.fields.items():
            choices = list(dist)
            cdf = None
            if len(choices) > 1:
                w = np.array([dist[c] for c in choices], dtype=float)
                # what Generator.choice(n, p=w / w.sum()) computes before its one draw
                cdf = (w / w.sum()).cumsum()
                cdf /= cdf[-1]
            draws.append((name, choices, cdf))
        object.__setattr__(self, "_draws", tuple(draws))

    def sample(self, rng: np.random.Generator) -> dict:
        """One scenario: per field, the choice ``rng.choice(len(choices), p=weights)``
        would give (the same single draw from ``rng``, without its per-call checks)."""
        out = {}
        for name, choices, cdf in self._draws:
            if cdf is None:
                out[name] = choices[0]
            else:
                out[name] = choices[int(cdf.searchsorted(rng.random(), side="right"))]
        return out

    def context_fields(self) -> list[str]:
        """The fields that tell the contexts apart: more than one choice with
        non-zero weight, and not ``within_episode``."""
        return [f for f, dist in self.fields.items()
                if f not in self.within_episode and sum(1 for w in dist.values() if w > 0) > 1]

    def contexts(self) -> list[dict]:
        """Every combination of the choices with non-zero weight (for the oracle),
        but of the ``within_episode`` fields: an episode forced into a context
        (``reset(options={"scenario": ctx})``) draws those from the mix."""
        combos: list[dict] = [{}]
        for field, dist in self.fields.items():
            if field in self.within_episode:
                continue
            combos = [dict(c, **{field: v}) for c in combos for v, w in dist.items() if w > 0]
        return combos


def build_mix(env_id: str, allowed: Mapping[str, Sequence[Any]], default: str,
              scenario: str | os.PathLike | Mapping | None, within_episode: Sequence[str] = (),
              elsewhere: Mapping[str, str] | None = None) -> ScenarioMix:
    """The env's default mix (a packaged YAML name), updated by ``scenario``
    (``within_episode``: see :attr:`ScenarioMix.within_episode`).

    ``allowed`` lists, per field, the values the env understands; anything else
    is a :class:`ConfigError` naming the field (kenv.schema.check_mix), and
    for a field of ``elsewhere`` (:func:`phase_fields_elsewhere`) what it needs.
    """
    check_scenario_arg(scenario)
    base_data, base_label = load_yaml("scenarios", default)
    fields = _parse_fields(base_data, base_label, env_id, allowed)
    name = default
    if scenario is None:
        pass
    elif isinstance(scenario, Mapping):
        fields.update(check_mix(scenario, allowed, "scenario: mix", elsewhere))
        name = f"{default}+custom"
    else:
        data, label = load_yaml("scenarios", scenario)
        fields.update(_parse_fields(data, label, env_id, allowed, elsewhere))
        name = str(data.get("name") or os.fspath(scenario))
    return ScenarioMix(name, fields, tuple(within_episode))


def _parse_fields(data: Mapping, label: str, env_id: str, allowed: Mapping[str, Sequence[Any]],
                  elsewhere: Mapping[str, str] | None = None) -> dict:
    f = check_mix_file(data, label)
    env = env_id if f.env is None else f.env
    if canonical_id(env) != env_id:   # (a file of before the renaming names an old id)
        raise ConfigError(f"{label}: env", env, env_id)
    return check_mix(f.mix, allowed, f"{label}: mix", elsewhere)


def phase_fields_elsewhere(env_id: str, fields: Sequence[str]) -> dict[str, str]:
    """For an env built with ``phases=False``: each phase field (``fields``)
    with what it needs -- ``phases=True``, and the registered ids of the same
    env class that turn it on (kenv.envs.registration.ENV_KWARGS)."""
    entry = {i: ep for i, ep, _ in ENVS}
    ids = [i for i, kw in ENV_KWARGS.items() if kw.get("phases") and entry.get(i) == entry.get(env_id)]
    need = "is a phase schedule: only with phases=True" + (f" ({', '.join(ids)})" if ids else "")
    return {f: need for f in fields}
