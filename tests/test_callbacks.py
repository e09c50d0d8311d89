"""The training callbacks as classes (kenv.agents.callbacks), on a small PPO run.

SeededEvalCallback: evaluations at step 0, at each multiple of eval_freq and at the
end, each the deterministic policy's mean over the seeded episodes EVAL_SEED + i (the
last one recomputed here from the final model), the CSV equal to the history, the best
model saved.  AtomicCheckpointCallback: checkpoints only at rollout boundaries (the
first at or after each multiple of save_freq) and at the end, each complete (zip, state,
record).
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

import kenv  # noqa: F401  (registers the ids)
from kenv.agents.baselines import run_episode
from kenv.agents.callbacks import AtomicCheckpointCallback, SeededEvalCallback
from kenv.agents.checkpoints import list_checkpoints, read_evaluations
from kenv.agents.config import TrainConfig, make_env, make_train_vec_env
from kenv.agents.policy import EVAL_SEED, ModelPolicy
from kenv.agents.train import build_model, configure_torch

ENV = "kenv/Raid6Bench-v3"
N_STEPS = 32  # one rollout: n_envs x n_steps env steps


def _model(n_envs: int = 2):
    configure_torch()
    cfg = TrainConfig(ENV, "ppo", "test", n_timesteps=4 * n_envs * N_STEPS, n_envs=n_envs, policy="MlpPolicy",
                      hyperparams={"n_steps": N_STEPS, "batch_size": 32, "n_epochs": 1})
    return cfg, build_model(cfg, make_train_vec_env(cfg, 0, None, append=False), seed=0)


def test_seeded_eval_callback_evaluates_on_its_schedule_on_the_seeded_episodes(tmp_path):
    cfg, model = _model()
    history: list[dict] = []
    cb = SeededEvalCallback(cfg, str(tmp_path), eval_freq=100, episodes=3, history=history, best=-np.inf)
    model.learn(total_timesteps=cfg.n_timesteps, callback=cb)
    steps = [h["timesteps"] for h in history]
    # at the start, at the first step at or after 100, 200 (steps advance by n_envs = 2), at the end
    assert steps == [0, 100, 200, 256]
    assert read_evaluations(str(tmp_path)) == history  # floats written as repr: exact
    env = make_env(cfg)
    rets = [run_episode(env, ModelPolicy(model), EVAL_SEED + i)[0] for i in range(3)]
    env.close()
    assert history[-1]["mean_return"] == pytest.approx(float(np.mean(rets)))
    assert history[-1]["min"] <= history[-1]["mean_return"] <= history[-1]["max"]
    assert cb.best == max(h["mean_return"] for h in history)
    assert os.path.isfile(tmp_path / "best_model.zip")


def test_seeded_eval_callback_resumes_its_schedule_from_the_history(tmp_path):
    cfg, _ = _model()
    cb = SeededEvalCallback(cfg, str(tmp_path), eval_freq=100, episodes=2,
                            history=[{"timesteps": 0}, {"timesteps": 128}], best=1.0)
    assert cb._next == 200  # the next multiple of eval_freq after the last evaluation
    cb.env.close()


def test_atomic_checkpoints_only_at_rollout_boundaries_and_at_the_end(tmp_path):
    cfg, model = _model()
    ckpt = tmp_path / "checkpoints"
    cb = AtomicCheckpointCallback(str(ckpt), save_freq=100, wall_offset=5.0, t_start=time.perf_counter())
    model.learn(total_timesteps=cfg.n_timesteps, callback=cb)
    rollout = cfg.n_envs * N_STEPS  # 64
    got = sorted(n for n, _ in list_checkpoints(str(ckpt)))
    # rollouts start at 0, 64, 128, 192: the first at or after 100 and 200 is 128 and 256 (the end)
    assert got == [128, 256]
    assert all(n % rollout == 0 for n in got)
    for n in got:
        assert os.path.isfile(ckpt / f"state_{n}_steps.pkl")
        rec = json.loads((ckpt / f"model_{n}_steps.json").read_text())
        assert rec["steps"] == n and rec["wall_s"] >= 5.0
    assert not [f for f in os.listdir(ckpt) if f.startswith(".kenv-tmp-")]
