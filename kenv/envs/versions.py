"""The versions of the kenv environments, each declared once.

An env class declares its versions in ``VERSIONS`` (``KernelEnv.VERSIONS``, ...):
one frozen :class:`Version` per registered id, holding everything that tells
that version apart -- the id, the class's keyword arguments it is registered
with, its time limit, its default scenario mix, its scenario fields (the phase
schedules among them), its observation entries (kenv.envs.observation) and its
info keys (kenv.envs.info).  kenv.envs.registration registers every id from
these records, an env finds its own among them from its keyword arguments
(:func:`version_for`), and kenv.envs.doctables writes the docstrings' tables
from them.  A version that adds to another (``phases=True`` adds the phase
fields and entries) is declared with :meth:`Version.extended`, so that its
docstring tables show what it adds.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from ..errors import ConfigError
from .info import Info
from .observation import Obs


@dataclasses.dataclass(frozen=True)
class Version:
    """One registered version of an env class."""

    #: the id it is registered as (``kenv/Name-vN``)
    id: str
    max_episode_steps: int
    #: the default scenario mix: a packaged name (configs/scenarios/NAME.yaml)
    default_scenario: str
    #: every scenario field with its allowed choices (kenv.envs.scenario)
    scenario_fields: Mapping[str, Sequence[Any]]
    #: the observation's entries, before the previous action's one-hot
    observation: tuple[Obs, ...]
    #: the info keys of every reset() and step()
    info: tuple[Info, ...]
    #: the env class's keyword arguments the id is registered with
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: the scenario fields that are phase schedules: drawn for every episode, how
    #: the workload changes within it (ScenarioMix.within_episode; issue #31)
    phase_fields: tuple[str, ...] = ()
    #: the version this one adds to (its docstring tables show the additions)
    extends: Version | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "kwargs", MappingProxyType(dict(self.kwargs)))
        object.__setattr__(self, "scenario_fields", MappingProxyType(
            {f: tuple(c) for f, c in self.scenario_fields.items()}))
        missing = [f for f in self.phase_fields if f not in self.scenario_fields]
        if missing:
            raise ValueError(f"{self.id}: phase fields {missing} are not scenario fields")

    def extended(self, id: str, *, kwargs: Mapping[str, Any], default_scenario: str,
                 scenario_fields: Mapping[str, Sequence[Any]] = MappingProxyType({}),
                 phase_fields: Mapping[str, Sequence[Any]] = MappingProxyType({}),
                 observation: Sequence[Obs] = (), info: Sequence[Info] = ()) -> Version:
        """The version ``id``: this one with the scenario fields, the phase fields (scenario
        fields drawn within an episode), the observation entries and the info keys given
        added after this one's."""
        return Version(id, self.max_episode_steps, default_scenario,
                       {**self.scenario_fields, **scenario_fields, **phase_fields},
                       self.observation + tuple(observation), self.info + tuple(info), kwargs,
                       self.phase_fields + tuple(phase_fields), extends=self)

    def added(self) -> tuple[tuple[Obs, ...], tuple[Obs, ...], tuple[Info, ...]]:
        """(the observation entries before this version's own, its own entries, its own
        info keys): what it adds to the version it extends (all of it if none)."""
        if self.extends is None:
            return (), self.observation, self.info
        n, k = len(self.extends.observation), len(self.extends.info)
        return self.observation[:n], self.observation[n:], self.info[k:]


def _same(a: Any, b: Any) -> bool:
    """``a == b`` for keyword values (of one type: ``1`` is not ``True``; a value whose
    ``==`` is not a bool, such as an array, is never the same)."""
    return type(a) is type(b) and (a is b or (a == b) is True)


def version_for(versions: Sequence[Version], own: Mapping[str, Any], given: Mapping[str, Any],
                defaults: Mapping[str, Any]) -> Version:
    """The version of ``versions`` an env built with the keyword arguments ``given``
    (the others at ``defaults``) is: of those with the values ``own`` gives the
    class's own keyword arguments (``phases``, ``boot_states``), the one whose
    keyword arguments ``given`` holds, the most of them (``load_balance=True``:
    Raid6BenchBalanced-v0); if none, the first.  A ConfigError, naming the versions, if
    no version has the values ``own`` gives."""
    def setting(v: Version, name: str) -> Any:
        return v.kwargs.get(name, defaults[name])

    same = [v for v in versions if all(_same(setting(v, k), x) for k, x in own.items())]
    if not same:
        changed = [k for k, x in own.items() if not _same(x, defaults[k])] or list(own)
        combos = {", ".join(f"{k}={setting(v, k)!r}" for k in own): [] for v in versions}
        for v in versions:
            combos[", ".join(f"{k}={setting(v, k)!r}" for k in own)].append(v.id)
        raise ConfigError(changed[-1], own[changed[-1]], "; ".join(
            f"{combo} ({', '.join(ids)})" for combo, ids in combos.items()))
    held = [v for v in same if all(_same(given.get(k, defaults.get(k)), x) for k, x in v.kwargs.items())]
    return max(held, key=lambda v: len(v.kwargs)) if held else same[0]


def check_made_as(registered: Version, made: Version, given: Mapping[str, Any],
                  defaults: Mapping[str, Any]) -> None:
    """A ConfigError if an env made as ``registered``'s id (gym.make's spec) is another version,
    ``made``, by the keyword arguments ``given`` (``gym.make("kenv/Raid6Bench-v3",
    load_balance=True)`` is a Raid6BenchBalanced-v0): it names the keyword, the value the id
    has and the id that value makes, never the wrong id silently.  A ``scenario`` is not
    refused: any id takes any mix (``gym.make("kenv/HwrngWait-v2", scenario="hwrng-control")``,
    its spec.kwargs say which); the control ids are HwrngWait-v2 with a packaged one."""
    names = [k for k in {**registered.kwargs, **made.kwargs} if k != "scenario"]
    if made is registered or not names:
        return

    def setting(v: Version, name: str) -> Any:
        return v.kwargs.get(name, defaults.get(name))

    name = next((k for k in names if not _same(given.get(k, defaults.get(k)), setting(registered, k))), names[0])
    value = given.get(name, defaults.get(name))
    raise ConfigError(name, value, f"{setting(registered, name)!r} with {registered.id}; "
                                   f"{name}={value!r} makes {made.id}: make that id")
