"""Adding a wait kind to the hwrng driver touches no fast-forward file (issue #44).

tests/data/wait_kind_msleep_interruptible.diff adds ``msleep_interruptible(MS)`` --
``schedule_timeout_interruptible(msecs_to_jiffies(MS) + 1)``: a timer-wheel sleep that,
unlike hwrng_msleep(), is not on ``rng->dying`` -- to kenv/drivers/hwrng.py only,
declaring it in WAIT_KIND.  This test applies it to a copy of the package and checks
that the fast-forward skips the new wait's polls and keeps the detailed simulation's
trajectory, including when the env switches the wait mid-sleep (set_wait completes
rng->dying, which must not cut this sleep short).  Before the fast-forward read the
declared ``cancellable`` (it took every timer-wheel sleep as one on rng->dying), the
trajectories differed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATCH = ROOT / "tests" / "data" / "wait_kind_msleep_interruptible.diff"

RUN = r'''
import gymnasium as gym, numpy as np, kenv
acts = ["msleep_interruptible(20)", "cpu_relax", "hwrng_yield", "msleep_interruptible(1)"]
out = {}
for ff in (True, False):
    env = gym.make("kenv/HwrngWait-v2", actions=acts, fast_forward=ff)
    traj = []
    for seed in range(6):
        obs, info = env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        done = False
        while not done:
            obs, r, term, trunc, info = env.step(int(rng.integers(len(acts))))
            traj.append((obs.tobytes(), r))
            done = term or trunc
    out[ff] = traj
print("same" if out[True] == out[False] else "differ", len(out[True]))
'''


def test_a_wait_kind_added_in_the_driver_alone_keeps_the_fast_forward_exact(tmp_path):
    shutil.copytree(ROOT / "kenv", tmp_path / "kenv", ignore=shutil.ignore_patterns("__pycache__"))
    applied = subprocess.run(["git", "apply", str(PATCH)], cwd=tmp_path, capture_output=True,
                             text=True)
    assert applied.returncode == 0, applied.stderr
    touched = subprocess.run(["git", "apply", "--numstat", str(PATCH)], cwd=tmp_path, capture_output=True,
                             text=True).stdout.split()[2::3]
    assert touched == ["kenv/drivers/hwrng.py"]
    got = subprocess.run([sys.executable, "-c", RUN], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                         env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stdout.split()[-2:] == ["same", "288"]
