"""Nothing kenv writes follows a planted link (#43 item 1).

Each writing command runs once into a folder; then, for every path it wrote, a fresh
copy of that folder gets a symbolic link at that path (to a file outside, with known
contents) and the command runs again on it, as a user rerunning or resuming would.
The command must refuse with exit 2 and one line naming the path, and the file the
link points to must be unchanged.  On the code before this change most of these
reruns exited 0 (a link at ``monitor/0.monitor.csv`` had the resumed run append to
the file it pointed to)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from kenv.cli import main

CONTENT = "the user's own file\n"

COMMANDS = {
    "train": ["train", "--config", "ppo", "--env", "kenv/RandomMix-v2", "--n-timesteps", "256", "--no-progress",
              "--out", "OUT"],
    "rediscover": ["rediscover", "--envs", "kenv/HwrngWait-v2", "--seeds", "1", "--n-timesteps", "512",
                   "--no-plots", "--out", "OUT"],
    "discover": ["discover", "--env", "kenv/HwrngWait-v2", "--profile", "balanced", "--steps", "64", "--seeds", "2",
                 "--out", "OUT"],
}
#: what the rerun adds so that it writes again (train refuses a used folder without it)
RERUN = {"train": ["--resume"], "rediscover": [], "discover": []}


def _argv(command: str, out: str) -> list[str]:
    return [out if a == "OUT" else a for a in COMMANDS[command]] + RERUN[command]


def _written(root: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


@pytest.fixture(scope="module", params=sorted(COMMANDS))
def done(request, tmp_path_factory):
    """(command, a folder the command has written)."""
    out = str(tmp_path_factory.mktemp(request.param) / "out")
    argv = [out if a == "OUT" else a for a in COMMANDS[request.param]]
    assert main(argv) in (0, None)
    return request.param, out


def test_a_link_at_any_written_path_is_refused_not_followed(done, tmp_path, capsys):
    command, out = done
    paths = _written(out)
    assert len(paths) >= 10, paths
    target = tmp_path / "target.txt"
    for rel in paths:
        run = tmp_path / "run"
        shutil.rmtree(run, ignore_errors=True)
        shutil.copytree(out, run, symlinks=True)
        target.write_text(CONTENT)
        os.unlink(run / rel)
        os.symlink(target, run / rel)
        capsys.readouterr()
        with pytest.raises(SystemExit) as e:
            main(_argv(command, str(run)))
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1, (rel, err)
        assert rel.split(os.sep)[-1] in err[0] and "symbolic link" in err[0], (rel, err)
        assert target.read_text() == CONTENT and os.path.islink(run / rel), rel


def test_through_the_real_process(done, tmp_path):
    """One rerun per command in its own process: exit 2, one line, no traceback, and a
    FIFO planted at a path is refused the same way (never opened: it would block)."""
    command, out = done
    run = tmp_path / "run"
    shutil.copytree(out, run, symlinks=True)
    rel = _written(out)[-1]
    os.unlink(run / rel)
    os.mkfifo(run / rel)
    r = subprocess.run([sys.executable, "-m", "kenv.cli", *_argv(command, str(run))], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "a FIFO" in r.stderr and "Traceback" not in r.stderr


def test_trace_out_that_is_a_link_is_refused(tmp_path, capsys):
    target = tmp_path / "target.txt"
    target.write_text(CONTENT)
    (tmp_path / "t.json").symlink_to(target)
    for argv in (["trace", "env", "--env", "kenv/RandomMix-v2", "--policy", "patched", "--steps", "2"],
                 ["trace", "experiment", "hwrng-dd", "--bytes", "100"]):
        with pytest.raises(SystemExit) as e:
            main(argv + ["--out", str(tmp_path / "t.json")])
        [line] = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and "symbolic link" in line and "t.json" in line, line
    assert target.read_text() == CONTENT and os.path.islink(tmp_path / "t.json")


def test_evaluate_record_that_is_a_link_is_refused(tmp_path, capsys):
    target = tmp_path / "target.txt"
    target.write_text(CONTENT)
    (tmp_path / "r.jsonl").symlink_to(target)
    with pytest.raises(SystemExit) as e:
        main(["evaluate", "--env", "kenv/HwrngWait-v2", "--policy", "original", "--episodes", "1",
              "--record", str(tmp_path / "r.jsonl")])
    [line] = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and "symbolic link" in line and "r.jsonl" in line, line
    assert target.read_text() == CONTENT and os.path.islink(tmp_path / "r.jsonl")
    assert sorted(os.listdir(tmp_path)) == ["r.jsonl", "target.txt"]   # no temporary file left


def test_record_episodes_does_not_append_through_a_link(tmp_path):
    import gymnasium as gym

    import kenv
    from kenv.errors import ConfigError

    target = tmp_path / "target.txt"
    target.write_text(CONTENT)
    env = kenv.RecordEpisodes(gym.make("kenv/HwrngWait-v2"), str(tmp_path / "r.jsonl"))
    (tmp_path / "r.jsonl").symlink_to(target)   # planted after the wrapper checked the path
    with pytest.raises(ConfigError, match="symbolic link"):   # (a link there already: refused at once)
        kenv.RecordEpisodes(gym.make("kenv/HwrngWait-v2"), str(tmp_path / "r.jsonl"))
    env.reset(seed=0)
    with pytest.raises(ConfigError, match="symbolic link"):
        done = False
        while not done:
            _, _, term, trunc, _ = env.step(0)
            done = term or trunc
    assert target.read_text() == CONTENT
