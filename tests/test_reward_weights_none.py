"""issue #43 item 6: a None reward weight was silently ignored; gym.make now refuses it."""
import gymnasium as gym
import pytest

import kenv  # noqa: F401  (registers the env ids)
from kenv.errors import ConfigError


def test_gym_make_refuses_a_none_reward_weight():
    with pytest.raises(ConfigError) as e:
        gym.make("kenv/Raid6Bench-v3", reward_weights={"throughput": None})
    assert "reward_weights.throughput" in str(e.value) and "\n" not in str(e.value)
