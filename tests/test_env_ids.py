"""Env ids that mean one thing each (issue #39 item 1).

A recommended id (kenv.envs.registration.ENV_IDS) is the highest version of its
name, so ``gym.make`` of it does not warn; a variant has a name of its own.  The
ids of before the renaming (RENAMED) still build, with the same dynamics as the id
that replaces them, and warn naming it; kenv's commands take them as that id."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.envs.registration import parse_env_id

import kenv
from kenv.agents.estimate import episodes_s, train_s
from kenv.envs.registration import CONTROL_IDS, ENV_IDS, RENAMED, canonical_id, check_env_id, flat_id
from kenv.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent


def _make_quietly(env_id: str) -> list[str]:
    """The warnings ``gym.make(env_id)`` and a reset and step of it give (all of them:
    Gymnasium's "once" filters reset for the call)."""
    with warnings.catch_warnings(record=True) as w:
        warnings.resetwarnings()
        warnings.simplefilter("always")
        env = gym.make(env_id)
        env.reset(seed=0)
        env.step(env.action_space.sample())
        env.close()
    return [str(x.message) for x in w]


def test_the_table():
    """Every old id maps to a recommended one, none twice; no id is both; the controls stay."""
    assert set(RENAMED.values()) <= set(ENV_IDS)
    assert len(set(RENAMED.values())) == len(RENAMED)
    assert not set(RENAMED) & set(ENV_IDS)
    assert set(CONTROL_IDS) <= set(ENV_IDS) and not set(CONTROL_IDS) & set(RENAMED.values())
    # each recommended id is the highest registered version of its name (what gym.make checks)
    for env_id in ENV_IDS:
        ns, name, version = parse_env_id(env_id)
        assert version == max(parse_env_id(i)[2] for i in gym.registry if parse_env_id(i)[:2] == (ns, name))


@pytest.mark.parametrize("env_id", [*ENV_IDS, *(flat_id(i) for i in ENV_IDS)])
def test_recommended_ids_do_not_warn(env_id):
    with warnings.catch_warnings():
        warnings.resetwarnings()
        warnings.simplefilter("error")   # (Gymnasium's logger warns through warnings)
        env = gym.make(env_id)
        env.reset(seed=0)
        env.step(env.action_space.sample())
        env.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_recommended_ids_pass_both_checkers_without_a_warning(env_id):
    from gymnasium.utils.env_checker import check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    with warnings.catch_warnings():
        warnings.resetwarnings()
        warnings.simplefilter("error")
        check_env(gym.make(env_id).unwrapped, skip_render_check=False)
        sb3_check_env(gym.make(env_id).unwrapped, warn=True)


@pytest.mark.parametrize("old", RENAMED)
def test_an_old_id_builds_and_warns_naming_its_new_id(old):
    new = RENAMED[old]
    got = _make_quietly(old)
    if parse_env_id(old)[:2] == parse_env_id(new)[:2]:
        # a higher version of the same name: Gymnasium's notice names it
        assert any(f"{old} is out of date" in m and f"`v{parse_env_id(new)[2]}`" in m for m in got), got
    else:
        # Gymnasium's notice names the base task; kenv's names the variant's own id
        assert any(f"{old} is now {new} (same dynamics)" in m for m in got), got
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        env, twin = gym.make(old), gym.make(new)
    assert env.spec.id == old and type(env.unwrapped) is type(twin.unwrapped)
    assert env.unwrapped.version is twin.unwrapped.version


def test_old_ids_have_the_dynamics_of_their_new_ids():
    """benchmarks/fingerprint.py (every id, then every old one) exits 0 only when each old
    id's fingerprint is its new id's; the published figures of the old ids come out too."""
    out = subprocess.run([sys.executable, "benchmarks/fingerprint.py", "--steps", "300"], cwd=ROOT,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    got = dict(line.split() for line in out.stdout.splitlines() if line.strip())
    assert set(got) == set(ENV_IDS) | set(RENAMED)
    for old, new in RENAMED.items():
        assert got[old] == got[new], (old, new)


def test_lookups_take_an_old_id_as_its_new_one():
    for old, new in RENAMED.items():
        assert canonical_id(old) == new == check_env_id(old)
        assert train_s(old, 1000) == train_s(new, 1000) and episodes_s(old, 3) == episodes_s(new, 3)
        if new not in CONTROL_IDS:
            assert kenv.normalized_score(old, [1.0, 2.0]) == kenv.normalized_score(new, [1.0, 2.0])
    with pytest.raises(ConfigError, match="kenv/Nope-v0"):
        check_env_id("kenv/Nope-v0")


def _kenv(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kenv.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)


def _kenv_json(*args: str) -> dict:
    """``kenv *args --json``'s document, after checking it succeeded without Gymnasium's notice."""
    out = _kenv(*args, "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "out of date" not in out.stderr and " is now " not in out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("setup, shown", [
    ("import kenv.agents", True),                                # a library import leaves the user's filters alone
    ("from kenv.agents import jobs; jobs._init_worker()", False),  # a command's worker process hides it
])
def test_gymnasiums_notice_on_an_old_id_is_hidden_by_commands_not_by_imports(setup, shown):
    code = f"{setup}\nimport gymnasium as gym\ngym.make('kenv/Kernel-v0').close()"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert ("kenv/Kernel-v0 is out of date" in out.stderr) is shown, out.stderr


def test_evaluate_takes_an_old_id():
    doc = _kenv_json("evaluate", "--env", "kenv/Raid6Bench-v2", "--policy", "patched", "--episodes", "1")
    assert doc["env"] == "kenv/Raid6BenchPhased-v0"


def test_train_takes_an_old_id_and_finds_the_new_block(tmp_path):
    """The shipped ppo.yaml has a block for kenv/HwrngWait-v2 only; --env kenv/HwrngWait-v0 trains it."""
    doc = _kenv_json("train", "--config", "ppo", "--env", "kenv/HwrngWait-v0", "--n-timesteps", "64",
                     "--eval-freq", "100000", "--out", str(tmp_path / "run"), "--no-progress")
    assert doc["env_id"] == "kenv/HwrngWait-v2"


def test_a_users_config_keyed_by_an_old_id_serves_the_old_and_the_new_id(tmp_path):
    """A config written before the renaming (its block keyed kenv/HwrngWait-v0) still trains
    --env kenv/HwrngWait-v0, and serves --env kenv/HwrngWait-v2 too."""
    from kenv.agents.config import load_train_config

    cfg = tmp_path / "ppo.yaml"
    cfg.write_text("kenv/HwrngWait-v0:\n  n_envs: 2\n  n_timesteps: 128\n  policy: MlpPolicy\n  n_steps: 32\n")
    for asked in ("kenv/HwrngWait-v0", "kenv/HwrngWait-v2", None):
        got = load_train_config(cfg, asked)
        assert (got.env_id, got.n_envs) == ("kenv/HwrngWait-v2", 2)


def test_a_users_config_whose_env_kwargs_make_another_version_is_refused(tmp_path):
    """A config of before the renaming that made the balanced task by keywords (block
    kenv/Raid6Bench-v0, env_kwargs load_balance: true) trained Raid6BenchBalanced-v0's
    dynamics under the id kenv/Raid6Bench-v3: now a one-line error naming the id to use,
    and no run directory."""
    cfg = tmp_path / "ppo.yaml"
    cfg.write_text("kenv/Raid6Bench-v0:\n  n_envs: 2\n  n_timesteps: 128\n  policy: MlpPolicy\n"
                   "  n_steps: 32\n  env_kwargs:\n    load_balance: true\n")
    out = _kenv("train", "--config", str(cfg), "--algo", "ppo", "--out", str(tmp_path / "run"), "--no-progress")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "load_balance: got True" in out.stderr and "kenv/Raid6BenchBalanced-v0" in out.stderr
    assert not (tmp_path / "run").exists()


def test_a_record_made_with_an_old_id_still_validates(tmp_path):
    """An episode record of before the renaming (env_id kenv/Raid6Bench-v2) replays exactly."""
    path = tmp_path / "rec.jsonl"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        env = kenv.RecordEpisodes(gym.make("kenv/Raid6Bench-v2"), str(path))
    env.action_space.seed(0)
    env.reset(seed=1)
    while not any(env.step(env.action_space.sample())[2:4]):
        pass
    env.close()
    assert json.loads(path.read_text())["env_id"] == "kenv/Raid6Bench-v2"
    out = _kenv("validate", str(path))
    assert out.returncode == 0 and "1 of 1 records valid" in out.stdout, out.stdout + out.stderr
    assert not out.stderr
