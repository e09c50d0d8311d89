"""kenv evaluate --model, kenv --version, and what kenv evaluate's and kenv bench's
text output says about its figures (issue 27)."""

from __future__ import annotations

import json
import shutil
import zipfile

import gymnasium as gym
import pytest

import kenv
from kenv.cli import main
from kenv.errors import ConfigError


def _save_model(path, env_id: str, **env_kwargs) -> str:
    """An (untrained) SB3 PPO model for ``env_id`` saved at ``path``: what kenv
    evaluate checks does not depend on training."""
    from stable_baselines3 import PPO

    env = gym.make(env_id, **env_kwargs)
    PPO("MlpPolicy", env, n_steps=16, batch_size=16, seed=0, device="cpu").save(str(path))
    env.close()
    return str(path)


def test_evaluate_scores_a_model_beside_the_baselines(tmp_path, capsys):
    model = _save_model(tmp_path / "m.zip", "kenv/Raid6Bench-v3")
    assert main(["evaluate", "--env", "kenv/Raid6Bench-v3", "--policy", "patched", "--episodes", "3",
                 "--model", model, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {p["name"]: p for p in out["policies"]}
    assert set(rows) == {"patched", "model"}
    assert len(rows["model"]["components"]) == 6 and rows["model"]["return_mean"] > 0
    # the text says what the ± is and has the model's row
    assert main(["evaluate", "--env", "kenv/Raid6Bench-v3", "--policy", "patched", "--episodes", "3",
                 "--model", model]) == 0
    text = capsys.readouterr().out
    assert "return (mean ± 95% CI)" in text and "95% confidence interval" in text
    assert any(line.startswith("model ") for line in text.splitlines())


def test_policy_model_records_the_models_evaluation_episodes_alone(tmp_path, capsys):
    """kenv evaluate --record wrote every policy's episodes, and --policy took baselines only:
    a model's evaluation episodes could not be recorded alone for kenv validate --strict's row.
    --policy model plays the --model row alone; without --model it is a one-line error."""
    model = _save_model(tmp_path / "m.zip", "kenv/Raid6Bench-v3")
    rec = tmp_path / "r.jsonl"
    assert main(["evaluate", "--env", "kenv/Raid6Bench-v3", "--policy", "model", "--episodes", "10", "--model", model,
                 "--record", str(rec), "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["policies"]
    assert row["name"] == "model"
    assert main(["validate", "--strict", "--json", str(rec)]) == 0
    [bench] = json.loads(capsys.readouterr().out)["rows"]
    assert bench["complete"] and bench["return_mean"] == pytest.approx(row["return_mean"], rel=1e-12)
    with pytest.raises(SystemExit) as e:
        main(["evaluate", "--env", "kenv/Raid6Bench-v3", "--policy", "model", "--episodes", "1"])
    assert e.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "policy: got 'model'" in line and "model needs --model PATH" in line, line


def test_a_policy_named_twice_is_played_once(tmp_path):
    """evaluate(policies=[...]) with a name twice: 'model' twice was refused as a baseline
    ('policy: got 'model'; allowed: original, ...' although model is allowed), and a baseline
    twice was two rows, its episodes recorded twice (a records file --strict fails)."""
    from kenv.agents.evaluate import evaluate

    model = _save_model(tmp_path / "m.zip", "kenv/Raid6Bench-v3")
    r = evaluate("kenv/Raid6Bench-v3", ["model", "random", "model", "random"], episodes=1, model=model)
    assert sorted(p.name for p in r.policies) == ["model", "random"]


def test_a_model_is_played_on_the_same_seeded_episodes_as_the_baselines(tmp_path, monkeypatch):
    """The model row of a model that always plays the patched action equals the
    patched baseline's row: the same seeded episodes."""
    from kenv.agents import evaluate as ev

    model = _save_model(tmp_path / "m.zip", "kenv/Raid6Bench-v3")

    class Always:
        def __init__(self, action):
            self.action = action

        def predict(self, obs, deterministic=True):
            return self.action, None

    real = ev.model_policy

    def patched_model(path, env, trust=False):
        pol = real(path, env, trust)
        pol.model = Always(env.unwrapped.action_for(env.unwrapped.PATCHED))
        return pol

    monkeypatch.setattr(ev, "model_policy", patched_model)
    res = ev.evaluate("kenv/Raid6Bench-v3", "patched", episodes=3, model=model)
    rows = {p.name: p for p in res.policies}
    assert rows["model"].returns == rows["patched"].returns


@pytest.mark.parametrize("case", ["missing", "not a zip", "zip not SB3", "other env", "other action set"])
def test_a_bad_model_is_a_one_line_error_naming_the_flag(tmp_path, capsys, case):
    if case == "missing":
        path = str(tmp_path / "nope.zip")
    elif case == "not a zip":
        path = str(tmp_path / "model.zip")
        (tmp_path / "model.zip").write_text("not a model")
    elif case == "zip not SB3":
        path = str(tmp_path / "other.zip")
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("readme.txt", "hello")
    elif case == "other env":
        path = _save_model(tmp_path / "hwrng.zip", "kenv/HwrngWait-v2")
    else:
        path = _save_model(tmp_path / "wide.zip", "kenv/Raid6Bench-v3",
                           actions=["preempt_disable", "migrate_disable", "cond_resched"])
    with pytest.raises(SystemExit) as e:
        main(["evaluate", "--env", "kenv/Raid6Bench-v3", "--episodes", "2", "--model", path])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kenv evaluate: error: --model: got ") and "allowed" in err
    if case in ("other env", "other action set"):
        assert "Raid6Bench-v3" in err and "Box(15,)" in err


def test_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out == f"kenv {version('kenv-gym')}" and version("kenv-gym") == kenv.__version__


def test_bench_says_what_its_ratio_is_and_json_has_the_plain_ratio(capsys, monkeypatch):
    """The text names the ratio (a median of per-chunk ratios); --json keeps
    ratio_to_cartpole and adds rate_ratio_to_cartpole = steps_per_s / cartpole_steps_per_s."""
    from kenv.envs import bench

    rates = iter([100.0, 10.0, 100.0, 30.0, 400.0, 10.0])     # CartPole, env, ...

    def chunk(self, steps):
        return next(rates), 0.001 if self.env.spec.id != "CartPole-v1" else 0.0

    monkeypatch.setattr(bench._Stepper, "chunk", chunk)
    monkeypatch.setattr(bench, "steps_per_second", lambda *a, **k: (1.0, 0.0))
    res = bench.run_bench(steps=6, env_ids=["kenv/Raid6Bench-v3"], rounds=3, warmup=0)
    (e,) = res.to_dict()["envs"]
    assert e["ratio_to_cartpole"] == 0.1                  # median of 0.1, 0.3, 0.025
    assert e["rate_ratio_to_cartpole"] == 0.1             # 10 / 100: here the two agree ...
    rates = iter([100.0, 10.0, 100.0, 30.0, 400.0, 30.0])
    res = bench.run_bench(steps=6, env_ids=["kenv/Raid6Bench-v3"], rounds=3, warmup=0)
    (e,) = res.to_dict()["envs"]
    assert e["ratio_to_cartpole"] == 0.1                  # median of 0.1, 0.3, 0.075
    assert e["rate_ratio_to_cartpole"] == 0.3             # ... here not: median 30 / median 100
    text = res.format_text()
    assert "median" in text and "rate_ratio_to_cartpole" in text


def test_a_run_model_is_refused_on_a_reordered_action_set(tmp_path, capsys):
    """A model's actions are indices into its training env's action set: on the same
    actions in another order (``--actions``) the spaces match and the model would play the
    opposite choices.  A kenv train run says its env (run.yaml): a model of it is refused
    where the action names differ, and plays where they are the same."""
    run = tmp_path / "run"
    assert main(["train", "--config", "ppo", "--env", "kenv/Raid6Bench-v3", "--n-timesteps", "512",
                 "--eval-freq", "512", "--out", str(run), "--no-progress"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(["evaluate", "--env", "kenv/Raid6Bench-v3", "--policy", "patched", "--episodes", "2",
              "--model", str(run), "--actions", "migrate_disable,preempt_disable"])
    [line] = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and line.startswith("kenv evaluate: error: --model: "), line
    assert ("this env's actions (migrate_disable, preempt_disable); "
            "it trained on preempt_disable, migrate_disable") in line
    assert main(["evaluate", "--env", "kenv/Raid6Bench-v3", "--policy", "patched", "--episodes", "2",
                 "--model", str(run), "--actions", "preempt_disable,migrate_disable"]) == 0
    # the model copied out of its run directory (no run.yaml beside it) says its actions itself
    bare = tmp_path / "elsewhere" / "model.zip"
    bare.parent.mkdir()
    shutil.copy(run / "model.zip", bare)
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(["evaluate", "--env", "kenv/Raid6Bench-v3", "--policy", "patched", "--episodes", "2",
              "--model", str(bare), "--actions", "migrate_disable,preempt_disable"])
    [line] = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and "it trained on preempt_disable, migrate_disable" in line, line
    assert main(["evaluate", "--env", "kenv/Raid6Bench-v3", "--policy", "patched", "--episodes", "2",
                 "--model", str(bare)]) == 0


def test_a_kernel_model_says_its_actions_per_decision(tmp_path):
    """A zip kenv saves carries its env's action names (agents/models.ACTIONS_ENTRY), one
    list per decision on kenv/Kernel-*; SB3 loads such a zip as any other."""
    from stable_baselines3 import PPO

    from kenv.agents.files import save_model_atomic
    from kenv.agents.models import read_action_names
    from kenv.agents.policy import load_model

    env = gym.make("kenv/Kernel-v3")
    model = PPO("MlpPolicy", env, n_steps=8, batch_size=8, seed=0)
    save_model_atomic(model, str(tmp_path / "m.zip"))
    assert read_action_names(str(tmp_path / "m.zip")) == [list(d) for d in env.unwrapped.actions]
    PPO.load(str(tmp_path / "m.zip"), device="cpu")
    load_model(str(tmp_path / "m.zip"), "ppo", env=env)
    reordered = gym.make("kenv/Kernel-v3", actions={"raid6": list(reversed(env.unwrapped.actions[2]))})
    with pytest.raises(ConfigError, match=r"it trained on \[.*\] \[.*\] \[preempt_disable, migrate_disable\]"):
        load_model(str(tmp_path / "m.zip"), "ppo", env=reordered)


RUN_YAMLS = {
    "another library's id": "env: CartPole-v1\nhyperparams: {env_kwargs: {bogus: 1}}\n",
    "another library's id, no kwargs": "env: CartPole-v1\nhyperparams: {env_kwargs: {}}\n",
    "a time limit of another type": "env: kenv/Raid6Bench-v3\nhyperparams: {env_kwargs: {max_episode_steps: x}}\n",
    "a render mode of another type": "env: kenv/Raid6Bench-v3\nhyperparams: {env_kwargs: {render_mode: 5}}\n",
    "hyperparams not a mapping": "env: kenv/Raid6Bench-v3\nhyperparams: 5\n",
}


@pytest.mark.parametrize("name", sorted(RUN_YAMLS))
def test_a_foreign_run_yaml_beside_a_model_is_one_line_not_a_traceback(tmp_path, capsys, name):
    """run.yaml comes with the model (a run folder from elsewhere): an env it names that is
    not kenv's, or kwargs Gymnasium's make refuses, was a TypeError or AttributeError
    traceback from ``kenv evaluate --model DIR``.  With --env the model is checked by its
    spaces alone and plays; without an env (the Python API) it is a ConfigError, unless
    run.yaml names a kenv id and no kwargs (hyperparams not a mapping: none given)."""
    from kenv.agents.policy import load_model
    from kenv.errors import ConfigError

    run = tmp_path / "run"
    run.mkdir()
    _save_model(run / "model.zip", "kenv/Raid6Bench-v3")
    (run / "run.yaml").write_text(RUN_YAMLS[name])
    assert main(["evaluate", "--env", "kenv/Raid6Bench-v3", "--policy", "patched", "--episodes", "1",
                 "--model", str(run), "--json"]) == 0
    rows = {p["name"] for p in json.loads(capsys.readouterr().out)["policies"]}
    assert rows == {"patched", "model"}
    if name == "hyperparams not a mapping":
        assert load_model(str(run)).observation_space.shape == gym.make("kenv/Raid6Bench-v3").observation_space.shape
        return
    with pytest.raises(ConfigError) as e:
        load_model(str(run))
    assert e.value.field == "--model" and "run.yaml" in str(e.value), str(e.value)
