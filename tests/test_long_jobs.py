"""A command whose flags ask for more than about an hour of work says so before it
starts, on stderr, and ``--json`` carries the estimate (#43 item 5)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kenv.agents.estimate import EPISODE_S, TRAIN_STEPS_PER_S

ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}


@pytest.mark.parametrize("argv, hours", [
    (["train", "--config", "ppo", "--env", "kenv/Kernel-v3", "--n-timesteps", "100000000"],
     1e8 / TRAIN_STEPS_PER_S["kenv/Kernel-v3"] / 3600),
    (["evaluate", "--env", "kenv/KernelPhased-v0", "--episodes", "1000000", "--policy", "patched"],
     1e6 * EPISODE_S["kenv/KernelPhased-v0"] / 3600),
    (["rediscover", "--envs", "kenv/HwrngWait-v2", "--seeds", "20", "--n-timesteps", "1024000"],
     20 * 1024000 / TRAIN_STEPS_PER_S["kenv/HwrngWait-v2"] / 3600),
])
def test_a_long_job_says_so_before_it_starts(argv, hours, tmp_path):
    p = subprocess.Popen([sys.executable, "-m", "kenv.cli", *argv, "--out", str(tmp_path / "o")]
                         if argv[0] != "evaluate" else [sys.executable, "-m", "kenv.cli", *argv],
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=ENV, cwd=tmp_path)
    try:
        for _ in range(3):   # (rediscover may first note whole rollouts)
            line = p.stderr.readline()
            if "ask for about" in line:
                break
    finally:
        p.kill()
        p.wait()
    assert f"kenv {argv[0]}: these flags ask for about" in line, line
    figure = float(line.split("about ")[1].split()[0])
    unit = line.split("about ")[1].split()[1]
    assert figure == pytest.approx(hours if unit == "hours" else hours / 24, rel=0.06), line


def test_json_carries_the_estimate_and_a_short_job_says_nothing():
    r = subprocess.run([sys.executable, "-m", "kenv.cli", "evaluate", "--env", "kenv/RandomMix-v2", "--episodes", "3",
                        "--json"], capture_output=True, text=True, env=ENV, timeout=120)
    assert r.returncode == 0 and "ask for about" not in r.stderr
    est = json.loads(r.stdout)["estimate_s"]
    assert 0 < est < 1
