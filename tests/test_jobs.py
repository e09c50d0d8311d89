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
