"""An env keyword argument the env does not take is kenv's ConfigError (kenv/envs/base.py
KenvEnv.__new__), naming the keyword, its value and the keywords that env takes -- not
Python's bare TypeError from the constructor."""

from __future__ import annotations

import pickle

import gymnasium as gym
import pytest

import kenv  # noqa: F401
from kenv.envs.registration import ENV_IDS
from kenv.errors import ConfigError

COMMON = ("actions", "scenario", "profile", "reward_weights", "render_mode", "fast_forward", "load_balance")


@pytest.mark.parametrize("env_id,kwarg,value", [
    ("kenv/Raid6Bench-v3", "boot_states", True),      # KernelBoot-v0's option, not Raid6Bench's
    ("kenv/RandomMix-v2", "profle", "latency"),        # a typo
    ("kenv/HwrngWait-v2", "seed", 3),
    ("kenv/KernelBoot-v0", "nr_cpus", 8),
])
def test_unknown_keyword_names_keyword_value_and_the_env_keywords(env_id, kwarg, value):
    with pytest.raises(ConfigError) as e:
        gym.make(env_id, **{kwarg: value})
    assert e.value.field == kwarg and e.value.value == value
    allowed = e.value.allowed.split("its keyword arguments: ", 1)[1].split(", ")
    assert set(COMMON) <= set(allowed) and kwarg not in allowed
    assert ("boot_states" in allowed) == env_id.startswith("kenv/Kernel")
    assert not isinstance(e.value, TypeError)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_keyword_listed_is_taken_and_pickling_still_works(env_id):
    """The keywords the message lists are the ones the constructor accepts (here, their
    defaults passed explicitly), and unpickling (which calls __new__ with no arguments)
    is not refused."""
    with pytest.raises(ConfigError) as e:
        gym.make(env_id, no_such_keyword=1)
    listed = e.value.allowed.split("its keyword arguments: ", 1)[1].split(", ")
    defaults = {"actions": None, "scenario": None, "profile": "balanced", "reward_weights": None,
                "render_mode": None, "fast_forward": True}
    env = gym.make(env_id, **{k: v for k, v in defaults.items() if k in listed})
    env.reset(seed=0)
    env.step(env.action_space.sample())
    clone = pickle.loads(pickle.dumps(env.unwrapped))
    assert type(clone) is type(env.unwrapped)
    env.close()
