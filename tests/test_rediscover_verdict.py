"""The three-valued rediscovery verdict (issue 40): patched, beyond, missed.

build_row() on hand-made baselines and learned choices: two decisions (``wait`` and
``pin``), the patched action ``yield|pin`` = (0, 0); the numbers are the per-episode
returns of the learned policy and of the same episodes with the patched value forced in.
"""

from __future__ import annotations

from kenv.agents.rediscover import build_row, combine_verdicts, decision_verdict

LEARNED_RETURNS = [50.0, 52.0, 48.0]


def _base(matters=(True, True)) -> dict:
    dims = [{"matters": m, "verdict": "patched" if m else "tie"} for m in matters]
    return {"env": "kenv/Test-v0", "patched": "yield|pin", "patched_action": [0, 0],
            "contexts": [{"context": "ctx", "matters": any(matters), "dims": dims}],
            "evaluation": {"policies": [{"name": "patched", "return_mean": 50.0},
                                        {"name": "oracle", "return_mean": 50.0}]}}


def _learned(action_index, label, forced) -> dict:
    counts = [{str(v): 10} for v in action_index]
    return {"seed": 0, "algo": "ppo", "steps": 100, "train_wall_s": 1.0, "eval_wall_s": 1.0, "return_mean": 50.0,
            "return_ci95": 1.0,
            "choices": [{"context": "ctx", "action": label, "share": 1.0, "dim_counts": counts, "steps": 10,
                         "action_index": list(action_index), "returns": LEARNED_RETURNS,
                         "forced_returns": [forced, LEARNED_RETURNS]}]}


def test_verdict_patched_when_learned_takes_the_patch_and_forcing_it_gains_nothing():
    row = build_row(_base(), _learned([0, 0], "yield|pin", LEARNED_RETURNS))
    assert row["verdict"] == "patched" and row["success"] and row["match"] and row["beyond"] == []


def test_verdict_beyond_when_another_choice_beats_the_patch_on_paired_episodes():
    # forcing the patched wait loses 0.05 on every episode: the paired interval excludes 0
    forced = [r - 0.05 for r in LEARNED_RETURNS]
    row = build_row(_base(), _learned([1, 0], "msleep|pin", forced))
    assert row["verdict"] == "beyond" and row["success"] and not row["match"]
    (b,) = row["beyond"]
    assert b["context"] == "ctx" and b["choice"] == "msleep" and b["patched"] == "yield"
    assert abs(b["gain_over_patch"] - 0.05) < 1e-9
    assert "msleep beats yield" in row["learned_where_it_matters"]


def test_verdict_missed_when_the_other_choice_is_better_only_within_the_noise():
    # mean gain of the other choice +0.05 but the paired differences straddle 0
    forced = [LEARNED_RETURNS[0] + 1.0, LEARNED_RETURNS[1] - 1.0, LEARNED_RETURNS[2] - 0.15]
    row = build_row(_base(), _learned([1, 0], "msleep|pin", forced))
    assert row["verdict"] == "missed" and not row["success"] and row["beyond"] == []


def test_verdict_missed_when_the_other_choice_loses_to_the_patch():
    forced = [r + 5.0 for r in LEARNED_RETURNS]
    row = build_row(_base(), _learned([1, 0], "msleep|pin", forced))
    assert row["verdict"] == "missed" and not row["success"]


def test_a_decision_that_does_not_matter_is_not_judged():
    forced = [r + 5.0 for r in LEARNED_RETURNS]
    row = build_row(_base(matters=(False, True)), _learned([1, 0], "msleep|pin", forced))
    assert row["contexts"][0]["dims"][0]["learned_verdict"] is None and row["verdict"] == "patched"
    assert decision_verdict(False, False, [1.0, 1.0], None) is None


def test_a_row_is_as_good_as_its_worst_judged_context():
    assert combine_verdicts(["patched", "beyond", None]) == "beyond"
    assert combine_verdicts(["patched", "beyond", "missed"]) == "missed"
    assert combine_verdicts(["patched", None]) == "patched"
    assert combine_verdicts([None]) is None
