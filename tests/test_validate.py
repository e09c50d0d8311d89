"""kenv validate: replays records exactly; each tampering case fails it (through the CLI)."""

import json
import subprocess
import sys

import pytest

ENV = "kenv/Raid6Bench-v3"
MAKE = """
import sys, gymnasium as gym, kenv
env = kenv.RecordEpisodes(gym.make("{env}"{kw}), sys.argv[1])
env.action_space.seed(0)
for seed in (1, 2):
    env.reset(seed=seed)
    while not any(env.step(env.action_space.sample())[2:4]):
        pass
"""


def _make(path, kw=""):
    subprocess.run([sys.executable, "-c", MAKE.format(env=ENV, kw=kw), str(path)], check=True)
    return [json.loads(x) for x in path.read_text().splitlines()]


def _validate(path):
    return subprocess.run([sys.executable, "-m", "kenv.cli", "validate", str(path)], capture_output=True, text=True)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    path = tmp_path_factory.mktemp("rec") / "rec.jsonl"
    return _make(path)


def _write(path, recs):
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_record_from_another_process_passes(made, tmp_path):
    p = _validate(_write(tmp_path / "r.jsonl", made))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "2 of 2 records valid" in p.stdout


@pytest.mark.parametrize("case", ["return", "dropped", "changed", "profile", "version", "dynamics", "ending",
                                  "no_ending"])
def test_tampering_fails(made, tmp_path, case):
    rec = json.loads(json.dumps(made[0]))
    if case == "return":
        rec["return"] += 1e-9
    elif case == "dropped":
        rec["actions"] = rec["actions"][:-1]
    elif case == "changed":
        rec["actions"][3] = 1 - rec["actions"][3]
    elif case == "profile":
        rec["profile"] = "latency"
    elif case == "dynamics":
        rec["kenv_version"], rec["dynamics"] = "0.0.1", "0123456789ab"
        rec["return"] += 1.0
    elif case == "ending":   # the episode claimed to end another way than it does
        rec["terminated"], rec["truncated"] = not rec["terminated"], not rec["truncated"]
    elif case == "no_ending":
        del rec["terminated"], rec["truncated"]
    elif case == "version":
        rec["kenv_version"] = "0.0.1"
        rec["return"] += 1.0
    p = _validate(_write(tmp_path / "r.jsonl", [rec, made[1]]))
    assert p.returncode == 1, p.stdout
    assert "line 1: FAIL" in p.stdout and "line 2: ok" in p.stdout
    if case in ("version", "dynamics"):
        assert "kenv 0.0.1" in p.stdout and "0.1.0" in p.stdout
    if case == "ending":
        assert "terminated" in p.stdout.splitlines()[0] and "truncated" in p.stdout.splitlines()[0]
    if case == "no_ending":
        assert p.stdout.startswith("line 1: FAIL: field 'terminated' is missing"), p.stdout
    if case == "dynamics":
        assert "dynamics 0123456789ab" in p.stdout and "dynamics changed" in p.stdout


@pytest.mark.parametrize("field, value, says", [
    ("actions", None, "actions None is not a list"),
    ("format", 100, "format 100: this kenv reads record format 1"),
    ("format", None, "format None is not an integer"),
    ("return", "9.5", "return '9.5' is not an integer or a number"),
    ("components", [], "components [] is not an object"),
    ("length", True, "length True is not an integer"),
    ("scenario", None, None),
])
def test_a_malformed_field_is_named(made, tmp_path, field, value, says):
    """A record field of the wrong JSON type, a missing one or another record format is one
    line naming the field and the value (was "malformed record: TypeError: 'NoneType' object
    is not iterable"; a record of format 100 or null passed)."""
    rec = json.loads(json.dumps(made[0]))
    if says is None:
        del rec[field]
        says = f"field {field!r} is missing"
    else:
        rec[field] = value
    p = _validate(_write(tmp_path / "r.jsonl", [rec]))
    assert p.returncode == 1 and p.stdout.startswith(f"line 1: FAIL: {says}"), p.stdout


@pytest.fixture(scope="module")
def made_multi(tmp_path_factory):
    path = tmp_path_factory.mktemp("rec") / "rec.jsonl"
    subprocess.run([sys.executable, "-c", MAKE.format(env="kenv/Kernel-v3", kw=""), str(path)], check=True)
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.mark.parametrize("action", ["one", [True, 0, 0], ["1", "0", "0"], [1.0, 0, 0], [10**30, 0, 0], [None, 0, 0]])
def test_an_action_that_is_not_json_integers_fails(made_multi, tmp_path, action):
    """An action is an integer or a list of integers, as the wrapper writes them: numpy read
    1.9 as 1 and "1" or true as 1 (such a record passed), and an int past int64 raised
    (a traceback)."""
    rec = json.loads(json.dumps(made_multi[0]))
    first = rec["actions"][0]
    rec["actions"][0] = ([int(first[0]) + 0.9] + first[1:] if action == "one" else action)
    p = _validate(_write(tmp_path / "r.jsonl", [rec, made_multi[1]]))
    assert p.returncode == 1 and p.stderr == "", p.stdout + p.stderr
    assert p.stdout.startswith(f"line 1: FAIL: action {rec['actions'][0]!r} at step 0 is not in MultiDiscrete"), p.stdout
    assert "line 2: ok" in p.stdout


@pytest.mark.parametrize("seed", [None, "1", 1.0, True])
def test_record_without_an_integer_seed_fails(made, tmp_path, seed):
    # reset(seed=None) draws a random episode: replaying it could pass or fail by chance
    rec = dict(made[0], seed=seed)
    p = _validate(_write(tmp_path / "r.jsonl", [rec, made[1]]))
    assert p.returncode == 1, p.stdout
    line1 = p.stdout.splitlines()[0]
    assert line1.startswith("line 1: FAIL: seed ") and "not an integer" in line1, line1
    assert "line 2: ok" in p.stdout


@pytest.mark.parametrize("env, actions, act, action_set", [
    ("kenv/HwrngWait-v2", '["hwrng_yield", "cpu_relax"]', "0", ["hwrng_yield", "cpu_relax"]),
    ("kenv/Kernel-v3", '{"wait": ["hwrng_yield", "cpu_relax"]}', "[1, 0, 1]",
     {"deferral": ["workqueue", "timer"], "wait": ["hwrng_yield", "cpu_relax"],
      "raid6": ["preempt_disable", "migrate_disable"]})])
def test_record_made_with_an_action_set_validates(tmp_path, env, actions, act, action_set):
    """An action is an index into the env's action set: a record made with ``actions=``
    replayed in the id's default set played other choices and failed as if tampered
    (``kenv evaluate --actions ... --record`` wrote records its own validate refused)."""
    path = tmp_path / "r.jsonl"
    subprocess.run([sys.executable, "-c", f"""
import sys, gymnasium as gym, kenv
env = kenv.RecordEpisodes(gym.make("{env}", actions={actions}), sys.argv[1])
for seed in (1, 2):
    env.reset(seed=seed)
    while not any(env.step({act})[2:4]):
        pass
""", str(path)], check=True)
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    assert recs[0]["action_set"] == action_set
    p = _validate(path)
    assert p.returncode == 0 and "2 of 2 records valid" in p.stdout, p.stdout
    recs[0]["action_set"] = "bogus"
    p = _validate(_write(path, recs))
    assert p.returncode == 1 and p.stdout.startswith("line 1: FAIL: action_set 'bogus': "), p.stdout


def test_record_of_the_ids_own_actions_has_no_action_set(made):
    assert all("action_set" not in r for r in made)


def test_record_of_a_profile_that_is_not_packaged_validates(tmp_path):
    """Records of an env with ``reward_weights=`` overrides or a profile YAML of the
    user's named a profile kenv validate cannot look up ("profile 'balanced+overrides'"):
    they carry the weights, are replayed with them, and changed weights fail.  A record
    cannot borrow a packaged profile's name for other weights."""
    yaml = tmp_path / "mine.yaml"
    yaml.write_text("name: mylat\nweights: {entropy: 0.5, throughput: 1, latency: 3, rcu_stall: 1, bug: 1, "
                    "spin: 0.1}\n")
    over = _make(tmp_path / "over.jsonl", ', reward_weights={"latency": 4.0}')
    mine = _make(tmp_path / "mine.jsonl", f', profile="{yaml}"')
    assert over[0]["profile"] == "balanced+overrides" and over[0]["reward_weights"]["latency"] == 4.0
    assert mine[0]["profile"] == "mylat" and mine[0]["reward_weights"]["spin"] == 0.1
    for recs in (over, mine):
        p = _validate(_write(tmp_path / "r.jsonl", recs))
        assert p.returncode == 0 and "2 of 2 records valid" in p.stdout, p.stdout
    bad = json.loads(json.dumps(over[0]))
    bad["reward_weights"]["latency"] = 5.0          # other weights: another return
    p = _validate(_write(tmp_path / "r.jsonl", [bad]))
    assert p.returncode == 1 and p.stdout.startswith("line 1: FAIL: return "), p.stdout
    bad["profile"] = "balanced"                     # a packaged name with other weights
    p = _validate(_write(tmp_path / "r.jsonl", [bad]))
    assert p.returncode == 1 and "are not those of the packaged profile 'balanced'" in p.stdout, p.stdout
    bad["reward_weights"] = {"latency": "x"}
    p = _validate(_write(tmp_path / "r.jsonl", [bad]))
    assert p.returncode == 1 and p.stdout.startswith("line 1: FAIL: reward_weights"), p.stdout
    assert "with every component: entropy, throughput" in p.stdout
    del bad["reward_weights"]
    bad["profile"] = "nope"                         # (named as the profile, not as reward_weights)
    p = _validate(_write(tmp_path / "r.jsonl", [bad]))
    assert p.returncode == 1 and p.stdout.startswith("line 1: FAIL: profile 'nope': "), p.stdout


def test_a_profile_yaml_named_like_a_packaged_one_is_refused_when_recording(tmp_path):
    """A user's profile YAML named "balanced" with other weights wrote records claiming the
    packaged "balanced" with other weights: every one failed kenv validate later.  The
    wrapper refuses it when made, naming the profile; the packaged weights under the name pass."""
    import gymnasium as gym

    import kenv
    from kenv.errors import ConfigError

    yaml = tmp_path / "balanced.yaml"
    yaml.write_text("name: balanced\nweights: {entropy: 0.5, throughput: 1, latency: 3, rcu_stall: 1, bug: 1, "
                    "spin: 0.1}\n")
    with pytest.raises(ConfigError) as e:
        kenv.RecordEpisodes(gym.make(ENV, profile=str(yaml)), str(tmp_path / "r.jsonl"))
    assert e.value.field == "profile" and e.value.value == "balanced" and "another name" in str(e.value)
    assert not (tmp_path / "r.jsonl").exists()
    packaged = kenv.envs.reward.load_profile("balanced")
    yaml.write_text("name: balanced\nweights: " + json.dumps(dict(packaged.weights)) + "\n")
    kenv.RecordEpisodes(gym.make(ENV, profile=str(yaml)), str(tmp_path / "r.jsonl")).close()


def test_record_of_a_packaged_profile_has_no_reward_weights(made, tmp_path):
    assert all("reward_weights" not in r for r in made)
    assert all("reward_weights" not in r for r in _make(tmp_path / "lat.jsonl", ', profile="latency"'))


@pytest.mark.parametrize("where", ["return", "components"])
def test_a_duplicate_key_fails(made, tmp_path, where):
    """json keeps a key's last value, other readers may keep the first: a record giving a
    field twice ({"return": 999.0, ..., "return": <the true one>}) passed."""
    rec = made[0]
    if where == "return":
        line = '{"return": 999.0, ' + json.dumps(rec)[1:]
    else:
        comps = json.dumps(rec["components"])
        line = json.dumps(rec).replace(comps, '{"latency": 1e9, ' + comps[1:])
    path = tmp_path / "r.jsonl"
    path.write_text(line + "\n" + json.dumps(made[1]) + "\n")
    assert json.loads(line) == rec          # (what json alone reads: the record as made)
    p = _validate(path)
    assert p.returncode == 1, p.stdout
    key = "return" if where == "return" else "latency"
    assert p.stdout.startswith(f"line 1: FAIL: key {key!r} appears twice"), p.stdout
    assert "line 2: ok" in p.stdout


def test_deeply_nested_json_is_one_line(made, tmp_path):
    """json's decoder recurses per nesting level and raised RecursionError, not a
    ValueError: a line of 100,000 brackets was a traceback."""
    path = tmp_path / "r.jsonl"
    path.write_text("[" * 100_000 + "]" * 100_000 + "\n" + json.dumps(made[1]) + "\n")
    p = _validate(path)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stdout.startswith("line 1: FAIL: JSON nested deeper than a record is"), p.stdout
    assert "line 2: ok" in p.stdout


@pytest.mark.parametrize("line, says", [
    ("\ufeff{RECORD}", "starts with a UTF-8 byte order mark"),
    ('{{"seed": {BIG}}}', "not a kenv record: Exceeds the limit (4300 digits) for integer string conversion"),
    ("[1, 2]", "JSON a list, not a record (an object)"),
    ("null", "JSON null, not a record (an object)"),
])
def test_json_that_is_not_a_record_says_what_it_is(made, tmp_path, line, says):
    """A byte order mark, an integer Python will not read and whole JSON that is no object
    were all "not a whole JSON record (a truncated file?)": a wrong hint."""
    path = tmp_path / "r.jsonl"
    path.write_text(line.format(RECORD=json.dumps(made[0]), BIG="1" * 5000) + "\n" + json.dumps(made[1]) + "\n",
                    encoding="utf-8")
    p = _validate(path)
    assert p.returncode == 1 and p.stderr == "", p.stderr
    assert p.stdout.startswith(f"line 1: FAIL: {says}"), p.stdout
    assert "truncated" not in p.stdout and "line 2: ok" in p.stdout


def test_record_of_a_forced_scenario_validates(tmp_path):
    """An episode reset with options={"scenario": ...} (a context forced, as the oracle
    does) was replayed with the seed's draw and failed as if tampered: the record carries
    the override, validate replays with it and says so, and a changed one fails."""
    path = tmp_path / "r.jsonl"
    subprocess.run([sys.executable, "-c", f"""
import sys, gymnasium as gym, kenv
env = kenv.RecordEpisodes(gym.make("{ENV}"), sys.argv[1])
env.action_space.seed(0)
for seed, options in ((2, {{"scenario": {{"preempt": "none"}}}}), (3, None)):
    env.reset(seed=seed, options=options)
    while not any(env.step(env.action_space.sample())[2:4]):
        pass
""", str(path)], check=True)
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    assert recs[0]["scenario_override"] == {"preempt": "none"} and recs[0]["scenario"]["preempt"] == "none"
    assert "scenario_override" not in recs[1]
    p = _validate(path)
    assert p.returncode == 0 and "2 of 2 records valid" in p.stdout, p.stdout
    assert "(scenario forced by reset options: {'preempt': 'none'})" in p.stdout.splitlines()[0]
    recs[0]["scenario_override"] = {"preempt": "full"}
    p = _validate(_write(path, recs))
    assert p.returncode == 1 and p.stdout.startswith("line 1: FAIL: scenario "), p.stdout
    recs[0]["scenario_override"] = {"bogus": 1}
    p = _validate(_write(path, recs))
    assert p.returncode == 1 and p.stdout.startswith("line 1: FAIL: scenario_override {'bogus': 1}: "), p.stdout
    for junk in (None, {}, ["preempt", "none"]):   # (null passed, replayed as the seed's draw)
        recs[0]["scenario_override"] = junk
        p = _validate(_write(path, recs))
        assert p.returncode == 1 and p.stdout.startswith(f"line 1: FAIL: scenario_override {junk!r} is not an object"), \
            p.stdout


@pytest.mark.parametrize("scenario", ['"hwrng-control"', '{"reader_bs": {16: 1, 64: 3}, "preempt": "full"}'])
def test_record_of_an_env_made_with_a_scenario_mix_validates(tmp_path, scenario):
    """An env made with scenario= (a packaged mix, a mapping, a YAML of the user's) draws
    the episode's scenario from that mix: replayed with the id's mix the seed drew
    another and a legitimate record failed.  The record carries the mix (choice, weight
    pairs: their order and types decide the draw), validate replays with it and says so,
    and a changed one fails."""
    path = tmp_path / "r.jsonl"
    subprocess.run([sys.executable, "-c", MAKE.format(env="kenv/HwrngWait-v2", kw=f", scenario={scenario}"),
                    str(path)], check=True)
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    assert all("scenario_mix" in r for r in recs)
    p = _validate(path)
    assert p.returncode == 0 and "2 of 2 records valid" in p.stdout, p.stdout
    assert "scenario_mix: not its id's" in p.stdout.splitlines()[0]
    bad = json.loads(json.dumps(recs[0]))
    bad["scenario_mix"]["reader_bs"] = [[4096, 1.0]]     # another mix: another draw
    p = _validate(_write(path, [bad]))
    assert p.returncode == 1 and p.stdout.startswith("line 1: FAIL: scenario {"), p.stdout
    bad["scenario_mix"]["reader_bs"] = [[17, 1.0]]       # not a choice of the field
    p = _validate(_write(path, [bad]))
    assert p.returncode == 1 and p.stdout.startswith("line 1: FAIL: scenario_mix "), p.stdout
    bad["scenario_mix"] = {"reader_bs": {"16": 1}}
    p = _validate(_write(path, [bad]))
    assert p.returncode == 1 and p.stdout.startswith("line 1: FAIL: scenario_mix {'reader_bs': {'16': 1}} is not"), \
        p.stdout
    assert all("scenario_mix" not in r for r in _make(tmp_path / "plain.jsonl"))


def test_record_of_an_env_with_another_time_limit_validates(tmp_path):
    """gym.make(id, max_episode_steps=n) truncates every episode at n: replayed under the
    id's limit the episode had "not ended after the record's n actions" and a legitimate
    record failed.  The record carries the limit, validate replays with it and says so,
    and a changed or malformed one fails."""
    recs = _make(tmp_path / "r.jsonl", ", max_episode_steps=5")
    assert [(r["max_episode_steps"], r["length"], r["truncated"]) for r in recs] == [(5, 5, True)] * 2
    p = _validate(tmp_path / "r.jsonl")
    assert p.returncode == 0 and "2 of 2 records valid" in p.stdout, p.stdout
    assert "(time limit 5: not its id's)" in p.stdout.splitlines()[0]
    for n, says in ((6, "line 1: FAIL: the episode has not ended"), (0, "line 1: FAIL: max_episode_steps 0 is not"),
                    (True, "line 1: FAIL: max_episode_steps True is not")):
        p = _validate(_write(tmp_path / "b.jsonl", [dict(recs[0], max_episode_steps=n)]))
        assert p.returncode == 1 and p.stdout.startswith(says), p.stdout
    assert all("max_episode_steps" not in r for r in _make(tmp_path / "plain.jsonl"))


def test_record_of_an_env_with_a_kernel_option_validates(made, tmp_path):
    """irq_threads=True (load_balance=True) gives kenv/Kernel-v3 other dynamics under the
    same id: replayed without it an episode of a PREEMPT_RT scenario (seed 4) had another
    return and a legitimate record failed.  The record carries the options, validate
    replays with them and says so, and a record without them or with junk fails."""
    path = tmp_path / "r.jsonl"
    subprocess.run([sys.executable, "-c", """
import sys, gymnasium as gym, kenv
env = kenv.RecordEpisodes(gym.make("kenv/Kernel-v3", irq_threads=True), sys.argv[1])
env.action_space.seed(0)
_, info = env.reset(seed=4)
assert info["scenario"]["preempt"] == "rt", info["scenario"]
while not any(env.step(env.action_space.sample())[2:4]):
    pass
""", str(path)], check=True)
    [rec] = [json.loads(x) for x in path.read_text().splitlines()]
    assert rec["kernel_options"] == {"irq_threads": True}
    p = _validate(path)
    assert p.returncode == 0 and "(kernel options {'irq_threads': True}: not its id's)" in p.stdout, p.stdout
    del rec["kernel_options"]
    p = _validate(_write(path, [rec]))
    assert p.returncode == 1 and p.stdout.startswith("line 1: FAIL: return "), p.stdout
    p = _validate(_write(path, [dict(rec, kernel_options={"fast_forward": False})]))
    assert p.returncode == 1 and p.stdout.startswith("line 1: FAIL: kernel_options {'fast_forward': False} is not"), \
        p.stdout
    assert all("kernel_options" not in r for r in made)
    # the id's own setting is never recorded: such a record passed with "(kernel options ...: not its id's)"
    p = _validate(_write(path, [dict(made[0], kernel_options={"load_balance": False})]))
    assert p.returncode == 1 and p.stdout.startswith(
        "line 1: FAIL: kernel_options {'load_balance': False}: load_balance is kenv/Raid6Bench-v3's own setting"), \
        p.stdout


def test_strict_fails_a_record_not_made_as_its_id_is_registered(made, tmp_path):
    """--strict (a benchmark's table): a record that replays with an optional field fails,
    naming the fields; the id's own records pass; --json says strict."""
    over = _make(tmp_path / "over.jsonl", ', reward_weights={"latency": 4.0}, max_episode_steps=50')
    path = _write(tmp_path / "r.jsonl", [made[0], over[0]])
    p = _validate(path)
    assert p.returncode == 0 and "2 of 2 records valid" in p.stdout, p.stdout
    p = subprocess.run([sys.executable, "-m", "kenv.cli", "validate", "--strict", str(path)],
                       capture_output=True, text=True)
    lines = p.stdout.splitlines()
    assert p.returncode == 1 and lines[0].startswith("line 1: ok: "), p.stdout
    assert lines[1].startswith("line 2: FAIL: kenv/Raid6Bench-v3 seed 1 replays, but not as its id is registered: "
                               "reward_weights, max_episode_steps (--strict"), p.stdout
    p = subprocess.run([sys.executable, "-m", "kenv.cli", "validate", "--strict", "--json", str(path)],
                       capture_output=True, text=True)
    doc = json.loads(p.stdout)
    assert p.returncode == 1 and doc["strict"] is True and doc["failed"] == 1, p.stdout
    # the profile scores are measured with, and the fields a record has (a claim such as
    # "score" beside them would pass to a leaderboard)
    other = json.loads(json.dumps(made[1]))
    other["score"] = 100.0
    latency = _make(tmp_path / "latency.jsonl", ', profile="latency"')
    p = subprocess.run([sys.executable, "-m", "kenv.cli", "validate", "--strict",
                        str(_write(tmp_path / "s.jsonl", [other, latency[0]]))], capture_output=True, text=True)
    lines = p.stdout.splitlines()
    assert p.returncode == 1 and "0 of 2 records valid" in p.stdout, p.stdout
    assert lines[0].endswith("seed 2 replays, but has fields a record does not: score (--strict)"), p.stdout
    assert lines[1].endswith("under profile 'latency' (--strict: a benchmark's episodes use 'balanced')"), p.stdout
    assert _validate(tmp_path / "s.jsonl").returncode == 0


def test_truncated_file_fails(made, tmp_path):
    path = _write(tmp_path / "r.jsonl", made)
    path.write_text(path.read_text()[:-40])
    p = _validate(path)
    assert p.returncode == 1 and "truncated" in p.stdout


def test_evaluate_record_validates(tmp_path):
    path = tmp_path / "ev.jsonl"
    subprocess.run([sys.executable, "-m", "kenv.cli", "evaluate", "--env", ENV, "--policy", "random",
                    "--episodes", "3", "--record", str(path)], check=True, capture_output=True)
    assert len(path.read_text().splitlines()) == 3
    p = _validate(path)
    assert p.returncode == 0 and "3 of 3 records valid" in p.stdout, p.stdout


def test_an_empty_path_is_named():
    # was "kenv validate: error: No such file or directory": no path, no value
    p = subprocess.run([sys.executable, "-m", "kenv.cli", "validate", ""], capture_output=True, text=True)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == [p.stderr.strip()]
    assert p.stderr.startswith("kenv validate: error: path: got ''; allowed: a records file"), p.stderr


@pytest.mark.parametrize("old", ["kenv/Raid6Bench-v1", "kenv/Kernel-v2"])
def test_an_old_ids_records_carry_no_kernel_options_of_its_own(old, tmp_path):
    """An old id made as registered (kenv/Raid6Bench-v1: kenv/Raid6BenchBalanced-v0, with
    load_balance) is its id's benchmark: its records carry no kernel_options and pass
    --strict (they carried the new id's options, as if the user had turned them on)."""
    path = tmp_path / "old.jsonl"
    subprocess.run([sys.executable, "-W", "ignore", "-c", MAKE.format(env=old, kw=""), str(path)], check=True)
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    assert recs and all("kernel_options" not in r for r in recs), recs[0].get("kernel_options")
    p = subprocess.run([sys.executable, "-m", "kenv.cli", "validate", "--strict", str(path)],
                       capture_output=True, text=True)
    assert p.returncode == 0 and f"{len(recs)} of {len(recs)} records valid" in p.stdout, p.stdout


def test_a_seed_reset_refuses_is_named_as_the_seed(made, tmp_path):
    """A negative (or too large) seed is the seed's error, not the scenario_override's: the
    reset's error was put down to "scenario_override None" on records without one."""
    for seed in (-1, 2**64):
        p = _validate(_write(tmp_path / "r.jsonl", [dict(made[0], seed=seed)]))
        assert p.returncode == 1 and p.stdout.startswith(f"line 1: FAIL: seed {seed}: seed: got {seed}"), p.stdout
        assert "scenario_override" not in p.stdout, p.stdout


@pytest.mark.parametrize("data", [b"\xff\xfe{\x00}\x00\n\x00", b'{"format": 1}\n\x80\n'])
def test_a_file_that_is_not_utf8_is_one_line(tmp_path, data):
    """A records file in UTF-16 (PowerShell's >) or with bytes that are not UTF-8 was a
    UnicodeDecodeError traceback; now one line naming the path and the byte."""
    path = tmp_path / "r.jsonl"
    path.write_bytes(data)
    p = _validate(path)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    [line] = p.stderr.strip().splitlines()
    assert "is not UTF-8" in line and str(path) in line, line


def test_strict_fails_a_seed_that_is_not_an_evaluation_episodes(made, tmp_path):
    """--strict: a benchmark's episodes are seeds 0..9 (kenv.envs.scores.EVAL_EPISODES); a
    record of seed 42 replays, but a row of them is a cherry-pick of good seeds (it passed)."""
    assert all(0 <= r["seed"] < 10 for r in made)
    path = tmp_path / "s.jsonl"
    subprocess.run([sys.executable, "-c", MAKE.format(env=ENV, kw="").replace("(1, 2)", "(10, 42)"), str(path)],
                   check=True)
    p = subprocess.run([sys.executable, "-m", "kenv.cli", "validate", "--strict", str(path)],
                       capture_output=True, text=True)
    lines = p.stdout.splitlines()
    assert p.returncode == 1 and "0 of 2 records valid" in p.stdout, p.stdout
    assert lines[0].startswith("line 1: FAIL: kenv/Raid6Bench-v3 seed 10 replays, but is not an evaluation "
                               "episode (--strict: a benchmark's episodes are seeds 0..9)"), p.stdout
    assert "seed 42 replays, but is not an evaluation episode (--strict" in lines[1], p.stdout
    assert _validate(path).returncode == 0   # (they replay: only --strict refuses them)
    p = subprocess.run([sys.executable, "-m", "kenv.cli", "validate", "--strict", str(_write(tmp_path / "ok.jsonl", made))],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout


def test_strict_fails_an_episode_given_twice(made, tmp_path):
    """--strict: one file holding the same (id, seed) episode twice (its best return,
    repeated to fill a row) fails on the second line, naming the first; an old id's record
    of the same seed is the same episode. Without --strict both replay."""
    path = _write(tmp_path / "r.jsonl", [made[0], made[1], made[0]])
    p = subprocess.run([sys.executable, "-m", "kenv.cli", "validate", "--strict", str(path)],
                       capture_output=True, text=True)
    lines = p.stdout.splitlines()
    assert p.returncode == 1 and "2 of 3 records valid" in p.stdout, p.stdout
    assert lines[0].startswith("line 1: ok") and lines[1].startswith("line 2: ok"), p.stdout
    assert lines[2] == (f"line 3: FAIL: {ENV} seed {made[0]['seed']} replays, but line 1 is the same episode "
                        "(--strict: a benchmark plays each evaluation episode once)"), p.stdout
    assert _validate(path).returncode == 0
    old = dict(made[0], env_id="kenv/Raid6Bench-v0")   # (renamed to kenv/Raid6Bench-v3: the same episodes)
    p = subprocess.run([sys.executable, "-W", "ignore", "-m", "kenv.cli", "validate", "--strict",
                        str(_write(tmp_path / "o.jsonl", [made[0], old]))], capture_output=True, text=True)
    assert p.returncode == 1 and "line 2: FAIL" in p.stdout and "line 1 is the same episode" in p.stdout, p.stdout


@pytest.mark.parametrize("dyn", [5, ["5dd3810594b1"], {"hash": "x"}, True])
def test_a_dynamics_of_another_json_type_fails(made, tmp_path, dyn):
    """``dynamics`` is a string (or null): one of another JSON type is a field of another
    type, which fails (it passed, even --strict: only the replay was checked)."""
    p = _validate(_write(tmp_path / "r.jsonl", [dict(made[0], dynamics=dyn)]))
    assert p.returncode == 1 and p.stdout.startswith(f"line 1: FAIL: dynamics {dyn!r} is not a string or null"), \
        p.stdout
    assert _validate(_write(tmp_path / "n.jsonl", [dict(made[0], dynamics=None)])).returncode == 0


def test_strict_gives_an_ids_benchmark_row_only_for_its_ten_evaluation_episodes(tmp_path):
    """--strict checked each record, but a file of seeds 0..4 passed like a row of ten, and the
    row's mean and normalised score were left to the reader: each id's valid records now make
    its row (mean return and score as kenv evaluate gives them) only when they are seeds 0..9."""
    path = tmp_path / "ev.jsonl"
    ev = subprocess.run([sys.executable, "-m", "kenv.cli", "evaluate", "--env", ENV, "--policy", "patched",
                         "--episodes", "10", "--seed", "0", "--record", str(path), "--json"],
                        check=True, capture_output=True, text=True)
    [played] = json.loads(ev.stdout)["policies"]
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    old = dict(recs[9], env_id="kenv/Raid6Bench-v0")   # (an old id's records count as its new id's)
    strict = ("-W", "ignore", "-m", "kenv.cli", "validate", "--strict")

    p = subprocess.run([sys.executable, *strict, "--json", str(_write(tmp_path / "all.jsonl", recs[:9] + [old]))],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout
    [row] = json.loads(p.stdout)["rows"]
    assert row["env_id"] == ENV and row["seeds"] == list(range(10)) and row["complete"]
    assert row["return_mean"] == pytest.approx(played["return_mean"], rel=1e-12)
    assert row["normalized_score"] == pytest.approx(played["normalized_score"], rel=1e-12)

    p = subprocess.run([sys.executable, *strict, str(_write(tmp_path / "half.jsonl", recs[:5]))],
                       capture_output=True, text=True)
    assert p.returncode == 0 and "5 of 5 records valid" in p.stdout, p.stdout   # (each record is valid)
    assert p.stdout.splitlines()[-1] == (f"{ENV}: 5 of the 10 evaluation episodes valid (missing seeds 5, 6, 7, 8, "
                                         "9): no benchmark row"), p.stdout

    # a failed record is no episode of the row, and a file with one gives no row at all: kenv evaluate
    # --record writes every policy's episodes, and the first policy's ten would make a row
    bad = dict(recs[3], **{"return": recs[3]["return"] + 1.0})
    for name, lines, seeds in (("bad", recs[:3] + [bad] + recs[4:], [0, 1, 2, 4, 5, 6, 7, 8, 9]),
                               ("twice", recs + recs[:1], list(range(10)))):
        p = subprocess.run([sys.executable, *strict, "--json", str(_write(tmp_path / f"{name}.jsonl", lines))],
                           capture_output=True, text=True)
        [row] = json.loads(p.stdout)["rows"]
        assert p.returncode == 1 and row["seeds"] == seeds and not row["complete"] and row["failed"] == 1, p.stdout
        assert row["return_mean"] is None and row["normalized_score"] is None
    p = subprocess.run([sys.executable, "-m", "kenv.cli", "validate", "--json", str(tmp_path / "all.jsonl")],
                       capture_output=True, text=True)
    assert json.loads(p.stdout)["rows"] == []


def test_strict_gives_a_discover_controls_ten_episodes_no_row_and_no_error(tmp_path):
    """A discover control (kenv/HwrngWaitControl-v0) is an id records and validate take, but it has
    no normalised score: --strict of its ten evaluation episodes stopped with 'kenv validate: error:
    env: got ...' (exit 2, no line of the file reported) instead of saying it has no row."""
    import gymnasium as gym

    import kenv

    ctl = "kenv/HwrngWaitControl-v0"
    path = tmp_path / "ctl.jsonl"
    env = kenv.RecordEpisodes(gym.make(ctl), str(path))
    env.action_space.seed(0)
    for seed in range(10):
        env.reset(seed=seed)
        done = False
        while not done:
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            done = term or trunc
    env.close()
    strict = (sys.executable, "-W", "ignore", "-m", "kenv.cli", "validate", "--strict")
    p = subprocess.run([*strict, str(path)], capture_output=True, text=True)
    assert p.returncode == 0 and "10 of 10 records valid" in p.stdout, (p.stdout, p.stderr)
    assert p.stdout.splitlines()[-1] == (f"{ctl}: 10 of the 10 evaluation episodes valid (not a benchmark id: "
                                         "it has no normalised score): no benchmark row"), p.stdout
    p = subprocess.run([*strict, "--json", str(path)], capture_output=True, text=True)
    [row] = json.loads(p.stdout)["rows"]
    assert row == {"env_id": ctl, "seeds": list(range(10)), "complete": False, "return_mean": None,
                   "normalized_score": None, "failed": 0}


def test_strict_rows_mean_is_kenv_evaluates_return_mean_exactly(tmp_path):
    """The row's mean return is the one kenv evaluate --json gives for the same episodes (and
    bench.json keeps), to the last bit: it was fsum / n, evaluate's is numpy's mean, and on
    kenv/Kernel-v3's random episodes the two differ (61.74269858333385 against ...383)."""
    env = "kenv/Kernel-v3"
    path = tmp_path / "ev.jsonl"
    ev = subprocess.run([sys.executable, "-W", "ignore", "-m", "kenv.cli", "evaluate", "--env", env, "--policy",
                         "random", "--episodes", "10", "--seed", "0", "--record", str(path), "--json"],
                        check=True, capture_output=True, text=True)
    [played] = json.loads(ev.stdout)["policies"]
    p = subprocess.run([sys.executable, "-W", "ignore", "-m", "kenv.cli", "validate", "--strict", "--json",
                        str(path)], capture_output=True, text=True)
    [row] = json.loads(p.stdout)["rows"]
    assert row["complete"] and row["return_mean"] == played["return_mean"], (row, played)
    assert row["normalized_score"] == played["normalized_score"]
