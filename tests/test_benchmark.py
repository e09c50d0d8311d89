"""``kenv benchmark`` (issue #41 item 4) through the real CLI, with tiny budgets
(``--n-timesteps 512``): the table's shape, records that ``kenv validate`` accepts
(and a tampered one it refuses), resume after the driver is killed with SIGKILL,
a planted link refused, bad flags one line and exit 2."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from kenv.agents.benchmark import plan
from kenv.agents.jobs import write_cached_doc
from kenv.cli import build_parser, main

ENV = "kenv/HwrngWait-v2"
TINY = ["--envs", ENV, "--seeds", "2", "--n-timesteps", "512", "--workers", "1", "--no-progress"]


def kenv(*argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kenv.cli", *argv], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.getcwd()}, **kw)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(out, --json document) of PPO and DQN on one id, two seeds."""
    out = str(tmp_path_factory.mktemp("bench") / "out")
    r = kenv("benchmark", *TINY, "--algos", "ppo,dqn", "--out", out, "--json")
    assert r.returncode == 0, r.stderr
    return out, json.loads(r.stdout)


def test_the_table_has_a_row_per_algo_and_baseline(run):
    out, doc = run
    rows = doc["rows"]
    assert [(r["env"], r["policy"], r["kind"]) for r in rows] == [
        (ENV, "ppo", "trained"), (ENV, "dqn", "trained"),
        (ENV, "random", "baseline"), (ENV, "patched", "baseline"), (ENV, "oracle", "baseline")]
    for r in rows[:2]:
        assert r["seeds"] == 2 and len(r["seed_returns"]) == 2 and len(r["records"]) == 2
        assert r["return_ci95"] is not None and r["return_ci95"] >= 0
        assert r["return_mean"] == pytest.approx(sum(r["seed_returns"]) / 2)
    by = {r["policy"]: r for r in rows}
    assert by["random"]["score"] == pytest.approx(0.0) and by["oracle"]["score"] == pytest.approx(100.0)
    assert doc["skipped"] == [] and doc["seeds"] == 2 and doc["eval_episodes"] == 10
    md = open(os.path.join(out, "benchmark.md")).read()
    assert md == doc["markdown"]
    assert sum(1 for line in md.splitlines() if line.startswith(f"| {ENV} |")) == 5
    assert json.load(open(os.path.join(out, "benchmark.json")))["rows"] == rows


def test_dqn_is_skipped_where_the_space_is_not_discrete():
    pairs, skipped = plan(["kenv/Kernel-v3", ENV], ["ppo", "dqn"])
    assert pairs == [("kenv/Kernel-v3", "ppo"), (ENV, "ppo"), (ENV, "dqn")]
    assert [(s["env"], s["algo"]) for s in skipped] == [("kenv/Kernel-v3", "dqn")]
    assert "MultiDiscrete" in skipped[0]["why"] and "DQN needs Discrete" in skipped[0]["why"]


def test_every_records_file_validates_and_a_tampered_one_fails(run, tmp_path):
    out, doc = run
    paths = [p for r in doc["rows"] for p in r["records"]]
    assert len(paths) == 4
    for p in paths:
        r = kenv("validate", "--strict", p)   # (its episodes are runs of the id as registered)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "10 of 10 records valid" in r.stdout
    lines = open(paths[0]).read().splitlines()
    rec = json.loads(lines[3])
    rec["return"] += 0.5
    lines[3] = json.dumps(rec, sort_keys=True)
    bad = tmp_path / "tampered.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    r = kenv("validate", str(bad))
    assert r.returncode == 1 and "line 4: FAIL: return" in r.stdout and "9 of 10 records valid" in r.stdout


def test_resume_after_sigkill_redoes_no_finished_job_and_gives_the_same_table(run, tmp_path):
    _, ref = run
    out = str(tmp_path / "out")
    argv = [sys.executable, "-m", "kenv.cli", "benchmark", *TINY, "--algos", "ppo", "--out", out, "--json"]
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    first = os.path.join(out, "ppo", "kenv_HwrngWait-v2", "seed_0", "bench.json")
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not os.path.exists(first) and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.05)
        assert os.path.exists(first), "the first job never finished"
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    assert not os.path.exists(os.path.join(out, "benchmark.json"))   # killed mid-run
    stat = os.stat(first)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    assert "1 finished job(s)" in r.stderr and "1 to run" in r.stderr
    assert f"{ENV} ppo seed 0:" not in r.stderr and f"{ENV} ppo seed 1:" in r.stderr
    assert os.stat(first).st_mtime_ns == stat.st_mtime_ns   # not rewritten
    rows = {r2["policy"]: r2 for r2 in json.loads(r.stdout)["rows"]}
    want = {r2["policy"]: r2 for r2 in ref["rows"]}
    for k in ("ppo", "random", "patched", "oracle"):
        assert (rows[k]["seed_returns"], rows[k]["return_mean"], rows[k]["score"]) == \
            (want[k]["seed_returns"], want[k]["return_mean"], want[k]["score"])


def test_a_link_planted_in_out_is_refused(run, tmp_path):
    out, doc = run
    copy = tmp_path / "out"
    shutil.copytree(out, copy, symlinks=True)
    target = tmp_path / "target.txt"
    target.write_text("the user's own file\n")
    rec = copy / "ppo" / "kenv_HwrngWait-v2" / "seed_1" / "records.jsonl"
    rec.unlink()
    rec.symlink_to(target)
    r = kenv("benchmark", *TINY, "--algos", "ppo,dqn", "--out", str(copy))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--out" in r.stderr and "Traceback" not in r.stderr
    assert target.read_text() == "the user's own file\n"


BAD = {
    "envs": ["bogus", "", ",", "kenv/HwrngWaitControl-v0"],
    "algos": ["bogus", "", "ppo,,a2c", "sac"],
    "seeds": ["0", "-1", "x", "1001"],
    "out": ["AFILE"],
    "workers": ["0", "-1", "x", "100000"],
    "ray": [""],
    "n_timesteps": ["0", "-1", "x", str(10**12 + 1)],
    "seed": ["3"],
}


def _options():
    p = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["benchmark"]
    return [a for a in p._actions if a.option_strings and a.nargs != 0 and not isinstance(a, argparse._HelpAction)]


def test_every_flag_has_bad_values():
    assert sorted(a.dest for a in _options()) == sorted(BAD)


@pytest.mark.parametrize("dest,value", [(d, v) for d, vs in BAD.items() for v in vs])
def test_a_bad_flag_is_one_line_exit_2_and_writes_nothing(dest, value, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "AFILE").write_text("x")
    flag = "--" + dest.replace("_", "-")
    with pytest.raises(SystemExit) as e:
        main(["benchmark", "--envs", ENV, "--n-timesteps", "512", flag, value])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert e.value.code == 2 and len(lines) == 1 and flag in lines[0] and "Traceback" not in err, err
    assert sorted(os.listdir(tmp_path)) == ["AFILE"]


def test_a_rerun_with_other_training_names_the_given_out_and_the_folder_to_delete(run, tmp_path, capsys):
    """A run folder trained with another budget (or an older shipped config) is refused
    before any work: the line names the --out the user gave, not a folder under it, and
    the run folder whose deletion redoes that job."""
    out, _ = run
    copy = str(tmp_path / "copy")
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns(".lock"))
    with pytest.raises(SystemExit) as e:
        main(["benchmark", *TINY[:4], "--n-timesteps", "1024", "--algos", "ppo", "--out", copy, "--workers", "1",
              "--no-progress"])
    [line] = capsys.readouterr().err.strip().splitlines()[-1:]
    assert e.value.code == 2 and line.startswith(f"kenv benchmark: error: --out: got '{copy}';"), line
    run_dir = os.path.join(copy, "ppo", "kenv_HwrngWait-v2", "seed_0")
    assert f"({run_dir} was trained with others; delete that folder to redo its run)" in line, line
    assert "--n-timesteps and shipped training configs" in line and "--config" not in line, line


def _mean_1000(d):
    d["return_mean"] = 1000.0


def _returns_edited(d):
    d["returns"] = [r + 1.0 for r in d["returns"]]
    d["return_mean"] = sum(d["returns"]) / len(d["returns"])


TAMPERED = {
    "a string mean": lambda d: d.update(return_mean="abc"),
    "a mean that is not its returns'": _mean_1000,
    "returns other than its records'": _returns_edited,
    "steps missing a type": lambda d: d.update(steps=None),
    "another seed's result": lambda d: d.update(seed=0),
}


@pytest.mark.parametrize("name", sorted(TAMPERED))
def test_a_damaged_bench_json_is_redone_not_a_traceback_or_a_wrong_table(run, tmp_path, capsys, name):
    """A finished job's bench.json with this run's fingerprint but values it never wrote
    (hand-edited, from another job) is redone: before, a string mean was a traceback and
    an edited mean went into the table (a return of 504.5 and a score of 18450)."""
    out, ref = run
    copy = str(tmp_path / "copy")
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns(".lock"))
    path = os.path.join(copy, "ppo", "kenv_HwrngWait-v2", "seed_1", "bench.json")
    with open(path) as f:
        doc = json.load(f)
    TAMPERED[name](doc)
    with open(path, "w") as f:
        json.dump(doc, f)
    capsys.readouterr()
    assert main(["benchmark", *TINY, "--algos", "ppo,dqn", "--out", copy, "--json"]) in (0, None)
    cap = capsys.readouterr()
    assert f"{path} is not this job's result (" in cap.err and f"{ENV} ppo seed 1:" in cap.err, cap.err
    assert "3 finished job(s)" in cap.err and "1 to run" in cap.err, cap.err
    assert json.loads(cap.out)["rows"] == [{**r, "records": [p.replace(out, copy) for p in r["records"]]}
                                           for r in ref["rows"]]
    with open(path) as f:
        assert json.load(f)["return_mean"] == ref["rows"][0]["seed_returns"][1]   # rewritten by the redone job


def _edited_return(d: str, tmp_path) -> list[dict]:
    with open(os.path.join(d, "records.jsonl")) as f:
        recs = [json.loads(x) for x in f]
    recs[0]["return"] += 50.0
    return recs


def _another_ids_episodes(d: str, tmp_path) -> list[dict]:
    path = tmp_path / "other.jsonl"
    r = kenv("evaluate", "--env", "kenv/Raid6Bench-v3", "--policy", "patched", "--episodes", "10", "--seed", "0",
             "--record", str(path))
    assert r.returncode == 0, r.stderr
    return [json.loads(x) for x in path.read_text().splitlines()]


def _another_policys_episodes(d: str, tmp_path) -> list[dict]:
    """This id's ten evaluation episodes, each valid, played by a baseline (not the job's model)."""
    with open(os.path.join(d, "records.jsonl")) as f:
        mine = [json.loads(x)["return"] for x in f]
    for policy in ("oracle", "random", "original"):
        path = tmp_path / f"{policy}.jsonl"
        r = kenv("evaluate", "--env", ENV, "--policy", policy, "--episodes", "10", "--seed", "0", "--record", str(path))
        assert r.returncode == 0, r.stderr
        recs = [json.loads(x) for x in path.read_text().splitlines()]
        if [x["return"] for x in recs] != mine:
            return recs
    raise AssertionError("every baseline plays the model's returns")


@pytest.mark.parametrize("records, says", [
    (_edited_return, "records.jsonl fails kenv validate --strict: line 1: return"),
    (_another_ids_episodes, "records.jsonl is not the 10 evaluation episodes of kenv/HwrngWait-v2"),
    # (valid episodes of this id, each once: only the job's model can tell they are not its own)
    (_another_policys_episodes, "its returns are not its model.zip's on the evaluation episodes")])
def test_a_finished_job_whose_records_are_not_its_episodes_is_redone(run, tmp_path, capsys, records, says):
    """A finished job's return edited alike in bench.json (its digest recomputed) and
    records.jsonl (they agree) went into the table unreplayed (a return of +50 and its score); now its records file
    must pass kenv validate --strict as the evaluation episodes of the job's id, else the job is redone (another id's
    ten episodes, which replay, passed until that was checked)."""
    out, ref = run
    copy = str(tmp_path / "copy")
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns(".lock"))
    d = os.path.join(copy, "ppo", "kenv_HwrngWait-v2", "seed_1")
    recs = records(d, tmp_path)
    with open(os.path.join(d, "records.jsonl"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in recs))
    with open(os.path.join(d, "bench.json")) as f:
        doc = json.load(f)
    doc["returns"] = [r["return"] for r in recs]
    doc["return_mean"] = sum(doc["returns"]) / len(doc["returns"])
    doc.pop("digest")
    write_cached_doc(os.path.join(d, "bench.json"), doc)   # (its digest is no secret: anyone recomputes it)
    capsys.readouterr()
    assert main(["benchmark", *TINY, "--algos", "ppo,dqn", "--out", copy, "--json"]) in (0, None)
    cap = capsys.readouterr()
    assert says in cap.err, cap.err
    assert "3 finished job(s)" in cap.err and "1 to run" in cap.err, cap.err
    assert json.loads(cap.out)["rows"] == [{**r, "records": [p.replace(out, copy) for p in r["records"]]}
                                           for r in ref["rows"]]
