"""The controls of ``kenv discover`` (issue #40 item 2; docs/discover.md, Controls).

By construction, on the positive control (configs/scenarios/hwrng-control.yaml,
``throughput`` profile) the best wait flips with the observed row "reader has had no
byte yet": a sleeping wait while the generator is silent (cpu_relax() there stalls RCU
on the non-preemptible kernel), cpu_relax once words arrive.  On the negative control
(hwrng-null-control.yaml: no silent phase) cpu_relax is best in every step.  Both are
measured here on paired episodes (every wait plays the same seeds).
"""

import json
import os
import subprocess
import sys
from collections import defaultdict

import gymnasium as gym
import numpy as np
import pytest

import kenv  # noqa: F401  (registers the envs)

WAITS = ("cpu_relax", "hwrng_msleep(1000)", "hwrng_yield")
SILENT_ROW = 8   # "reader has had no byte yet" (HwrngWait-v2's observation table)


def per_phase_best(scenario: str, seeds: int = 6) -> dict:
    """Per phase (``silent``/``running``, as the observation shows it): the wait with
    the best mean step reward under the throughput profile."""
    env = gym.make("kenv/HwrngWait-v2", scenario=scenario, profile="throughput")
    rewards: dict = defaultdict(list)
    for a, wait in enumerate(WAITS):
        for s in range(seeds):
            obs, _ = env.reset(seed=100 + s)
            done = False
            while not done:
                phase = "silent" if obs[SILENT_ROW] > 0.5 else "running"
                obs, r, term, trunc, _ = env.step(a)
                rewards[phase, wait].append(r)
                done = term or trunc
    phases = {p for p, _ in rewards}
    return {p: max(WAITS, key=lambda w: np.mean(rewards[p, w])) for p in phases}


def test_positive_control_best_wait_depends_on_the_observed_phase():
    best = per_phase_best("hwrng-control")
    assert best["running"] == "cpu_relax"
    assert best["silent"] in ("hwrng_msleep(1000)", "hwrng_yield")


@pytest.mark.parametrize("phase", ["silent", "running"])
def test_negative_control_one_wait_is_best_in_every_phase(phase):
    best = per_phase_best("hwrng-null-control")
    assert best.get(phase, "cpu_relax") == "cpu_relax"


def test_discover_finds_the_positive_control_and_not_the_negative(tmp_path):
    """``kenv discover`` with the default budget, as a user runs it: the learned policy
    beats the best static one on the positive control, not on the negative one (training
    seeds 0, 1, 2 measured: docs/discover.md, Controls)."""
    pytest.importorskip("sklearn")
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    procs = {e: subprocess.Popen([sys.executable, "-m", "kenv.cli", "discover", "--env", e, "--profile", "throughput",
                                  "--actions", "default", "--workers", "1", "--no-plots",
                                  "--out", str(tmp_path / e.split("/")[1]), "--json"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
             for e in ("kenv/HwrngWaitControl-v0", "kenv/HwrngWaitNullControl-v0")}
    found = {}
    for e, p in procs.items():
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0, e
        (prof,) = json.loads(out)["profiles"]
        found[e] = prof["beats_best_static"]
    assert found == {"kenv/HwrngWaitControl-v0": True, "kenv/HwrngWaitNullControl-v0": False}
