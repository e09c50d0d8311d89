"""``FlatInfo``: a kenv env's info with one level of keys and numbers only.

Some clients read every info key into a tensor and refuse anything else: TorchRL's
``GymEnv`` (its info reader fails on a nested dict with "expand_specs wasn't specified
in the TensorDictPrimer" and on a string with "keys in TensorDict ... mismatch").
kenv's info has nested dicts (``scenario``, ``reward_components``, ``window``) and
strings (``profile``, ``action_name``, ...).  Wrapped in :class:`FlatInfo`:

* a nested key becomes ``outer/inner`` (``reward_components/latency``, ``window/mb_s``);
* a number becomes a numpy scalar (``np.float64``, ``np.int64``, ``np.bool_``); an
  array stays as it is (kenv's arrays have a fixed shape per env);
* a ``scenario/<field>`` string becomes an ``np.int64`` code: the index of the value in
  the env's choices for that field, ``FlatInfo.codes[field]`` (the choices as strings,
  in the order of ``env.unwrapped.version.scenario_fields[field]``);
* every other string (``profile``, ``action_name``, ``last_bug``, ``dmesg``, ...) is dropped.

Every step gives the same keys with the same types (as kenv's own info does).  The
observation Box's lower bounds are lowered to 0 where they were above it (kenv's
``HZ / 1000`` row is at least 0.1): TorchRL's vector-env path fills the final observation
of the envs that did not just end with zeros and checks it against the Box.  The
observations themselves are unchanged.
"""

from __future__ import annotations

from typing import Any, Mapping

import gymnasium as gym
import numpy as np

from .registration import FLAT_NAMESPACE, flat_id  # noqa: F401  (public here too: the twins' ids)

#: the separator of a flattened key (``reward_components/latency``)
SEP = "/"


class FlatInfo(gym.Wrapper):
    """``env``'s info flattened to numbers (module docstring); ``codes`` maps each
    scenario field whose values are strings to its choices, the code being the index."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        box = env.observation_space
        self.observation_space = gym.spaces.Box(np.minimum(box.low, 0), box.high, dtype=box.dtype)
        version = getattr(env.unwrapped, "version", None)
        fields: Mapping[str, Any] = version.scenario_fields if version is not None else {}
        self.codes = {f: tuple(str(c) for c in choices) for f, choices in fields.items()}
        self._index = {f: {c: i for i, c in enumerate(cs)} for f, cs in self.codes.items()}

    def flatten(self, info: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in info.items():
            if isinstance(v, Mapping):
                out.update(self.flatten(v, f"{prefix}{k}{SEP}"))
            elif isinstance(v, (bool, np.bool_)):
                out[prefix + k] = np.bool_(v)
            elif isinstance(v, (int, np.integer)):
                out[prefix + k] = np.int64(v)
            elif isinstance(v, (float, np.floating)):
                out[prefix + k] = np.float64(v)
            elif isinstance(v, np.ndarray) and v.dtype.kind in "biuf":
                out[prefix + k] = v
            elif isinstance(v, str) and prefix == f"scenario{SEP}" and k in self._index:
                out[prefix + k] = np.int64(self._index[k].get(v, -1))
        return out

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return obs, self.flatten(info)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, self.flatten(info)


def make_flat(env_id: str, **kwargs) -> FlatInfo:
    """``gym.make(env_id, **kwargs)`` in :class:`FlatInfo`: the entry point of the flat
    twins ``kenv-flat/<Name>-vN`` (kenv.envs.registration.flat_id), for clients that make
    an env from an id only: ``torchrl.envs.GymEnv("kenv:kenv-flat/HwrngWait-v2",
    num_envs=4)`` (the ``kenv:`` prefix makes a spawned worker import kenv first)."""
    return FlatInfo(gym.make(env_id, **kwargs))
