"""``kenv discover`` (agents/discover.py): structure, the oracle's guarantee, the rule,
resume after a real kill, and its errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np
import pytest

import kenv  # noqa: F401
from kenv.agents import discover as dc
from kenv.agents.baselines import StaticPolicy, make_policy, run_episode
from kenv.cli import main
from kenv.errors import ConfigError

from kenv.envs.registration import ENVS as REGISTERED, RENAMED

#: every registered id, variants included (a break-test found discover failing on KernelBoot-v0)
ENVS = tuple(e[0] for e in REGISTERED)
POLICY_KEYS = ("policy", "return_mean", "return_ci95", "returns", "components", "counters", "refused")


@pytest.mark.parametrize("env_id", ENVS)
def test_extended_set_holds_the_patch_and_names_every_observation(env_id):
    env = gym.make(env_id, actions=dc.action_set(env_id))
    base = env.unwrapped
    patched = make_policy("patched", env).action   # raises if the patch is not in the set
    assert base.action_label(patched) in [base.action_label(a) for a in dc.static_actions(env)]
    # the rule's names: one per observation entry
    assert len(base.obs_rows) == env.observation_space.shape[0]
    assert len(dc.SITES[dc.family(env_id)]) == len(dc._dim_labels(base))


@pytest.mark.parametrize("env_id", [e for e in ENVS if e != dc.family(e)])
def test_every_version_searches_its_v0s_extended_set(env_id):
    """A later version or variant of an env searches the same choices as its base task
    (HwrngWaitPhased-v0 once got the default three waits only, no upstream-review waits)."""
    assert dc.action_set(env_id) == dc.action_set(dc.family(env_id))


@pytest.mark.parametrize("old, new", sorted(RENAMED.items()))
def test_an_old_id_searches_its_new_ids_set(old, new):
    """discover's Python API with an id of before the renaming (an old variant's entry point,
    make_renamed, has no VERSIONS: family() raised AttributeError)."""
    assert dc.family(old) == dc.family(new)
    assert dc.action_set(old) == dc.action_set(new)


def test_every_unit_names_an_observation_entry():
    names = set()
    for env_id in ENVS:
        names |= {r[0] for r in gym.make(env_id).unwrapped.obs_rows}
    assert set(dc.UNITS) <= names, set(dc.UNITS) - names


def test_static_returns_from_component_sums_match_the_env():
    """One static run serves every profile: its return under a profile is the profile's
    weights applied to the episode's component sums."""
    acts = dc.action_set("kenv/Kernel-v3")
    for profile in ("balanced", "throughput"):
        env = gym.make("kenv/Kernel-v3", actions=acts, profile=profile)
        pol = StaticPolicy("s", np.array([1, 3, 2]))
        ret, _, _ = run_episode(env, pol, 7)
        ep = dc.play(env, pol, 7)
        assert dc.returns_of([ep["components"]], dc.signed_weights(profile))[0] == pytest.approx(ret, rel=1e-9)
        assert ep["return"] == pytest.approx(ret, rel=1e-12)


def test_tree_rule_and_kernel_units():
    pytest.importorskip("sklearn")
    rng = np.random.default_rng(0)
    X = rng.random((400, 3))
    X[:, 2] = (X[:, 2] > 0.5).astype(float)          # a boolean entry
    y = np.where((X[:, 0] > 0.4) & (X[:, 2] == 1), 1, 0)
    tree = dc.fit_tree(X, y, depth=2)
    pred = np.array([dc.tree_predict(tree, x) for x in X])
    assert np.mean(pred == y) == 1.0
    names = ["HZ / 1000", "something", "preempt == rt"]
    text = dc.rule_text(tree, names, [False, False, True], ["hwrng_yield", "usleep_range(100, 200)"],
                        "bcm2835_rng_read()")
    assert text.startswith("in `bcm2835_rng_read()`: `usleep_range(100, 200)` while ")
    assert "HZ > 4" in text and "preempt == rt" in text and text.endswith("`hwrng_yield()` otherwise")


def _strip_times(doc):
    if isinstance(doc, dict):
        return {k: _strip_times(v) for k, v in doc.items() if not k.endswith("wall_s") and k not in ("out", "files")}
    if isinstance(doc, list):
        return [_strip_times(v) for v in doc]
    return doc


def test_discover_brief_structure_and_oracle(tmp_path, capsys):
    pytest.importorskip("sklearn")
    out = tmp_path / "d"
    # --steps 64 is less than one rollout (8 x 64): PPO trains 512, and the report says so
    code = main(["discover", "--env", "kenv/HwrngWait-v2", "--profile", "balanced", "--steps", "64",
                 "--seeds", "3", "--out", str(out), "--json", "--no-plots"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["env"] == "kenv/HwrngWait-v2" and doc["seeds"] == 3
    [e] = doc["profiles"]
    assert (e["steps_trained"], e["steps_asked"], e["rollout_steps"]) == (512, 64, 512)
    assert e["learned"]["train"]["steps"] == 512 and e["learned"]["policy"] == "PPO (512 steps)"
    assert "PPO trained 512 steps: 1 whole rollout of n_envs x n_steps = 8 x 64 = 512 (--steps 64 rounded up" \
        in (out / "discover.md").read_text()
    for k in ("profile", "patched", "best_static", "learned", "rule", "rule_agreement", "beats_patch",
              "beats_best_static"):
        assert k in e, k
    for k in ("patched", "best_static", "learned"):
        for pk in POLICY_KEYS:
            assert pk in e[k], (k, pk)
        assert len(e[k]["returns"]) == 3
        assert set(e[k]["components"]) == set(dc.COMPONENTS)
        assert {"bugs", "rcu_stalls", "cpu_burned"} <= set(e[k]["counters"])
    # the best static action without BUGs, stalls, spinning or a refused choice: here the patch
    # (usleep_range, which wins, is not cancellable through rng->dying)
    assert e["best_accepted"]["policy"] == "hwrng_yield"
    assert isinstance(e["beats_patch"], bool) and isinstance(e["beats_best_static"], bool)
    assert 0.0 <= e["rule_agreement"] <= 1.0 and e["rule"].startswith("in `bcm2835_rng_read()`: ")
    # the oracle is a max over a set that holds the patch: at least as good on the episodes it was chosen on
    sel = e["best_static"]["selection"]
    assert e["patched"]["policy"] == "hwrng_yield" and "hwrng_yield" in sel
    assert sel[e["best_static"]["policy"]]["mean"] >= sel["hwrng_yield"]["mean"]
    assert sel[e["best_static"]["policy"]]["mean"] == max(v["mean"] for v in sel.values())
    # the same episodes for every policy: paired differences are the differences of the returns
    d = e["comparisons"]["best_static - patched"]["mean_diff"]
    assert d == pytest.approx(e["best_static"]["return_mean"] - e["patched"]["return_mean"])
    for f in ("discover.json", "discover.md", "static.json", dc.ARGS_FILE):
        assert (out / f).is_file()
    # a rule that agrees with the network on few states is said to: a warning line, a flag in --json
    assert e["rule_agreement_low"] == (e["rule_agreement"] < dc.RULE_AGREEMENT_MIN)
    assert doc["criteria"]["rule_agreement_min"] == dc.RULE_AGREEMENT_MIN
    fields = ("env", "actions", "seeds", "out", "profiles")
    for agreement in (0.013, 0.95):
        low = {**e, "rule_agreement": agreement, "rule_agreement_low": agreement < dc.RULE_AGREEMENT_MIN}
        res = dc.DiscoverResult(**{**{k: doc[k] for k in fields}, "profiles": [low]})
        text, md = res.format_text(), dc.format_markdown(res)
        warned = [line for line in text.splitlines() if line.startswith("warning: the rule agrees")]
        assert len(warned) == (agreement < 0.8) and ("warning: the rule" in md) == (agreement < 0.8)
        assert not warned or ("1.3%" in warned[0] and "--seeds" in warned[0])
    assert not (out / "discover.png").exists()
    # a rerun reads everything back (nothing retrained) and gives the same report
    assert main(["discover", "--env", "kenv/HwrngWait-v2", "--profile", "balanced", "--steps", "64",
                 "--seeds", "3", "--out", str(out), "--json", "--no-plots"]) == 0
    assert _strip_times(json.loads(capsys.readouterr().out)) == _strip_times(doc)


def _cmd(out, steps=4096):
    return [sys.executable, "-m", "kenv.cli", "discover", "--env", "kenv/HwrngWait-v2", "--profile", "balanced",
            "--steps", str(steps), "--seeds", "3", "--out", str(out), "--json"]


@pytest.mark.slow
def test_discover_resumes_after_a_kill_with_the_same_result(tmp_path):
    """A real SIGKILL mid-training, a rerun, and the same discover.json as a run never
    interrupted (wall times aside)."""
    pytest.importorskip("sklearn")
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    killed = tmp_path / "killed"
    p = subprocess.Popen(_cmd(killed), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    ckpts = killed / "balanced" / "train" / "checkpoints"
    t0 = time.monotonic()
    while time.monotonic() - t0 < 240 and p.poll() is None:
        if ckpts.is_dir() and any(f.startswith("model_") and f.endswith(".zip") for f in os.listdir(ckpts)):
            break
        time.sleep(0.05)
    assert p.poll() is None, "the run ended before its first checkpoint: nothing to kill"
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    assert not (killed / "discover.json").exists() and not (killed / "balanced" / "learned.json").exists()
    resumed = subprocess.run(_cmd(killed), capture_output=True, text=True, env=env, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    fresh = subprocess.run(_cmd(tmp_path / "fresh"), capture_output=True, text=True, env=env, timeout=600)
    assert fresh.returncode == 0, fresh.stderr
    a, b = json.loads(resumed.stdout), json.loads(fresh.stdout)
    assert a["profiles"][0]["learned"]["train"]["steps"] == 4096
    assert _strip_times(a) == _strip_times(b)


@pytest.mark.parametrize("flag,value", [
    ("--env", "bogus"), ("--profile", "bogus"), ("--actions", "bogus"), ("--steps", "0"), ("--steps", "x"),
    ("--seeds", "1"), ("--seeds", "x"), ("--train-seed", "-1"), ("--out", "AFILE"), ("--out", ""),
])
def test_bad_values_exit_2_with_one_line(flag, value, tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    args = {"--env": "kenv/HwrngWait-v2", "--out": str(tmp_path / "o")}
    args[flag] = str(tmp_path / "afile") if value == "AFILE" else value
    argv = ["discover", "--profile", "balanced"] + [x for kv in args.items() for x in kv]
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and flag in err[0], err


def test_seeds_has_one_range_in_every_message_and_the_help(tmp_path, capsys):
    """--seeds 0 (below 1) and 1 (below 2) used to give two ranges (1..1e9 and 2..10000)."""
    allowed = set()
    for v in ("0", "1", "10001", "x"):
        with pytest.raises(SystemExit):
            main(["discover", "--env", "kenv/HwrngWait-v2", "--seeds", v, "--out", str(tmp_path / "o")])
        [line] = capsys.readouterr().err.strip().splitlines()
        allowed.add(line.split("allowed: ", 1)[1])
    with pytest.raises(ConfigError) as e:   # the Python API says the same
        dc.check_seeds(1)
    allowed.add(e.value.allowed)
    assert allowed == {dc.SEEDS_ALLOWED} and "2..10000" in dc.SEEDS_ALLOWED
    with pytest.raises(SystemExit):
        main(["discover", "--help"])
    assert "2..10000" in " ".join(capsys.readouterr().out.split())
    assert dc.seeds_arg("2") == 2 and dc.seeds_arg(str(dc.MAX_SEEDS)) == dc.MAX_SEEDS
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("flag,value", [("--steps", "1024"), ("--train-seed", "1"), ("--actions", "default")])
def test_a_rerun_with_other_training_flags_is_refused_before_any_work(tmp_path, capsys, flag, value):
    """The state a first run (--steps 512, train seed 0, extended actions) leaves in
    <out>/balanced/train is its run.yaml; a rerun with another training flag is refused
    with one line naming --out, before the static phase writes anything."""
    pytest.importorskip("sklearn")
    import yaml

    out = tmp_path / "d"
    first = {"--steps": "512", "--train-seed": "0", "--actions": "extended"}
    acts = dc.action_set("kenv/HwrngWait-v2", "extended")
    cfg, targs = dc.train_setup("kenv/HwrngWait-v2", "balanced", acts, 0, 512, str(out))
    os.makedirs(targs.out)
    (tmp_path / "d" / "balanced" / "train" / "run.yaml").write_text(
        yaml.safe_dump({"env": "kenv/HwrngWait-v2", "fingerprint": dc.fingerprint(cfg, 0, targs)}))
    # the same flags are the first run's: nothing refused
    dc.check_trainings("kenv/HwrngWait-v2", ["balanced"], acts, 0, 512, str(out))
    argv = {**first, flag: value, "--env": "kenv/HwrngWait-v2", "--profile": "balanced", "--seeds": "2",
            "--out": str(out)}
    with pytest.raises(SystemExit) as e:
        main(["discover"] + [x for kv in argv.items() for x in kv] + ["--no-plots"])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and "--out" in err[0] and "--steps, --actions" in err[0], err
    assert sorted(set(os.listdir(out)) - {".lock"}) == ["balanced"]   # no static.json: nothing was done


@pytest.mark.parametrize("flag,value,old", [("--profile", "latency", "'balanced'"), ("--seeds", "3", "2")])
@pytest.mark.parametrize("record", ["args file", "discover.json"])
def test_a_rerun_with_another_profile_or_seeds_is_refused_before_any_work(tmp_path, capsys, flag, value, old,
                                                                         record):
    """A first run (--profile balanced --seeds 2) leaves its flags in <out>/discover_args.json
    (a directory from before it: its discover.json); a rerun into it with another --profile
    or --seeds used to run and leave a discover.json of the new run only.  It is refused
    with one line naming the flag, both values and another --out, before any work."""
    pytest.importorskip("sklearn")
    out = tmp_path / "d"
    out.mkdir()
    if record == "args file":
        (out / dc.ARGS_FILE).write_text(json.dumps({"profile": "balanced", "seeds": 2}))
    else:
        (out / "discover.json").write_text(json.dumps({"seeds": 2, "profiles": [{"profile": "balanced"}]}))
    before = sorted(os.listdir(out))
    dc.check_same_run(str(out), "balanced", ["balanced"], 2)   # the same flags: nothing refused
    argv = {"--env": "kenv/HwrngWait-v2", "--profile": "balanced", "--seeds": "2", "--steps": "512",
            "--out": str(out), flag: value}
    with pytest.raises(SystemExit) as e:
        main(["discover"] + [x for kv in argv.items() for x in kv] + ["--no-plots"])
    [line] = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and line.startswith(f"kenv discover: error: {flag}: got "), line
    assert value in line and old in line and "another --out" in line, line
    assert sorted(set(os.listdir(out)) - {".lock"}) == before   # nothing was done


def test_a_rerun_with_the_same_profile_file_by_another_path_is_not_refused(tmp_path, monkeypatch):
    """--profile configs/x.yaml, then ./configs/x.yaml or its absolute path: the same file,
    the same run.  It used to be refused as another --profile (compared as typed), and
    its training as made with other flags (the path typed was in the fingerprint).
    Another file of the same name is still another profile."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").mkdir()
    (tmp_path / "other").mkdir()
    text = "name: x\nweights: {entropy: 1, throughput: 1, latency: 2, rcu_stall: 5, bug: 10, spin: 1}\n"
    (tmp_path / "configs" / "x.yaml").write_text(text)
    (tmp_path / "other" / "x.yaml").write_text(text)
    out = tmp_path / "d"
    out.mkdir()
    same = ["./configs/x.yaml", str(tmp_path / "configs" / "x.yaml"), "configs/../configs/x.yaml"]
    # the args file of a first run, as written now and as written before it held "profile_file"
    for first in (dc.run_args("configs/x.yaml", 2), {"profile": "configs/x.yaml", "seeds": 2}):
        (out / dc.ARGS_FILE).write_text(json.dumps(first))
        for p in same:
            dc.check_same_run(str(out), p, [p], 2)
        with pytest.raises(ConfigError) as e:
            dc.check_same_run(str(out), "other/x.yaml", ["other/x.yaml"], 2)
        assert e.value.field == "--profile" and "'configs/x.yaml'" in str(e.value), str(e.value)
    cfg, targs = dc.train_setup("kenv/HwrngWait-v2", "configs/x.yaml", None, 0, 512, str(out))
    for p in same:
        cfg2, targs2 = dc.train_setup("kenv/HwrngWait-v2", p, None, 0, 512, str(out))
        assert targs2.out == targs.out and dc.fingerprint(cfg2, 0, targs2) == dc.fingerprint(cfg, 0, targs)


@pytest.mark.parametrize("env_id,steps,budget", [
    ("kenv/HwrngWait-v2", 1, 512), ("kenv/HwrngWait-v2", 64, 512), ("kenv/HwrngWait-v2", 512, 512),
    ("kenv/HwrngWait-v2", 600, 1024), ("kenv/Kernel-v3", 300, 512), ("kenv/KernelBoot-v0", 256, 256),
    ("kenv/Raid6Bench-v3", None, 10240),
])
def test_steps_round_up_to_whole_rollouts_before_training(env_id, steps, budget, tmp_path):
    """The training budget is --steps rounded up to whole rollouts (n_envs x n_steps), set
    before training: a lin_ schedule then ends at 0 at the last step trained instead of
    going negative past a budget PPO overshoots."""
    cfg, _ = dc.train_setup(env_id, "balanced", None, 0, steps, str(tmp_path))
    assert cfg.n_timesteps == budget and cfg.n_timesteps % dc.rollout_steps(cfg) == 0
    b = dc.training_budget(env_id, steps)
    assert b["steps_asked"] == steps and b["rollout_steps"] == dc.rollout_steps(cfg)
    assert ("rounded up" in dc.training_text({**b, "steps_trained": budget})) == (steps not in (None, budget))


def test_steps_has_one_range_in_every_message(tmp_path, capsys):
    """--steps 0 was argparse's generic count (1..1e9), discover(steps=...) said 1..1e12."""
    allowed = set()
    for v in ("0", str(dc.MAX_TIMESTEPS + 1), "x"):
        with pytest.raises(SystemExit):
            main(["discover", "--env", "kenv/HwrngWait-v2", "--steps", v, "--out", str(tmp_path / "o")])
        [line] = capsys.readouterr().err.strip().splitlines()
        allowed.add(line.split("allowed: ", 1)[1])
    for v in (0, 1.5, True):
        with pytest.raises(ConfigError) as e:
            dc.check_args("kenv/HwrngWait-v2", "balanced", "extended", v, 2)
        allowed.add(e.value.allowed)
    assert allowed == {dc.STEPS_ALLOWED} and dc.steps_arg("1") == 1
    assert not (tmp_path / "o").exists()


def test_without_scikit_learn_a_clear_error_names_the_extra(monkeypatch, tmp_path, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "sklearn" else real(name, *a))
    with pytest.raises(SystemExit) as e:
        main(["discover", "--env", "kenv/HwrngWait-v2", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and "kenv-gym[discover]" in err[0], err
    assert not (tmp_path / "o").exists()   # nothing started
