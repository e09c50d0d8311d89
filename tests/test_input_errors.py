"""Bad scenario input is a one-line ConfigError naming the field, the value
and what is allowed (break-test defects of the last session, items 1-3):
a negative weight in a mix, a phase field given to an env built with
``phases=False``, and a ``reset(options={"scenario": ...})`` that is not a
mapping."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import kenv  # noqa: F401  (registers the ids)
from kenv.envs.registration import ENVS, VERSIONS
from kenv.errors import ConfigError

PHASED = {"kenv/RandomMix-v2": "traffic_phases", "kenv/HwrngWait-v2": "reader_phases",
          "kenv/Raid6Bench-v3": "load_phases", "kenv/Kernel-v3": "load_phases"}


def _error(make) -> str:
    with pytest.raises(ConfigError) as e:
        make()
    msg = str(e.value)
    assert "\n" not in msg
    return msg


# ------------------------------------------------------------------ item 1

@pytest.mark.parametrize("field, dist", [("traffic_phases", {"none": 1, "sweep": -1}),
                                         ("preempt", {"full": 2, "none": -0.5})])
def test_negative_weight_names_the_weight(field, dist):
    bad = next(c for c, w in dist.items() if w < 0)
    msg = _error(lambda: gym.make("kenv/RandomMixPhased-v0", scenario={field: dist}))
    assert f"{field}.{bad}: got {dist[bad]!r}" in msg
    assert ">= 0" in msg and "not all zero" in msg


def test_all_zero_weights_say_so():
    msg = _error(lambda: gym.make("kenv/RandomMixPhased-v0", scenario={"traffic_phases": {"none": 0, "sweep": 0}}))
    assert "traffic_phases: got {'none': 0, 'sweep': 0}" in msg and "not all zero" in msg


def test_negative_weight_in_a_yaml_mix(tmp_path):
    p = tmp_path / "mix.yaml"
    p.write_text("mix:\n  load_phases: {onoff: 1, stops: -2}\n")
    msg = _error(lambda: gym.make("kenv/Raid6BenchPhased-v0", scenario=str(p)))
    assert "load_phases.stops: got -2" in msg and ">= 0" in msg


@pytest.mark.parametrize("kind", ["scenario", "profile"])
def test_a_yaml_exponent_read_as_a_string_says_how_to_write_it(tmp_path, kind):
    """``1e3`` is a string in YAML 1.1 (a float needs a dot and a signed exponent):
    the error said "got '1e3'; allowed: a finite number", which 1e3 looks like."""
    p = tmp_path / f"{kind}.yaml"
    p.write_text("mix:\n  load_phases: {onoff: 1e3, stops: 1}\n" if kind == "scenario" else
                 "weights: {entropy: 1, throughput: 1, latency: 1e3, rcu_stall: 5, bug: 10, spin: 1}\n")
    msg = _error(lambda: gym.make("kenv/Raid6BenchPhased-v0", **{kind: str(p)}))
    assert "got '1e3'" in msg and "write 1.0e+3" in msg and "!!float 1e3" in msg, msg
    p.write_text(p.read_text().replace("1e3", "1.0e+3"))   # (as the message says: accepted)
    gym.make("kenv/Raid6BenchPhased-v0", **{kind: str(p)}).close()


def test_bad_choice_in_a_weighted_mix_still_names_the_choices():
    msg = _error(lambda: gym.make("kenv/RandomMixPhased-v0", scenario={"traffic_phases": {"none": 1, "often": 2}}))
    assert "often" in msg and "'sweep'" in msg


# ------------------------------------------------------------------ item 2

def _phased_ids(env_id: str) -> list[str]:
    entry = {i: ep for i, ep, _ in ENVS}
    return [i for i, v in VERSIONS.items() if v.kwargs.get("phases") and entry[i] == entry[env_id]]


@pytest.mark.parametrize("env_id, field", sorted(PHASED.items()))
@pytest.mark.parametrize("how", ["reset", "kwarg", "yaml"])
def test_phase_field_without_phases_says_phases_true(env_id, field, how, tmp_path):
    value = {"traffic_phases": "sweep", "reader_phases": "rngd", "load_phases": "onoff"}[field]
    if how == "reset":
        env = gym.make(env_id)
        msg = _error(lambda: env.reset(options={"scenario": {field: value}}))
    elif how == "kwarg":
        msg = _error(lambda: gym.make(env_id, scenario={field: value}))
    else:
        p = tmp_path / "mix.yaml"
        p.write_text(f"mix:\n  {field}: {value}\n")
        msg = _error(lambda: gym.make(env_id, scenario=str(p)))
    ids = _phased_ids(env_id)
    assert ids, env_id
    assert field in msg and "phases=True" in msg
    assert all(i in msg for i in ids)


# ------------------------------------------------------------------ item 3

@pytest.mark.parametrize("value", ["rngd", ["preempt", "full"], 3])
def test_reset_scenario_not_a_mapping(value):
    env = gym.make("kenv/HwrngWait-v2")
    msg = _error(lambda: env.reset(options={"scenario": value}))
    assert msg.startswith(f"options.scenario: got {value!r}")
    assert "a mapping" in msg and type(value).__name__ in msg and "preempt" in msg
    assert "key 'scenario' only" not in msg


def test_reset_unknown_option_key():
    env = gym.make("kenv/HwrngWait-v2")
    msg = _error(lambda: env.reset(options={"scenarios": {}}))
    assert msg.startswith("options.scenarios:") and "'scenario' only" in msg


# ------------------------------------------------------------------ actions

@pytest.mark.parametrize("env_id", [i for i, _, _ in ENVS])
def test_a_bool_is_not_an_action(env_id):
    """A Discrete env refused ``True``, but a Kernel env took ``[True, 0, 0]`` as
    ``[1, 0, 0]`` (numpy reads a list of bools and ints as integers)."""
    env = gym.make(env_id)
    env.reset(seed=0)
    n = len(env.action_space.nvec) if isinstance(env.action_space, gym.spaces.MultiDiscrete) else 1
    for bad in ([True] + [0] * (n - 1), tuple([0] * (n - 1) + [np.True_]), True):
        msg = _error(lambda: env.step(bad))
        assert msg.startswith("action: got ") and "allowed: an integer" in msg, msg
    env.step(env.action_space.sample())   # (the env still steps)


# ------------------------------------------------------------------ a key given twice

@pytest.mark.parametrize("kind, text", [
    ("reward", "name: x\nweights:\n  entropy: 1.0\n  entropy: 2.0\n"),
    ("scenarios", "preempt: full\nload: 0\npreempt: rt\n"),
    ("train", "kenv/Raid6Bench-v3:\n  n_envs: 2\n  gamma: 0.9\n  n_envs: 4\n"),
])
def test_a_key_given_twice_is_refused_with_its_lines(tmp_path, kind, text):
    """PyYAML keeps the last of two equal keys without a word; kenv refuses the file."""
    from kenv.envs.config import load_yaml

    path = tmp_path / "x.yaml"
    path.write_text(text)
    msg = _error(lambda: load_yaml(kind, str(path)))
    key = {"reward": "entropy", "scenarios": "preempt", "train": "n_envs"}[kind]
    assert str(path) in msg and f"the key '{key}' twice" in msg and "each key once" in msg


def test_a_key_that_overrides_a_merged_one_is_not_a_repeat(tmp_path):
    from kenv.envs.config import load_yaml

    path = tmp_path / "x.yaml"
    path.write_text("default: &d\n  gamma: 0.9\n  n_envs: 2\nkenv/Raid6Bench-v3:\n  <<: *d\n  gamma: 0.5\n"
                    "kenv/Raid6BenchBalanced-v0:\n  <<: *d\n")
    data, _ = load_yaml("train", str(path))
    assert data["kenv/Raid6Bench-v3"] == {"gamma": 0.5, "n_envs": 2} and data["kenv/Raid6BenchBalanced-v0"]["gamma"] == 0.9


def test_a_phase_field_after_a_right_mix_field_is_told_as_such():
    """A mix file of a phased version (its ``env:`` an old id such as Raid6Bench-v1, whose
    files carried the phases) given to a base id: the message is about the phase field, not
    the choices of the right field before it (it was "{choice: weight} with choices
    'x86-avx512-32', 'x86-avx2'", the platforms)."""
    mix = {"platform": {"x86-avx512-32": 3, "x86-avx2": 1}, "load_phases": {"none": 1, "onoff": 2}}
    msg = _error(lambda: gym.make("kenv/Raid6Bench-v3", scenario=mix))
    assert "mix.load_phases: got" in msg and "only with phases=True (kenv/Raid6BenchPhased-v0)" in msg
    assert "x86-avx2'; a finite" not in msg
    # a bad choice of a right field is still told with that field's choices
    msg = _error(lambda: gym.make("kenv/Raid6Bench-v3", scenario={"platform": {"x86-avx512-32": 1},
                                                                  "preempt": {"sometimes": 1}}))
    assert "preempt" in msg and "'voluntary'" in msg
