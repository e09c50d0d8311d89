"""The env docstrings' tables are the declarations' (kenv.envs.doctables), and the
declarations are what the envs return."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import pytest

import kenv  # noqa: F401  (registers the ids)
from kenv.envs import doctables
from kenv.envs.hwrng_wait import HwrngWaitEnv
from kenv.envs.doctables import observation_table
from kenv.envs.info import info_types
from kenv.envs.observation import Obs, obs_rows
from kenv.envs.registration import ENVS


@pytest.mark.parametrize("cls", doctables.ENV_CLASSES, ids=lambda c: c.__name__)
def test_every_docstring_table_is_current(cls):
    assert f"<!-- observation: {cls.VERSIONS[0].id} -->" in cls.__doc__
    assert not doctables.stale(cls), (
        f"{cls.__name__}'s docstring tables differ from its declarations: run python -m kenv.envs.doctables")


def test_a_changed_declaration_makes_the_table_stale():
    row = Obs(("a new row",), "a new row", lambda ep: [0.0])
    base, phased, *controls = HwrngWaitEnv.VERSIONS

    class Grown(HwrngWaitEnv):
        __doc__ = HwrngWaitEnv.__doc__
        VERSIONS = (base, dataclasses.replace(phased, observation=phased.observation + (row,)), *controls)

    assert doctables.stale(Grown)
    assert "| 20 | a new row | 0 | 1 | |" in doctables.regenerate(Grown.__doc__, Grown)
    assert not doctables.stale(HwrngWaitEnv)


def test_a_marker_naming_no_version_is_an_error():
    with pytest.raises(ValueError, match="kenv/HwrngWait-v9"):
        doctables.render(HwrngWaitEnv, "observation", "kenv/HwrngWait-v9")


def test_the_check_command_passes():
    assert doctables.main(["--check"]) == 0


@pytest.mark.parametrize("env_id", [e[0] for e in ENVS])
def test_the_box_and_the_rows_come_from_the_declarations(env_id):
    env = gym.make(env_id).unwrapped
    n = len(obs_rows(env.version.observation))
    assert env.obs_rows[:n] == obs_rows(env.version.observation)
    assert env.observation_space.shape == (len(env.obs_rows),)
    obs, _ = env.reset(seed=0)
    assert obs.shape == env.observation_space.shape


@pytest.mark.parametrize("env_id", [e[0] for e in ENVS])
def test_the_info_keys_and_types_are_the_declared_ones(env_id):
    env = gym.make(env_id)
    base = env.unwrapped
    declared = info_types(base.info_entries())
    env.action_space.seed(0)
    _, info = env.reset(seed=0)
    assert {k: type(v) for k, v in info.items()} == declared
    for _ in range(2):
        info = env.step(env.action_space.sample())[4]
        assert {k: type(v) for k, v in info.items()} == declared


def test_a_table_numbers_groups_and_entries():
    a = Obs(("x", "y"), "x and y", lambda ep: [0.0, 1.0], source="kernel/x.c")
    b = Obs(("z", "w"), ("z", "w"), lambda ep: [0.0, 1.0], high=(1, 1.5))
    table = observation_table((b,), before=(a,), previous_action="prev")
    assert table.splitlines() == ["| index | meaning | min | max | kernel source |", "|---|---|---|---|---|",
                                  "| 2 | z | 0 | 1 | |", "| 3 | w | 0 | 1.5 | |", "| 4.. | prev | 0 | 1 | |"]
    assert "| 0-1 | x and y | 0 | 1 | ``kernel/x.c`` |" in observation_table((a,), (), "prev")
    with pytest.raises(ValueError):
        dataclasses.replace(b, meaning="one text", high=(1, 1.5))
