"""kenv.FlatInfo and the flat twins ``kenv-flat/...``: info with one level of keys and
numbers only, for clients that read every info key into a tensor (TorchRL); and TorchRL
itself on every id (skipped, with the reason, when torchrl is not installed: CI's second
stage installs it)."""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import numpy as np
import pytest

import kenv
from kenv.envs.registration import ENV_IDS, RENAMED, flat_id


def _signature(info: dict) -> dict:
    return {k: (type(v), getattr(v, "shape", ())) for k, v in info.items()}


def _check_flat(info: dict) -> None:
    for k, v in info.items():
        assert isinstance(v, (np.generic, np.ndarray)) and not isinstance(v, np.str_), (k, type(v))
        assert np.asarray(v).dtype.kind in "biuf", (k, v)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_flat_twin_gives_numbers_only_with_the_same_keys_every_step(env_id):
    base = gym.make(env_id)
    flat = gym.make(flat_id(env_id))
    assert isinstance(flat.unwrapped, type(base.unwrapped))
    _, nested = base.reset(seed=4)
    obs, info = flat.reset(seed=4)
    assert flat.observation_space.contains(obs) and (flat.observation_space.low <= 0).all()
    _check_flat(info)
    ref = _signature(info)
    # nested keys flattened with "/", the numbers equal to the nested info's
    assert info["reward_components/latency"] == nested["reward_components"]["latency"] == 0.0
    assert info["sim_time_s"] == nested["sim_time_s"]
    # a string scenario field: its code indexes the env's choices (FlatInfo.codes)
    codes = flat.get_wrapper_attr("codes")
    assert codes["preempt"][int(info["scenario/preempt"])] == nested["scenario"]["preempt"]
    assert "profile" not in info and "action_name" not in info
    flat.action_space.seed(4)
    base.action_space.seed(4)
    for _ in range(6):
        a = flat.action_space.sample()
        _, r, term, trunc, info = flat.step(a)
        _, r0, *_, nested = base.step(a)
        _check_flat(info)
        assert _signature(info) == ref and r == r0
        assert info["reward_components/entropy"] == nested["reward_components"]["entropy"]
        if term or trunc:
            break
    base.close()
    flat.close()


def test_flat_info_wraps_an_env_made_with_keyword_arguments():
    env = kenv.FlatInfo(gym.make("kenv/Raid6Bench-v3", scenario={"preempt": {"rt": 1.0}}))
    _, info = env.reset(seed=0)
    assert env.codes["preempt"][int(info["scenario/preempt"])] == "rt"
    *_, info = env.step(0)
    assert "window/mb_s" in info and isinstance(info["window/mb_s"], np.int64)
    assert isinstance(info["window/lost_fraction"], np.float64)


def test_flat_twins_are_not_benchmark_ids():
    assert not any(i.startswith("kenv/") for i in gym.registry if i.startswith("kenv-flat/"))
    assert {flat_id(i) for i in ENV_IDS + tuple(RENAMED)} == {i for i in gym.registry if i.startswith("kenv-flat/")}


def _rollout(env, steps: int = 4):
    try:
        return env.rollout(steps, break_when_any_done=False)
    finally:
        env.close()


def _torchrl():
    pytest.importorskip("torchrl", reason="torchrl not installed (pip install -e '.[torchrl]'; CI stage 2)")
    from torchrl.envs import GymEnv, ParallelEnv

    return GymEnv, ParallelEnv


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.filterwarnings("ignore::DeprecationWarning")   # "kenv/...-v0 is out of date"
def test_torchrl_gymenv_single_vector_and_parallel(env_id):
    """TorchRL's three ways in (issue #39): ``GymEnv(id)``; ``GymEnv(id, num_envs=2)`` (a
    Gymnasium AsyncVectorEnv: the flat twin, since its info reader refuses nesting and
    strings); ``ParallelEnv`` of ``GymEnv(id)`` (forked workers here: a spawned worker
    imports torch again, about 8 s per env; spawning is tested once, below)."""
    GymEnv, ParallelEnv = _torchrl()
    td = _rollout(GymEnv(env_id))
    assert td.batch_size == (4,) and td["next", "reward"].shape == (4, 1)
    td = _rollout(GymEnv(f"kenv:{flat_id(env_id)}", num_envs=2))
    assert td.batch_size == (2, 4)
    assert td["next", "reward_components/latency"].shape == (2, 4)
    td = _rollout(ParallelEnv(2, partial(GymEnv, env_id), mp_start_method="fork"))
    assert td.batch_size == (2, 4)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torchrl_parallel_env_with_spawned_workers():
    """TorchRL's default start method (spawn): a fresh worker knows the ids when the id
    names kenv as the module to import first (Gymnasium's ``module:id``)."""
    GymEnv, ParallelEnv = _torchrl()
    td = _rollout(ParallelEnv(2, partial(GymEnv, "kenv:kenv/Raid6Bench-v3")))
    assert td.batch_size == (2, 4)


def test_record_episodes_goes_inside_flat_info(tmp_path):
    """kenv.RecordEpisodes reads the nested info (reward components, scenario): inside
    FlatInfo its records validate; around a flat env it refuses at once."""
    import subprocess
    import sys

    from kenv.errors import ConfigError

    with pytest.raises(ConfigError, match="record inside FlatInfo"):
        kenv.RecordEpisodes(gym.make(flat_id("kenv/HwrngWait-v2")), str(tmp_path / "x.jsonl"))
    assert not (tmp_path / "x.jsonl").exists()
    path = tmp_path / "r.jsonl"
    env = kenv.FlatInfo(kenv.RecordEpisodes(gym.make("kenv/HwrngWait-v2"), str(path)))
    env.reset(seed=1)
    env.action_space.seed(1)
    while True:
        *_, term, trunc, info = env.step(env.action_space.sample())
        assert "reward_components/entropy" in info
        if term or trunc:
            break
    p = subprocess.run([sys.executable, "-m", "kenv.cli", "validate", str(path)], capture_output=True, text=True)
    assert p.returncode == 0 and "1 of 1 records valid" in p.stdout, p.stdout + p.stderr
