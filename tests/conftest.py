"""The rediscovery run starts when the tests are collected, in the background.

tests/test_train.py's 5-of-5 test needs one ``kenv rediscover`` run over every env and
five seeds: 50 training runs and the static tables, about 600 CPU seconds, as much as the
rest of the suite.  Its items are marked ``rediscovery(seeds=N)``; when any is selected,
the run starts here as a user runs it (the CLI, ``--json``) and goes on beside the other
tests, and the fixture ``rediscovered`` waits for its rows.  The rows do not depend on
what runs beside it, nor on the number of workers (each run seeds its own envs and
torch; tests/test_train.py compares one worker with two).

One worker, and the marked items run last: the suite runs on one core, the rediscovery
on the other, and both end at about the same time.  With two workers beside the suite,
three processes shared the two cores until the rediscovery ended and one core was idle
after it (the whole suite on a quiet 2-core machine: 863 s so, 726 s with one worker and
the marked items last).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import NamedTuple

import pytest


class Rediscovery(NamedTuple):
    envs: tuple[str, ...]
    seeds: int
    out: str
    proc: subprocess.Popen


RUN = pytest.StashKey[Rediscovery]()


def pytest_collection_modifyitems(session, config, items):
    """The items that wait for the background run go last (a stable sort: the others keep
    their order)."""
    items.sort(key=lambda item: item.get_closest_marker("rediscovery") is not None)


def pytest_collection_finish(session):
    """After -k and -m deselection: only the items that will run."""
    config = session.config
    marked = [(item.callspec.params["env_id"], item.get_closest_marker("rediscovery").kwargs["seeds"])
              for item in session.items if item.get_closest_marker("rediscovery")]
    if not marked or config.option.collectonly:
        return
    envs = tuple(dict.fromkeys(e for e, _ in marked))
    seeds = max(s for _, s in marked)
    out = tempfile.mkdtemp(prefix="kenv-rediscovery-")
    with open(os.path.join(out, "stdout.json"), "wb") as so, open(os.path.join(out, "stderr.txt"), "wb") as se:
        proc = subprocess.Popen([sys.executable, "-m", "kenv.cli", "rediscover", "--envs", *envs, "--seeds", str(seeds),
                                 "--workers", "1", "--no-plots", "--json", "--out", os.path.join(out, "rd")],
                                stdout=so, stderr=se, stdin=subprocess.DEVNULL, start_new_session=True)
    config.stash[RUN] = Rediscovery(envs, seeds, out, proc)


def pytest_unconfigure(config):
    run = config.stash.get(RUN, None)
    if run is None:
        return
    if run.proc.poll() is None:   # (the session ended first: -x, Ctrl-C)
        os.killpg(run.proc.pid, signal.SIGKILL)
        run.proc.wait()
    shutil.rmtree(run.out, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def sb3_logdir(tmp_path_factory):
    """An SB3 ``learn()`` without a logger of its own (the tests that call SB3 directly)
    makes a directory ``SB3-<time>`` in the system's temporary directory and leaves it
    there (stable_baselines3.common.logger.configure): about ten a suite run.  Theirs go
    under pytest's temporary directory instead (``SB3_LOGDIR``, which SB3 reads first)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SB3_LOGDIR", str(tmp_path_factory.mktemp("sb3")))
        yield


@pytest.fixture(scope="session")
def rediscovered(request) -> dict[str, list[dict]]:
    """The background run's rows per env (waits for it to end)."""
    run = request.config.stash.get(RUN, None)
    if run is None:
        pytest.fail("no background rediscover run: the item is not marked rediscovery")
    rc = run.proc.wait()
    with open(os.path.join(run.out, "stderr.txt"), encoding="utf-8", errors="replace") as f:
        err = f.read()
    if rc != 0:
        pytest.fail(f"kenv rediscover exited {rc}: {err[-2000:]}")
    with open(os.path.join(run.out, "stdout.json"), encoding="utf-8") as f:
        doc = json.load(f)
    rows: dict[str, list[dict]] = {e: [] for e in run.envs}
    for row in doc["rows"]:
        rows[row["env"]].append(row)
    return rows
