"""kenv.RecordEpisodes: one JSON Lines record per episode, under a gym.make_vec loop and SB3."""

import json

import gymnasium as gym
import numpy as np
import pytest

import kenv
from kenv.agents.baselines import StaticPolicy, run_episode
from kenv.errors import ConfigError

ENV = "kenv/Raid6Bench-v3"


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_make_vec_loop_records_replayable_episodes(tmp_path):
    path = tmp_path / "rec.jsonl"
    envs = gym.make_vec(ENV, num_envs=2, vectorization_mode="sync",
                        wrappers=[lambda e: kenv.RecordEpisodes(e, path)])
    envs.reset(seed=3)
    envs.action_space.seed(0)
    for _ in range(64 * 2 + 2):
        envs.step(envs.action_space.sample())
    envs.close()
    recs = _records(path)
    assert len(recs) >= 4 and {r["env_id"] for r in recs} == {ENV}
    for r in recs:
        _check_replays(r)


def _check_replays(r):
    assert r["length"] == len(r["actions"]) and r["profile"] == "balanced"
    env = gym.make(r["env_id"])
    _, info = env.reset(seed=r["seed"])
    assert info["scenario"] == r["scenario"]
    total = 0.0
    for a in r["actions"]:
        total += env.step(a)[1]
    assert total == r["return"]


def test_sb3_learn_records(tmp_path):
    from stable_baselines3 import PPO

    path = tmp_path / "rec.jsonl"
    env = kenv.RecordEpisodes(gym.make(ENV), path)
    PPO("MlpPolicy", env, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu").learn(128)
    recs = _records(path)
    assert len(recs) >= 2 and sum(r["length"] for r in recs) <= 128
    for r in recs:
        _check_replays(r)


def test_record_matches_run_episode(tmp_path):
    path = tmp_path / "rec.jsonl"
    env = kenv.RecordEpisodes(gym.make(ENV), path)
    ret, comps, _ = run_episode(env, StaticPolicy("s", 1), seed=5)
    (rec,) = _records(path)
    assert rec["seed"] == 5 and rec["return"] == ret and rec["actions"] == [1] * rec["length"]
    assert rec["components"] == {c: float(v) for c, v in comps.items()}
    assert np.isfinite(rec["return"])


@pytest.mark.parametrize("case", ["no_dir", "a_dir", "empty", "under_a_file"])
def test_a_path_that_cannot_be_written_is_refused_at_construction(tmp_path, case):
    """Was accepted, then raised from step() when the first episode ended (OSError)."""
    (tmp_path / "afile").write_text("x")
    path = {"no_dir": str(tmp_path / "nodir" / "r.jsonl"), "a_dir": str(tmp_path), "empty": "",
            "under_a_file": str(tmp_path / "afile" / "r.jsonl")}[case]
    with pytest.raises(ConfigError) as e:
        kenv.RecordEpisodes(gym.make(ENV), path)
    assert e.value.field == "path" and e.value.value == path
