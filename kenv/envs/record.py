"""``RecordEpisodes``: a Gymnasium wrapper writing one JSON Lines record per episode.

It works under any client (SB3, a ``gym.make_vec`` loop, CleanRL, RLlib ...):
wrap the env (``gym.make(id)`` or each sub-env of a vector env) and every
finished episode appends one line to ``path`` (docs/benchmarks.md documents
the fields).  An episode is only replayable from its reset seed, so a reset
without a seed (a vector env's autoreset) gets one: the next value of a
generator seeded by the wrapper's first seeded reset (or 0), recorded.

Each record is written with one ``write`` of a whole line, flushed, so a
killed run leaves whole records (and at most one truncated last line, which
``kenv validate`` reports).
"""

from __future__ import annotations

import json
import os
from typing import Any

import gymnasium as gym
import numpy as np

from ..errors import ConfigError
from ..files import check_out_path, open_nofollow

#: the record format's version (a field of every record)
RECORD_FORMAT = 1


def _plain(a: Any) -> Any:
    """An action as JSON: an int, or a list of ints (MultiDiscrete)."""
    arr = np.asarray(a)
    return int(arr) if arr.ndim == 0 else [int(x) for x in arr.ravel()]


class RecordEpisodes(gym.Wrapper):
    """Append one JSON Lines record per finished episode of ``env`` to ``path``."""

    def __init__(self, env: gym.Env, path: str):
        from .flat_info import FlatInfo

        inner = env
        while isinstance(inner, gym.Wrapper):   # the record reads the nested info kenv gives
            if isinstance(inner, FlatInfo):
                raise ConfigError("env", env.spec.id if env.spec else type(inner).__name__,
                                  "an env whose info is kenv's own: record inside FlatInfo, "
                                  "kenv.FlatInfo(kenv.RecordEpisodes(gym.make(ID), path))")
            inner = inner.env
        super().__init__(env)
        # checked now: a path that cannot be written failed at the end of the first
        # episode, raising from a valid step() (deep inside a training run)
        self.path = check_out_path(path, "path")
        self._seeds: np.random.Generator | None = None
        self._seed: int | None = None
        self._actions: list = []
        self._return = 0.0
        self._components: dict[str, float] = {}
        self._scenario: dict = {}
        self._override: dict | None = None
        # what the replay needs of the env beyond its id (fixed when it is made): once, not
        # at every episode's end
        self._env_fields = {**self._action_set(), **self._reward_weights(), **self._scenario_mix(),
                            **self._time_limit(), **self._kernel_options()}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if self._seeds is None:
            self._seeds = np.random.default_rng(0 if seed is None else seed)
        if seed is None:
            seed = int(self._seeds.integers(2**31))
        self._seed, self._actions, self._return, self._components = int(seed), [], 0.0, {}
        obs, info = self.env.reset(seed=self._seed, options=options)
        self._scenario = dict(info.get("scenario", {}))
        # reset(options={"scenario": ...}) forces scenario fields over the seed's draw: the
        # replay needs the same override (the env's checked one, canonical values)
        self._override = self.env.unwrapped.scenario_override
        return obs, info

    def step(self, action):
        obs, r, term, trunc, info = self.env.step(action)
        self._actions.append(_plain(action))
        self._return += float(r)
        for c, v in info.get("reward_components", {}).items():
            self._components[c] = self._components.get(c, 0.0) + float(v)
        if term or trunc:
            self._write(bool(term), bool(trunc))
        return obs, r, term, trunc, info

    def record(self, terminated: bool, truncated: bool) -> dict:
        """The record of the episode that just ended."""
        import kenv

        from .scores import dynamics_fingerprint

        base = self.env.unwrapped
        return {"format": RECORD_FORMAT, "env_id": self.env.spec.id if self.env.spec else None,
                "kenv_version": kenv.__version__,
                "dynamics": dynamics_fingerprint(self.env.spec.id) if self.env.spec else None,
                "profile": base.profile.name,
                "seed": self._seed, "scenario": self._scenario, "actions": self._actions,
                "return": self._return, "components": self._components,
                "length": len(self._actions), "terminated": terminated, "truncated": truncated,
                **self._env_fields,
                **({} if self._override is None else {"scenario_override": self._override})}

    def _kernel_options(self) -> dict:
        """``{"kernel_options": {option: value}}`` for the env's kernel options
        (``irq_threads=``, ``load_balance=``: other dynamics under the same id) that are not
        its id's, else nothing: kenv validate replays with them."""
        spec = self.env.spec
        if spec is None:
            return {}
        from .registration import registered_option

        base = self.env.unwrapped
        opts = {o: getattr(base, o) for o in getattr(base, "KERNEL_OPTIONS", ())
                if bool(getattr(base, o)) != registered_option(spec.id, o)}
        return {"kernel_options": opts} if opts else {}

    def _time_limit(self) -> dict:
        """``{"max_episode_steps": n}`` when the env's time limit is not its id's
        (``gym.make(id, max_episode_steps=n)``): the episode was truncated there, and kenv
        validate replays with the same limit; else nothing."""
        spec = self.env.spec
        if spec is None or spec.max_episode_steps == gym.spec(spec.id).max_episode_steps:
            return {}
        return {"max_episode_steps": spec.max_episode_steps}

    def _scenario_mix(self) -> dict:
        """``{"scenario_mix": {field: [[choice, weight], ...]}}`` when the env was made with a
        ``scenario=`` (its mix is not its id's: the seed draws from another mix, and kenv
        validate replays with this one), else nothing.  Pairs, not an object: the choices keep
        their order (the draw depends on it) and their JSON types (an int is not a key)."""
        spec = self.env.spec
        if spec is None or spec.kwargs.get("scenario") == gym.spec(spec.id).kwargs.get("scenario"):
            return {}
        mix = self.env.unwrapped.mix
        return {"scenario_mix": {f: [[c, w] for c, w in dist.items()] for f, dist in mix.fields.items()}}

    def _reward_weights(self) -> dict:
        """``{"reward_weights": ...}`` when the env's profile is not a packaged one as
        packaged (``reward_weights=`` overrides, a profile YAML of the user's): kenv validate
        cannot look such a profile up by name, so it replays with these weights.  Records of
        a packaged profile are unchanged."""
        from .reward import available_profiles, load_profile

        profile = self.env.unwrapped.profile
        if profile.name not in available_profiles():
            return {"reward_weights": dict(profile.weights)}
        if dict(load_profile(profile.name).weights) == dict(profile.weights):
            return {}
        # a profile of the user's (a YAML) named like a packaged one: its records would claim the
        # packaged profile's name with other weights, which kenv validate refuses; said now, not
        # by every record failing later ("balanced+overrides", reward_weights=, is not packaged)
        raise ConfigError("profile", profile.name, "a profile name that is not a packaged profile's ("
                          + ", ".join(available_profiles()) + ") when its weights are not that profile's: "
                          "a record names its profile, and kenv validate replays a packaged name with "
                          "the packaged weights; give the profile YAML another name")

    def _action_set(self) -> dict:
        """``{"action_set": ...}`` when the env was made with an ``actions=`` other than its
        id's (an action is an index into the set: kenv validate replays with the same
        set), else nothing (records of the id's own actions are unchanged)."""
        spec = self.env.spec
        if spec is None or spec.kwargs.get("actions") == gym.spec(spec.id).kwargs.get("actions"):
            return {}
        base = self.env.unwrapped
        codec = base.codec
        if hasattr(codec, "dims"):   # MultiDiscrete: one list per decision
            return {"action_set": {d: list(names) for d, names in zip(codec.dims, base.actions)}}
        return {"action_set": list(base.actions)}

    def _write(self, terminated: bool, truncated: bool) -> None:
        line = json.dumps(self.record(terminated, truncated), sort_keys=True) + "\n"
        fd = open_nofollow(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, "path")
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)
