"""Every YAML file kenv reads is bounded while it is composed (#43 item 3): an alias
bomb of a few hundred bytes, nesting hundreds deep or an alias inside its own anchor is
refused in well under a second with one short line naming the file and the limit, for
each kind of file (reward profile, scenario mix, training config, a run's run.yaml)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import gymnasium as gym
import pytest

import kenv  # noqa: F401  (registers the ids)
from kenv.envs.config import MAX_YAML_DEPTH, MAX_YAML_NODES, parse_yaml
from kenv.errors import ConfigError

#: nine anchors of nine aliases each: 9**9 (387 million) strings once expanded
BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f'{c}: &{c} [{",".join(["*" + p] * 9)}]\n' for p, c in zip("abcdefgh", "bcdefghi"))
#: the same bomb inside a mapping each kind of file reads, so the top level is valid
FILES = {
    "profile": "weights: {entropy: 1}\nx:\n  " + BOMB.replace("\n", "\n  "),
    "scenario": "mix:\n  preempt: {full: 1}\nx:\n  " + BOMB.replace("\n", "\n  "),
    "config": "kenv/RandomMix-v2:\n  n_timesteps: 64\n  x:\n    " + BOMB.replace("\n", "\n    "),
}
DEEP = "[" * 500 + "]" * 500
RECURSIVE = "a: &a [1, *a]\n"


def _one_line_about(msg: str, path: str, what: str) -> None:
    assert "\n" not in msg.strip() and len(msg) < 400, msg
    assert path in msg and what in msg, msg


@pytest.mark.parametrize("text, what", [(BOMB, f"{MAX_YAML_NODES:,} nodes"),
                                        (DEEP, f"{MAX_YAML_DEPTH} levels"),
                                        (RECURSIVE, "recursive")])
def test_parse_yaml_refuses_at_once(text, what):
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as e:
        parse_yaml(text, "f.yaml")
    assert time.perf_counter() - t0 < 1.0
    _one_line_about(str(e.value), "f.yaml", what)


def test_merge_keys_and_shared_anchors_within_the_limit_still_load():
    assert parse_yaml("b: &b {x: 1}\nc:\n  <<: *b\n  y: 2\nd: [*b, *b]\n", "f.yaml") == {
        "b": {"x": 1}, "c": {"x": 1, "y": 2}, "d": [{"x": 1}, {"x": 1}]}


@pytest.mark.parametrize("kind", ["profile", "scenario"])
def test_gym_make_refuses_a_bomb(tmp_path, kind):
    p = tmp_path / f"{kind}.yaml"
    p.write_text(FILES[kind])
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as e:
        gym.make("kenv/Raid6BenchPhased-v0", **{kind: str(p)})
    assert time.perf_counter() - t0 < 1.0
    _one_line_about(str(e.value), str(p), f"{MAX_YAML_NODES:,} nodes")


def _kenv(*argv, cwd):
    return subprocess.run([sys.executable, "-m", "kenv.cli", *argv], capture_output=True, text=True,
                          timeout=60, cwd=cwd, env={**os.environ, "PYTHONWARNINGS": "ignore"})


def test_kenv_train_refuses_a_bomb_config(tmp_path):
    (tmp_path / "bomb.yaml").write_text(FILES["config"])
    r = _kenv("train", "--config", "bomb.yaml", "--out", "run", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    _one_line_about(r.stderr, "bomb.yaml", f"{MAX_YAML_NODES:,} nodes")
    assert not (tmp_path / "run").exists()


def test_kenv_train_resume_refuses_a_bomb_run_yaml(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.yaml").write_text(BOMB)
    r = _kenv("train", "--config", "ppo", "--env", "kenv/RandomMix-v2", "--out", "run", "--resume",
              "--n-timesteps", "64", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    _one_line_about(r.stderr, "run.yaml", f"{MAX_YAML_NODES:,} nodes")


def test_kenv_evaluate_ignores_a_bomb_run_yaml_beside_a_model(tmp_path):
    """``--model`` reads run.yaml beside the model only for the algorithm's name; a
    bomb there must not hang it (it is read as absent, and --algo is asked for)."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.yaml").write_text(BOMB)
    (tmp_path / "run" / "model.zip").write_bytes(b"PK\x05\x06" + b"\0" * 18)
    r = _kenv("evaluate", "--env", "kenv/RandomMix-v2", "--model", "run/model.zip", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
