"""kenv.agents.jobs: read_tree / write_tree (how a Ray job's run comes back to the driver,
which puts it in place all or nothing), and a failed job's one-line error in the CLI."""

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kenv.agents.files import LOCK_NAME, TMP_PREFIX
from kenv.agents.jobs import job_dir, read_tree, write_tree

names = st.lists(st.sampled_from(["a", "b", "c/d", "c/e", "f/g/h"]), unique=True, max_size=5)


@settings(max_examples=30, deadline=None)
@given(old=names, new=names, data=st.binary(max_size=64))
def test_write_tree_makes_the_dir_exactly_the_tree(tmp_path_factory, old, new, data):
    root = str(tmp_path_factory.mktemp("t") / "run")
    if old:
        write_tree(root, {n: b"old" for n in old})
    tree = {n: data + n.encode() for n in new}
    write_tree(root, tree)
    assert read_tree(root) == tree
    assert not [f for f in os.listdir(os.path.dirname(root)) if f.startswith(TMP_PREFIX)]


def test_read_tree_leaves_out_the_lock_and_temporary_files(tmp_path):
    for n in (LOCK_NAME, TMP_PREFIX + "x", "keep"):
        (tmp_path / n).write_bytes(b"1")
    assert read_tree(str(tmp_path)) == {"keep": b"1"}
    assert read_tree(str(tmp_path / "absent")) == {}


def test_an_interrupted_write_tree_leaves_the_old_run_and_the_next_one_clears_it(tmp_path, monkeypatch):
    root = str(tmp_path / "run")
    write_tree(root, {"model.zip": b"old"})

    def fail(*a):
        raise OSError("disk full")

    with monkeypatch.context() as m:
        m.setattr(os, "rename", fail)
        with pytest.raises(OSError):
            write_tree(root, {"model.zip": b"new", "learned.json": b"{}"})
    assert read_tree(root) == {"model.zip": b"old"}   # untouched
    write_tree(root, {"model.zip": b"new"})
    assert read_tree(root) == {"model.zip": b"new"}
    assert os.listdir(tmp_path) == ["run"]   # the staging dir the failed call left is gone


def test_job_dir_is_the_run_dir_or_a_temporary_copy_of_prior(tmp_path):
    with job_dir(str(tmp_path)) as d:
        assert d == str(tmp_path)
    with job_dir(None, {"c/d": b"x"}) as d:
        assert read_tree(d) == {"c/d": b"x"} and not d.startswith(str(tmp_path))
    assert not os.path.exists(d)


def test_a_failed_job_is_one_line_from_the_cli(tmp_path, monkeypatch, capsys):
    import kenv.agents.rediscover as rd
    from kenv.cli import main
    from kenv.errors import JobError

    def fail(*a, **k):
        raise JobError("job seed_job kenv/HwrngWait-v2 0 failed on Ray after 3 retries: WorkerCrashedError")

    monkeypatch.setattr(rd, "run_jobs", fail)
    with pytest.raises(SystemExit) as e:
        main(["rediscover", "--envs", "kenv/HwrngWait-v2", "--out", str(tmp_path), "--no-plots"])
    err = capsys.readouterr().err
    assert e.value.code == 1 and "Traceback" not in err
    assert err.endswith("error: job seed_job kenv/HwrngWait-v2 0 failed on Ray after 3 retries: "
                        "WorkerCrashedError\n"), err


# ------------------------------------------------------------------ cached job results
def test_a_cached_result_reads_back_as_written_and_an_edited_value_is_not_it(tmp_path):
    """write_cached_doc / check_cached: a result reads back as written (numpy values, int
    keys, NaN included), without its digest; a value edited in the file, of its type or
    another, makes it no result (the job is redone), and says why."""
    import json

    import numpy as np

    from kenv.agents.jobs import DIGEST_KEY, cached_doc, check_cached, write_cached_doc

    path = str(tmp_path / "learned.json")
    doc = {"fingerprint": "fp", "steps": np.int64(512), "mean": np.float64(1.25), "nan": float("nan"),
           "by": {10: [1, 2], 2: {"x": np.bool_(True)}}, "choices": [{"a": np.array([1.5, 2.0])}]}
    write_cached_doc(path, doc)
    assert DIGEST_KEY not in doc
    back, why = check_cached(path, ("steps", "choices"), "fp")
    assert why == "" and DIGEST_KEY not in back
    assert back["steps"] == 512 and back["choices"] == [{"a": [1.5, 2.0]}] and back["by"]["10"] == [1, 2]
    assert cached_doc(path, ("steps",), "other fp") is None and check_cached(path, (), "other fp")[1] == ""
    assert check_cached(path, ("nosuch",), "fp") == (None, "keys missing: nosuch")
    for edit in ({"steps": 513}, {"steps": "512"}, {"choices": 5}, {"mean": None}, {"extra": 1}):
        with open(path) as f:
            on_disk = json.load(f)
        with open(path, "w") as f:
            json.dump({**on_disk, **edit}, f)
        got, why = check_cached(path, ("steps",), "fp")
        assert got is None and "digest" in why, edit
        write_cached_doc(path, doc)
    with open(path) as f:
        on_disk = json.load(f)
    del on_disk[DIGEST_KEY]   # (a file without one: not written by write_cached_doc)
    with open(path, "w") as f:
        json.dump(on_disk, f)
    assert cached_doc(path, (), "fp") is None


def _edit_json(path, edit):
    import json

    with open(path) as f:
        doc = json.load(f)
    edit(doc)
    with open(path, "w") as f:
        json.dump(doc, f)


def test_a_rediscover_cache_with_an_edited_value_is_redone_not_a_traceback(tmp_path):
    """A learned.json or baselines.json with the run's fingerprint and keys but a value of
    another type (hand-edited, damaged) was read as it stood: a TypeError or ValueError
    traceback from the summary.  It is redone, and the table is the first run's."""
    from kenv.agents import rediscover as rd

    kw = dict(envs=["kenv/HwrngWait-v2"], seeds=1, n_timesteps=512, plots=False, workers=1, log=lambda s: None)
    out = str(tmp_path / "rd")
    first = rd.rediscover(out=out, **kw).to_dict()["rows"]
    _edit_json(os.path.join(out, "kenv_HwrngWait-v2", "seed_0", "learned.json"), lambda d: d.update(choices=5))
    _edit_json(os.path.join(out, "kenv_HwrngWait-v2", "baselines.json"), lambda d: d.update(patched=7))
    again = rd.rediscover(out=out, **kw).to_dict()["rows"]
    _edit_json(os.path.join(out, "kenv_HwrngWait-v2", "seed_0", "learned.json"), lambda d: d.update(return_mean=1e3))
    third = rd.rediscover(out=out, **kw).to_dict()["rows"]
    for r in first + again + third:
        r.pop("wall_s")
    assert again == first and third == first


def test_a_discover_cache_with_an_edited_value_is_redone_not_a_traceback(tmp_path):
    """static.json, static_heldout.json and <profile>/learned.json likewise (each was a
    traceback with a value of another type)."""
    from kenv.agents import discover as dc

    kw = dict(profile="balanced", steps=64, seeds=2, plots=False, workers=1, log=lambda s: None)
    out = str(tmp_path / "dc")

    def rows(res):
        doc = res.to_dict()
        return json.dumps([{k: v for k, v in e.items() if "wall" not in k} for e in doc["profiles"]], sort_keys=True)

    import json

    first = rows(dc.discover("kenv/HwrngWait-v2", out=out, **kw))
    _edit_json(os.path.join(out, "static.json"), lambda d: d.update(actions=5))
    assert rows(dc.discover("kenv/HwrngWait-v2", out=out, **kw)) == first
    _edit_json(os.path.join(out, "static_heldout.json"), lambda d: d["actions"].update({"hwrng_yield": 3}))
    _edit_json(os.path.join(out, "balanced", "learned.json"), lambda d: d.update(train=1))
    assert rows(dc.discover("kenv/HwrngWait-v2", out=out, **kw)) == first
