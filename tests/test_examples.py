"""The examples in examples/ run, briefly, against the real RL libraries.

The CleanRL-style PPO needs only torch and gymnasium (kenv's own dependencies), so it always
runs. RLlib, TorchRL and Tianshou are optional extras (``pip install -e '.[rllib]'`` ...):
each test is skipped when its library is not installed.
"""

from __future__ import annotations

import importlib
import math
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load_example(name: str, monkeypatch):
    """Import examples/<name>.py by its plain module name (examples/ on sys.path), as a
    worker process spawned by a library imports it."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return importlib.import_module(name)


def test_cleanrl_ppo_learns_on_hwrng_wait(monkeypatch):
    ex = load_example("cleanrl_ppo", monkeypatch)
    out = ex.main(["--total-timesteps", "3072", "--num-envs", "4", "--num-steps", "64",
                   "--eval-episodes", "8"])
    assert out["iterations"] == 12 and out["global_step"] == 3072
    returns = [h["episode_return_mean"] for h in out["history"] if h["episodes"]]
    assert len(returns) == 12 and all(math.isfinite(r) for r in returns)
    # it learns: the last iterations' episodes beat the first ones', and the greedy policy
    # beats uniform random actions on the same seeded evaluation episodes
    assert sum(returns[-4:]) / 4 > sum(returns[:4]) / 4
    evals = out["eval"]
    assert evals["learned (greedy)"] > evals["random"] + 5.0
    assert all(math.isfinite(v) for v in evals.values())


def test_cleanrl_ppo_rejects_multidiscrete(monkeypatch):
    ex = load_example("cleanrl_ppo", monkeypatch)
    with pytest.raises(SystemExit, match="--env-id kenv/Kernel-v3"):
        ex.main(["--env-id", "kenv/Kernel-v3", "--total-timesteps", "64"])


@pytest.mark.slow
def test_rllib_ppo_two_runners_two_envs_each(monkeypatch):
    pytest.importorskip("ray.rllib")
    ex = load_example("rllib_ppo", monkeypatch)
    rows = ex.main(["--iterations", "2", "--env-runners", "2", "--envs-per-runner", "2",
                    "--train-batch-size", "256", "--minibatch-size", "64", "--epochs", "1"])
    assert [r["iteration"] for r in rows] == [1, 2]
    assert all(r["env_steps_sampled"] > 0 for r in rows)
    assert rows[1]["env_steps_sampled_lifetime"] == rows[0]["env_steps_sampled"] + rows[1]["env_steps_sampled"]
    assert rows[1]["env_steps_sampled_lifetime"] >= 512
    assert sum(r["episodes"] for r in rows) > 0
    assert math.isfinite(rows[-1]["episode_return_mean"])


@pytest.mark.slow
def test_torchrl_ppo_gymenv_num_envs(monkeypatch):
    pytest.importorskip("torchrl")
    ex = load_example("torchrl_ppo", monkeypatch)
    out = ex.main(["--num-envs", "2", "--frames-per-batch", "256", "--total-frames", "768",
                   "--epochs", "1", "--eval-episodes", "2"])
    assert out["iterations"] == 3 and out["frames"] == 768
    assert sum(h["episodes"] for h in out["history"]) > 0
    assert all(math.isfinite(h["episode_return_mean"]) for h in out["history"] if h["episodes"])
    assert all(math.isfinite(v) for v in out["eval"].values())


def test_torchrl_example_uses_the_packages_flat_twin(monkeypatch):
    # no adapter of its own: the example makes kenv's flat twin (kenv.FlatInfo; runs without torchrl)
    ex = load_example("torchrl_ppo", monkeypatch)
    source = (EXAMPLES / "torchrl_ppo.py").read_text()
    assert 'GymEnv(f"kenv:{flat_id(args.env_id)}"' in source and "gym.Wrapper" not in source
    assert ex.flat_id(ex.ENV_ID) == "kenv-flat/HwrngWait-v2"


@pytest.mark.slow
def test_tianshou_dqn(monkeypatch):
    pytest.importorskip("tianshou")
    ex = load_example("tianshou_dqn", monkeypatch)
    out = ex.main(["--epochs", "2", "--epoch-steps", "256", "--train-envs", "2", "--test-envs", "2",
                   "--test-episodes", "2", "--eval-episodes", "2", "--batch-size", "32"])
    assert out["train_step"] >= 512 and out["train_episode"] > 0 and out["update_step"] > 0
    assert [e["epoch"] for e in out["epochs"]][-2:] == [1, 2]
    assert math.isfinite(out["best_reward"])
    assert all(math.isfinite(v) for v in out["eval"].values())



def test_cleanrl_ppo_records_validate(monkeypatch, tmp_path):
    """A policy trained outside kenv records its evaluation with kenv.RecordEpisodes;
    kenv validate (the CLI) accepts the records."""
    import subprocess
    import sys

    ex = load_example("cleanrl_ppo", monkeypatch)
    path = tmp_path / "learned.jsonl"
    ex.main(["--total-timesteps", "512", "--num-envs", "2", "--num-steps", "64",
             "--eval-episodes", "3", "--record", str(path)])
    assert len(path.read_text().splitlines()) == 3
    p = subprocess.run([sys.executable, "-m", "kenv.cli", "validate", str(path)], capture_output=True, text=True)
    assert p.returncode == 0 and "3 of 3 records valid" in p.stdout, p.stdout + p.stderr
