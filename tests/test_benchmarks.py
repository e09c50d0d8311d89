"""The benchmark and search scripts' own runs and bad input (an argparse error naming the option and the value)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script(path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, env=env, timeout=300)


def _run(*args: str) -> subprocess.CompletedProcess:
    return _script(ROOT / "benchmarks" / "step_kinds.py", *args)


@pytest.mark.parametrize("args, named", [
    (["--by", "mixs"], "--by: 'mixs' is in no selected env's info; allowed: action_name"),
    (["--steps", "0"], "--steps and --rounds must be >= 1"),
    (["--env", "kenv/Nope-v0"], "--env: unknown env 'kenv/Nope-v0'; allowed: kenv/RandomMix-v2"),
])
def test_step_kinds_bad_input_is_an_error_naming_the_option(args, named):
    out = _run(*args)
    assert out.returncode == 2
    assert named in out.stderr
    assert out.stdout == ""     # nothing measured or printed before the error


def test_step_kinds_by_a_chosen_field_classifies_the_steps_by_it():
    out = _run("--env", "kenv/Raid6Bench-v3", "--by", "action_name", "--steps", "50", "--warmup", "0", "--rounds", "1")
    assert out.returncode == 0, out.stderr
    assert "kenv/Raid6Bench-v3: env.step" in out.stdout
    assert "migrate_disable" in out.stdout or "preempt_disable" in out.stdout


def test_step_kinds_count_splits_the_steps_by_bytecodes():
    out = _run("--count", "--env", "kenv/Raid6Bench-v3", "--by", "action_name", "--steps", "20", "--warmup", "0")
    assert out.returncode == 0, out.stderr
    head, *rows = out.stdout.splitlines()
    assert head.startswith("kenv/Raid6Bench-v3: env.step ") and head.endswith("bytecodes on average (20 steps after 0)")
    kinds = [r.split()[0] for r in rows[1:]]
    assert kinds and set(kinds) <= {"preempt_disable", "migrate_disable"}
    # each kind's share of the steps, and its bytecodes per step: a count, not zero
    for r in rows[1:]:
        share, per_step = r.split()[1], r.split()[2]
        assert share.endswith("%") and int(per_step.replace(",", "")) > 0


def _search(*args: str) -> subprocess.CompletedProcess:
    return _script(ROOT / "tests" / "search_fast_forward.py", *args)


def test_fast_forward_search_draws_compares_and_replays():
    out = _search("--draws", "4", "--seed", "1")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip().endswith("4 draws: 4 same"), out.stdout
    replay = _search("--replay", "qperf", "kenv/RandomMix-v2", "{'scenario': {'threshold': 64}}", "[0]")
    assert replay.returncode == 0 and replay.stdout.strip() == "same", replay.stdout + replay.stderr


@pytest.mark.parametrize("args, named", [
    (["--minutes", "0"], "--minutes must be > 0"),
    (["--draws", "0"], "--draws must be >= 1, got 0"),
    (["--env", "kenv/Raid6Bench-v3"], "--env: none of ['kenv/Raid6Bench-v3'] runs the chosen fast-forward(s)"),
    (["--replay", "hwrng", "kenv/RandomMix-v2", "{}", "[0]"], "--replay ENV: 'kenv/RandomMix-v2' does not run"),
    (["--replay", "qperf", "kenv/RandomMix-v2", "{'a':", "[0]"], "--replay KWARGS: \"{'a':\" is not a Python dict"),
])
def test_fast_forward_search_bad_input_is_an_error_naming_the_option(args, named):
    out = _search(*args)
    assert out.returncode == 2
    assert named in out.stderr
    assert out.stdout == ""


@pytest.mark.parametrize("script", ["cache_sim.py", "instructions.py"])
@pytest.mark.parametrize("args, named", [
    (["--steps", "0"], "--steps: 0; allowed: an integer >= 1"),
    (["--warmup", "-1"], "--warmup: -1; allowed: an integer >= 0"),
    (["--jobs", "0"], "--jobs: 0; allowed: an integer >= 1"),
    (["--env", "kenv/Nope-v0"], "--env: unknown env 'kenv/Nope-v0'; allowed: kenv/RandomMix-v2"),
])
def test_valgrind_benchmarks_bad_input_is_an_error_naming_the_option(script, args, named):
    out = _script(ROOT / "benchmarks" / script, *args)
    assert out.returncode == 2
    assert named in out.stderr
    assert out.stdout == ""


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_cache_sim_counts_a_step_as_the_difference_of_two_runs():
    """A few steps (CartPole-v1's about 80K instructions each) against whole
    runs of ~600M: the difference holds only if identical runs agree (before
    OpenBLAS's threads were held to one, they differed by up to 15M
    instructions and CartPole's steps came out negative)."""
    out = _script(ROOT / "benchmarks" / "cache_sim.py",
                  "--env", "kenv/Raid6Bench-v3", "--steps", "10", "--warmup", "20", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["id"]: r for r in json.loads(out.stdout)["programs"]}
    assert set(rows) == {"CartPole-v1", "kenv/Raid6Bench-v3"}
    # instructions.py's callgrind counts (docs/speed.md): CartPole-v1 81K, a kenv step 0.3-1.1M
    assert 60_000 < rows["CartPole-v1"]["instructions_per_step"] < 110_000
    assert 150_000 < rows["kenv/Raid6Bench-v3"]["instructions_per_step"] < 1_500_000
    for r in rows.values():
        figures = r["per_1000_instructions"]
        assert set(figures) == {"l1i_misses", "l1d_misses", "indirect_branches",
                                "mispredicted_conditional", "mispredicted_indirect"}
        # each a rate of events that some instructions have: none negative, none over all of them
        assert all(0 < v < 1000 for v in figures.values()), figures


def test_bench_learn_prints_both_ratios_for_the_chosen_env():
    out = _script(ROOT / "benchmarks" / "bench_learn.py", "--env", "kenv/Raid6Bench-v3", "--steps", "512",
                  "--rounds", "1", "--json")
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)["rows"]
    assert row["env"] == "kenv/Raid6Bench-v3"
    assert row["same_ratio"] == pytest.approx(row["same_kenv_sps"] / row["same_cartpole_sps"])
    assert row["shipped_ratio"] == pytest.approx(row["shipped_kenv_sps"] / row["zoo_cartpole_sps"])


@pytest.mark.parametrize("args, named", [
    (["--steps", "0"], "--steps 0 / --rounds 3: both must be >= 1"),
    (["--env", "kenv/Nope-v0"], "--env: unknown env 'kenv/Nope-v0'; allowed: kenv/RandomMix-v2"),
])
def test_bench_learn_bad_input_is_an_error_naming_the_option(args, named):
    out = _script(ROOT / "benchmarks" / "bench_learn.py", *args)
    assert out.returncode == 2
    assert named in out.stderr
    assert out.stdout == ""


def test_ff_extensions_prints_each_extension_off_and_on():
    """benchmarks/ff_extensions.py: per qperf fast-forward extension and env,
    kenv bench's ratio to CartPole with it off and on, and on / off."""
    from kenv.fastforward.qperf_records import EXTENSIONS

    out = _script(ROOT / "benchmarks" / "ff_extensions.py", "--env", "kenv/RandomMix-v2", "--steps", "20",
                  "--warmup", "0", "--repeats", "1")
    assert out.returncode == 0, out.stderr
    head, *rows = out.stdout.splitlines()
    assert head.split() == ["extension", "env", "off", "xCP", "on", "xCP", "on/off"]
    assert [r.split()[:2] for r in rows] == [[x, "kenv/RandomMix-v2"] for x in EXTENSIONS]
    for r in rows:
        off, on, ratio = map(float, r.split()[2:])
        # the ratio is of the unrounded figures; off and on are printed to 3 decimals
        # (half a unit each way: 0.075 -> 0.101 can be 1.31..1.36), the ratio to 3
        slack = on / off * (0.0005 / off + 0.0005 / on) + 0.0005
        assert off > 0 and on > 0 and abs(ratio - on / off) <= slack


def test_ff_extensions_bad_input_is_an_error_naming_the_option():
    out = _script(ROOT / "benchmarks" / "ff_extensions.py", "--steps", "0")
    assert out.returncode == 2
    assert "--steps and --repeats must be >= 1 and --warmup >= 0, got 0, 3 and 1000" in out.stderr
    assert out.stdout == ""


def test_learn_split_parts_add_up_to_the_total_for_each_run():
    out = _script(ROOT / "benchmarks" / "learn_split.py", "--env", "kenv/Raid6Bench-v3", "--steps", "512",
                  "--rounds", "1", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["rows"]
    assert [r["run"] for r in rows] == ["kenv/Raid6Bench-v3", "CartPole-v1, same", "CartPole-v1, Zoo"]
    for r in rows:
        parts = [r[p] for p in ("env step", "reset", "vec env", "policy", "updates")]
        assert sum(parts) == pytest.approx(r["total"], rel=1e-9)
        assert min(parts) >= 0, r        # each part is a difference of nested intervals
        assert r["env step"] > 0 and r["updates"] > 0
    own, same, zoo = rows
    [b] = json.loads(out.stdout)["ratios"]
    assert b["env"] == "kenv/Raid6Bench-v3"
    assert b["same"] == pytest.approx(same["total"] / own["total"])
    assert b["shipped"] == pytest.approx(zoo["total"] / own["total"])
    side = ("env step", "reset", "vec env")
    free = own["total"] - sum(own[p] for p in side) + sum(same[p] for p in side)
    assert b["same if env = CartPole's"] == pytest.approx(same["total"] / free)
    assert b["shipped if env = CartPole's"] == pytest.approx(zoo["total"] / free)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_learn_split_median_parts_add_up_to_the_median_total(n):
    """The table's row of several rounds: its parts add up to its total (medians taken part
    by part came from different rounds: 10 + 1 + 1 = 12 against a median total of 11)."""
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.learn_split import PARTS, median_split
    finally:
        sys.path.remove(str(ROOT))
    runs = [{"total": 12.0, "env step": 10.0, "reset": 0.0, "vec env": 0.0, "policy": 1.0, "updates": 1.0},
            {"total": 11.0, "env step": 1.0, "reset": 0.0, "vec env": 0.0, "policy": 9.0, "updates": 1.0},
            {"total": 13.0, "env step": 1.0, "reset": 0.0, "vec env": 0.0, "policy": 1.0, "updates": 11.0},
            {"total": 10.0, "env step": 2.0, "reset": 2.0, "vec env": 2.0, "policy": 2.0, "updates": 2.0}][:n]
    m = median_split(runs)
    middle = sorted(r["total"] for r in runs)[(n - 1) // 2:n // 2 + 1]    # (the median of the totals)
    assert m["total"] == pytest.approx(sum(middle) / len(middle))
    assert sum(m[p] for p in PARTS) == pytest.approx(m["total"])


@pytest.mark.parametrize("args, named", [
    (["--rounds", "0"], "--steps 4096 / --rounds 0: both must be >= 1"),
    (["--env", "kenv/Nope-v0"], "--env: unknown env 'kenv/Nope-v0'; allowed: kenv/RandomMix-v2"),
    (["--seed", "-1"], "argument --seed: "),     # was gymnasium's traceback after building the envs
])
def test_learn_split_bad_input_is_an_error_naming_the_option(args, named):
    out = _script(ROOT / "benchmarks" / "learn_split.py", *args)
    assert out.returncode == 2
    assert named in out.stderr
    assert out.stdout == ""


def test_second_process_split_steps_the_envs_as_one_process_does():
    """benchmarks/second_process.py's claim: the split vec env gives the trajectories of the
    DummyVecEnv kenv trains with (same seeds, same actions), the seeds the model gives included."""
    import numpy as np
    from stable_baselines3.common.vec_env import DummyVecEnv

    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.second_process import SplitVecEnv, env_fns
    finally:
        sys.path.remove(str(ROOT))
    one, split = DummyVecEnv(env_fns("kenv/RandomMix-v2", 4)), SplitVecEnv(env_fns("kenv/RandomMix-v2", 4), 2)
    try:
        assert one.seed(5) == split.seed(5)        # as the model seeds its env
        assert np.array_equal(one.reset(), split.reset())
        rng = np.random.default_rng(0)
        for _ in range(120):          # episodes of RandomMix-v2 end within it: resets included
            actions = rng.integers(0, one.action_space.n, size=4)
            one.step_async(actions)
            split.step_async(actions)
            a, b = one.step_wait(), split.step_wait()
            for x, y in zip(a[:3], b[:3]):
                assert np.array_equal(x, y)
            assert [i.get("reward_components") for i in a[3]] == [i.get("reward_components") for i in b[3]]
    finally:
        one.close()
        split.close()


def test_second_process_split_needs_an_env_on_each_side_and_closes_once():
    """n_envs 1 (or a split leaving a side empty) is a clear error naming k, not an IndexError
    from an empty DummyVecEnv; closing twice is a no-op, not a broken pipe."""
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.second_process import SplitVecEnv, env_fns
    finally:
        sys.path.remove(str(ROOT))
    for n, k in ((1, 0), (2, 2)):
        with pytest.raises(ValueError, match=rf"^k: {k} envs here of {n}; allowed: 1 to {n - 1}"):
            SplitVecEnv(env_fns("kenv/RandomMix-v2", n), k)
    split = SplitVecEnv(env_fns("kenv/RandomMix-v2", 2), 1)
    split.close()
    split.close()
    assert not split.proc.is_alive()
