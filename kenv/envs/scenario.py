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
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from ..errors import ConfigError
from ..schema import check_mix, check_mix_file, check_scenario_arg
from .config import load_yaml

if TYPE_CHECKING:
    from .versions import Version


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


def build_mix(env_ids: Sequence[str], allowed: Mapping[str, Sequence[Any]], default: str,
              scenario: str | os.PathLike | Mapping | None, within_episode: Sequence[str] = (),
              elsewhere: Mapping[str, str] | None = None) -> ScenarioMix:
    """The env's default mix (a packaged YAML name), updated by ``scenario``
    (``within_episode``: see :attr:`ScenarioMix.within_episode`).  A mix file
    names the env it is for: one of ``env_ids`` (:func:`mix_env_ids`).

    ``allowed`` lists, per field, the values the env understands; anything else
    is a :class:`ConfigError` naming the field (kenv.schema.check_mix), and
    for a field of ``elsewhere`` (:func:`phase_fields_elsewhere`) what it needs.
    """
    check_scenario_arg(scenario)
    base_data, base_label = load_yaml("scenarios", default)
    fields = _parse_fields(base_data, base_label, env_ids, allowed)
    name = default
    if scenario is None:
        pass
    elif isinstance(scenario, Mapping):
        fields.update(check_mix(scenario, allowed, "scenario: mix", elsewhere))
        name = f"{default}+custom"
    else:
        data, label = load_yaml("scenarios", scenario)
        fields.update(_parse_fields(data, label, env_ids, allowed, elsewhere))
        name = str(data.get("name") or os.fspath(scenario))
    return ScenarioMix(name, fields, tuple(within_episode))


def _parse_fields(data: Mapping, label: str, env_ids: Sequence[str], allowed: Mapping[str, Sequence[Any]],
                  elsewhere: Mapping[str, str] | None = None) -> dict:
    # (imported here: registration imports the env classes, which import this module)
    from .registration import canonical_id

    f = check_mix_file(data, label)
    if f.env is not None and canonical_id(f.env) not in env_ids:   # (a file of before the renaming names an old id)
        raise ConfigError(f"{label}: env", f.env, " or ".join(env_ids))
    return check_mix(f.mix, allowed, f"{label}: mix", elsewhere)


def mix_env_ids(version: Version, versions: Sequence[Version]) -> tuple[str, ...]:
    """The env ids a mix file for ``version`` may name (its ``env:``): the ``versions``
    of its class with the same scenario fields (Raid6BenchBalanced-v0 reads Raid6Bench-v3's
    mixes; KernelBoot-v0, which adds ``start``, has its own).  A file naming an old id
    of one (kenv.envs.registration.RENAMED) is read as one of them."""
    return tuple(v.id for v in versions if v.scenario_fields == version.scenario_fields)


def phase_fields_elsewhere(version: Version, versions: Sequence[Version]) -> dict[str, str]:
    """The phase fields of the other ``versions`` of ``version``'s class that it
    does not take, each with what it needs: ``phases=True``, as the versions
    that have it are built."""
    ids: dict[str, list[str]] = {}
    for v in versions:
        for f in v.phase_fields:
            if f not in version.scenario_fields:
                ids.setdefault(f, []).append(v.id)
    return {f: f"is a phase schedule: only with phases=True ({', '.join(i)})" for f, i in ids.items()}
