"""Normalised scores (kenv.envs.scores): the ends of the scale re-measured exactly, per id."""

import json
import subprocess
import sys

import numpy as np
import pytest

import kenv
from kenv.agents.evaluate import evaluate
from kenv.envs.registration import BENCHMARK_IDS as ENV_IDS
from kenv.errors import ConfigError
from kenv.envs.scores import EVAL_EPISODES, REFERENCE_POLICY, REFERENCE_RETURNS, SCORE_PROFILE


def test_every_id_has_a_score():
    assert set(REFERENCE_RETURNS) == set(ENV_IDS)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_references_remeasured_exactly(env_id):
    """Simulator outputs: a change of the env's dynamics changes them; random scores
    0 and the reference 100 on the evaluation episodes."""
    r = evaluate(env_id, ["random", REFERENCE_POLICY], episodes=EVAL_EPISODES, seed=0, profile=SCORE_PROFILE)
    got = {p.name: p.return_mean for p in r.policies}
    assert (got["random"], got[REFERENCE_POLICY]) == REFERENCE_RETURNS[env_id]
    rand, ref = (next(p for p in r.policies if p.name == n).returns for n in ("random", REFERENCE_POLICY))
    assert kenv.normalized_score(env_id, rand) == pytest.approx(0.0, abs=1e-9)
    assert kenv.normalized_score(env_id, ref) == pytest.approx(100.0, abs=1e-9)


def test_bad_input_names_the_field():
    with pytest.raises(ConfigError, match="env"):
        kenv.normalized_score("kenv/Nope-v0", [1.0])
    with pytest.raises(ConfigError, match="returns"):
        kenv.normalized_score(ENV_IDS[0], [])


def test_evaluate_json_carries_the_score():
    env_id = "kenv/Raid6Bench-v3"
    out = subprocess.run([sys.executable, "-m", "kenv.cli", "evaluate", "--env", env_id, "--policy", "patched",
                          "--episodes", "2", "--json"], capture_output=True, text=True, check=True).stdout
    pol = json.loads(out)["policies"][0]
    assert pol["normalized_score"] == pytest.approx(kenv.normalized_score(env_id, pol["return_mean"]))
    assert "return_mean" in pol


@pytest.mark.parametrize("returns", ["10", b"10", None, float("nan"), [1.0, float("inf")], True, [None], ["1"],
                                     {"a": 1.0}, np.array([[1.0]]), 10**400, [10**400], [1e308, 1e308]])
def test_normalized_score_refuses_what_is_not_returns(returns):
    """A string was scored character by character ("10": the mean of 1 and 0), NaN and
    infinity scored NaN and infinity, None raised a TypeError; an int past a float's range
    and returns whose sum overflows raised OverflowError."""
    with pytest.raises(ConfigError) as e:
        kenv.normalized_score("kenv/Raid6Bench-v3", returns)
    assert e.value.field == "returns"


@pytest.mark.parametrize("returns", [10.0, 10, np.float32(10.0), [10.0], (10.0,), np.array([10.0]), np.array(10.0),
                                     (r for r in [10.0])])
def test_normalized_score_takes_any_form_of_returns(returns):
    assert kenv.normalized_score("kenv/Raid6Bench-v3", returns) == kenv.normalized_score("kenv/Raid6Bench-v3", 10.0)
