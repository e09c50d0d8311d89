"""``kenv evaluate --actions`` (issue #39): the action values of each decision, so that a
baseline whose choice is not in an env's default action set can be evaluated; a baseline
asked for by name that cannot play is an error naming the ``--actions`` that adds it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kenv.agents.evaluate import parse_actions
from kenv.errors import ConfigError


def kenv(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kenv.cli", *argv], capture_output=True, text=True, timeout=300)


def test_original_on_random_mix_needs_its_action_and_says_which_flag_adds_it():
    r = kenv("evaluate", "--env", "kenv/RandomMix-v2", "--policy", "original", "--episodes", "2")
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--policy" in lines[0]
    assert "original plays 'hardirq'" in lines[0] and "--actions workqueue,timer,hardirq" in lines[0]


def test_actions_chooses_the_action_set_and_the_baseline_plays():
    r = kenv("evaluate", "--env", "kenv/RandomMix-v2", "--policy", "original", "--episodes", "2",
             "--actions", "hardirq,workqueue,timer", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [p["name"] for p in doc["policies"]] == ["original"] and doc["skipped"] == {}


def test_actions_per_decision_on_kernel():
    r = kenv("evaluate", "--env", "kenv/Kernel-v3", "--policy", "original", "--episodes", "1",
             "--actions", "deferral=hardirq,timer", "--actions", "wait=cpu_relax,usleep_range(10,20)",
             "--actions", "raid6=preempt_disable", "--json")
    assert r.returncode == 0, r.stderr
    assert [p["name"] for p in json.loads(r.stdout)["policies"]] == ["original"]


def test_all_lists_a_skipped_baseline_with_the_flag_that_adds_it():
    r = kenv("evaluate", "--env", "kenv/HwrngWait-v2", "--policy", "all", "--episodes", "1",
             "--actions", "cpu_relax,hwrng_yield", "--json")
    assert r.returncode == 0, r.stderr
    skipped = json.loads(r.stdout)["skipped"]
    assert set(skipped) == {"pre_patch"}
    assert "--actions cpu_relax,hwrng_yield,hwrng_msleep(1000)" in skipped["pre_patch"]


@pytest.mark.parametrize("values, per_decision, expected", [
    (["a,b"], False, ["a", "b"]),
    (["usleep_range(10,20), hwrng_yield"], False, ["usleep_range(10,20)", "hwrng_yield"]),
    (["deferral=timer", "wait=usleep_range(1,2),cpu_relax"], True,
     {"deferral": ["timer"], "wait": ["usleep_range(1,2)", "cpu_relax"]}),
])
def test_parse_actions(values, per_decision, expected):
    assert parse_actions(values, per_decision) == expected


@pytest.mark.parametrize("values, per_decision", [
    (["a", "b"], False), (["wait=a"], False), ([""], False), (["a,,b"], False),
    (["timer"], True), (["deferral=a", "deferral=b"], True), (["deferral="], True),
    (["foo=timer"], True),     # (was the env's Python-API wording: "None or a mapping with keys ...")
])
def test_parse_actions_refuses_with_the_field(values, per_decision):
    with pytest.raises(ConfigError) as e:
        parse_actions(values, per_decision)
    assert e.value.field == "actions"
    if per_decision:
        assert e.value.allowed.startswith("DECISION=A,B,... once per decision of this env (deferral, wait, raid6;")


def test_a_malformed_action_list_gives_this_envs_names_as_the_example():
    """The example in the error was RandomMix's hardirq,workqueue,timer on every env."""
    r = kenv("evaluate", "--env", "kenv/Raid6Bench-v3", "--episodes", "1", "--actions", "a,,b")
    assert r.returncode == 2 and r.stdout == ""
    [line] = r.stderr.strip().splitlines()
    assert "'a,,b'" in line and "(e.g. preempt_disable,migrate_disable)" in line, line


@pytest.mark.parametrize("decision, bad", [("deferral", "foo"), ("wait", "bogus"), ("raid6", "nope")])
def test_a_bad_action_of_one_decision_names_the_decision(decision, bad):
    """kenv/Kernel-*'s decisions have their own action names: an error named only
    ``actions`` did not say which decision's list was wrong."""
    import gymnasium as gym

    with pytest.raises(ConfigError) as e:
        gym.make("kenv/Kernel-v3", actions={decision: [bad]})
    assert e.value.field == f"actions.{decision}" and e.value.value == bad
    r = kenv("evaluate", "--env", "kenv/Kernel-v3", "--episodes", "1", "--actions", f"{decision}={bad}")
    assert r.returncode == 2 and f"actions.{decision}: got '{bad}'" in r.stderr, r.stderr


@pytest.mark.parametrize("decision, names, field", [
    ("wait", [5], "actions.wait.0"),                       # not a string: the entry's path
    ("deferral", ["timer", "timer"], "actions.deferral"),   # twice
    ("wait", ["cpu_relax", "cpu_relax()"], "actions.wait"),  # twice, spelled two ways
    ("raid6", [], "actions.raid6")])
def test_every_refusal_of_a_decisions_list_names_the_decision(decision, names, field):
    """The decision was named only for a name the decision refused: an entry of another type
    was ``actions.0``, a decision of no kenv/Kernel-* env's list."""
    import gymnasium as gym

    with pytest.raises(ConfigError) as e:
        gym.make("kenv/Kernel-v3", actions={decision: names})
    assert e.value.field == field
