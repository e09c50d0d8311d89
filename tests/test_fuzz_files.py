"""Fuzzing the files kenv reads and the folders it writes into (issue #43).

Each case damages one input and runs it through kenv's real entry point
(``kenv.cli.main``, in-process) or ``gym.make``:

- ``yaml``: a reward profile (``kenv evaluate --profile``), a scenario mix
  (``gym.make(id, scenario=PATH)``) and a training config (``kenv train
  --config``), each a shipped file cut, spliced with YAML fragments (aliases,
  alias bombs, deep nesting, tags that would run code, odd numbers) or
  byte-flipped;
- ``model``: a saved SB3 zip with a member flipped, cut, dropped or its
  ``data`` fields replaced (by junk, or by a pickle that would create a file),
  through ``kenv evaluate --model`` and ``kenv trace env --model``;
- ``run``: a finished ``kenv train`` folder with one entry replaced by a
  symbolic link (to a file or folder outside), a FIFO, a folder, or cut,
  flipped or deleted, through ``kenv train --resume`` and ``kenv evaluate
  --model RUN``.

A case passes when it ends in time (a timer raises otherwise), ends with exit
status 0, 1 or 2 (never an exception: that would be a traceback), says what
was wrong in one line when the status is not 0, and changes nothing outside
the folder it was given: the files the links point to, and a marker a pickle
would create, are checked after every case.  Bounded for the suite; the long
run (the note's figures):

    KENV_FUZZ_FILES_MINUTES=10 KENV_FUZZ_REPORT=/tmp/fuzz-files.json nice python -m pytest -q tests/test_fuzz_files.py

(per target: cases run, exit statuses, seconds; a failing case is printed with
what was done to the file).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import io
import json
import os
import random
import shutil
import signal
import time
import zipfile
from collections import Counter
from pathlib import Path

import cloudpickle
import gymnasium as gym
import pytest

import kenv  # noqa: F401  (registers the ids)
from kenv.cli import main
from kenv.errors import ConfigError

ENV = "kenv/HwrngWait-v2"
CONFIGS = Path(kenv.__file__).resolve().parent.parent / "configs"
#: seconds one case may take before it counts as a hang
CASE_TIMEOUT_S = 60
#: the long run: minutes per target (the suite: a few cases each)
MINUTES = float(os.environ.get("KENV_FUZZ_FILES_MINUTES", "0"))
SUITE_CASES = 6
CONTENT = b"a file outside --out\n"

REPORT: dict[str, Counter] = {}


@atexit.register
def _report():
    path = os.environ.get("KENV_FUZZ_REPORT")
    if path and REPORT:
        Path(path).write_text(json.dumps({k: dict(v) for k, v in REPORT.items()}, indent=1, sort_keys=True))


class _Touch:
    """Unpickling this creates ``path`` (what a malicious model would do)."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


class _Timeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _Timeout()


# --------------------------------------------------------------------------- mutations
#: fragments spliced into YAML text: aliases, bombs, nesting, tags, numbers, junk
FRAGMENTS = (
    "&a [*a]", "*undefined", "!!python/object/apply:os.system ['touch MARKER']",
    "!!python/name:os.system", "{", "}", "[", "- ", ": ", ":\n  - x", "\x00", "\t", "1e999", "-1e999", ".nan",
    "9" * 400, "0x7f", "~", "null", "''", "?", "%YAML 1.1\n", "---\n", "...\n", "<<: *a", "&a x",
    "l0: &l0 [x,x,x,x,x,x,x,x,x]\nl1: &l1 [*l0,*l0,*l0,*l0,*l0,*l0,*l0,*l0,*l0]\n"
    "l2: &l2 [*l1,*l1,*l1,*l1,*l1,*l1,*l1,*l1,*l1]\nl3: &l3 [*l2,*l2,*l2,*l2,*l2,*l2,*l2,*l2,*l2]\n"
    "l4: &l4 [*l3,*l3,*l3,*l3,*l3,*l3,*l3,*l3,*l3]\nl5: [*l4,*l4,*l4,*l4,*l4,*l4,*l4,*l4,*l4]\n",
    "[" * 200 + "]" * 200, "{a: " * 100 + "1" + "}" * 100, "\ufeff", "caf\xe9", "\u2028",
    "render_mode: human", "profile: /dev/zero", "scenario: /dev/stdin", "n_timesteps: -1", "n_envs: 100000",
)


def mutate_text(rng: random.Random, text: str) -> tuple[str, list[str]]:
    """``text`` with 1-3 random edits, and what they were."""
    done = []
    for _ in range(rng.randint(1, 3)):
        op = rng.choice(("cut", "splice", "splice", "replace_line", "flip"))
        i = rng.randrange(len(text) + 1)
        if op == "cut":
            text = text[:i]
        elif op == "splice":
            f = rng.choice(FRAGMENTS)
            text = text[:i] + f + text[i:]
            op += f" {f[:30]!r}"
        elif op == "replace_line":
            lines = text.splitlines() or [""]
            j = rng.randrange(len(lines))
            f = rng.choice(FRAGMENTS)
            lines[j] = lines[j].split(":")[0] + ": " + f if ":" in lines[j] else f
            text = "\n".join(lines) + "\n"
            op += f" {j} {f[:30]!r}"
        else:
            b = bytearray(text.encode("utf-8"))
            if b:
                k = rng.randrange(len(b))
                b[k] ^= 1 << rng.randrange(8)
            text = b.decode("utf-8", "replace")
        done.append(f"{op}@{i}")
    return text, done


def mutate_zip(rng: random.Random, src: str, dst: str, marker: str) -> list[str]:
    """A copy of the model zip ``src`` at ``dst`` with one member damaged or replaced."""
    with zipfile.ZipFile(src) as z:
        entries = {n: z.read(n) for n in z.namelist()}
    name = rng.choice(sorted(entries))
    op = rng.choice(("flip", "cut", "drop", "junk_field", "pickle_field", "whole_cut"))
    if op in ("junk_field", "pickle_field"):
        name = "data"
        data = json.loads(entries["data"])
        field = rng.choice(sorted(data))
        if op == "pickle_field":
            payload = base64.b64encode(cloudpickle.dumps(_Touch(marker))).decode()
            data[field] = {":type:": "<class 'object'>", ":serialized:": payload}
        else:
            data[field] = rng.choice((None, -1, 1e308, "x" * 1000, [1, [2, [3]]], {"a": {}}, True, []))
        entries["data"] = json.dumps(data).encode()
    elif op == "flip" and entries[name]:
        b = bytearray(entries[name])
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        entries[name] = bytes(b)
    elif op == "cut":
        entries[name] = entries[name][:rng.randrange(len(entries[name]) + 1)]
    elif op == "drop":
        del entries[name]
    with zipfile.ZipFile(dst, "w") as z:
        for n, b in entries.items():
            z.writestr(n, b)
    if op == "whole_cut":
        raw = Path(dst).read_bytes()
        Path(dst).write_bytes(raw[:rng.randrange(len(raw))])
    return [f"{op} {name}"]


def damage_folder(rng: random.Random, root: Path, outside: Path) -> list[str]:
    """One entry of the run folder ``root`` replaced by a link, a FIFO, a folder, or damaged."""
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    p = rng.choice(files)
    op = rng.choice(("link", "link", "link_dir", "fifo", "dir", "cut", "flip", "delete"))
    if op in ("link", "link_dir", "fifo", "dir", "delete"):
        p.unlink()
    if op == "link":
        p.symlink_to(outside / "target.txt")
    elif op == "link_dir":
        p.symlink_to(outside)
    elif op == "fifo":
        os.mkfifo(p)
    elif op == "dir":
        p.mkdir()
    elif op == "cut":
        raw = p.read_bytes()
        p.write_bytes(raw[:rng.randrange(len(raw) + 1)])
    elif op == "flip":
        raw = bytearray(p.read_bytes())
        if raw:
            raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
        p.write_bytes(bytes(raw))
    return [f"{op} {p.relative_to(root)}"]


# --------------------------------------------------------------------------- one case
def _outside_state(outside: Path) -> dict:
    return {p.name: (p.read_bytes() if p.is_file() else None) for p in sorted(outside.iterdir())}


def run_case(target: str, call, outside: Path, marker: str, what: list[str]) -> str | None:
    """Run ``call`` (an argv for ``kenv`` or a function) under the timer; None if it
    passed, else what went wrong (with ``what`` was done to the input)."""
    before = _outside_state(outside)
    err, out = io.StringIO(), io.StringIO()
    code: object = None
    t0 = time.monotonic()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CASE_TIMEOUT_S)
    problem = None
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            if callable(call):
                try:
                    call()
                    code = 0
                except ConfigError as e:
                    code, err_text = 2, str(e)
                    err.write(" ".join(err_text.split()) + "\n")
            else:
                try:
                    code = main(list(call))
                except SystemExit as e:
                    code = e.code
                code = 0 if code is None else code
    except _Timeout:
        problem = f"hang (> {CASE_TIMEOUT_S} s)"
    except Exception as e:   # an exception main() let through: a traceback for the user
        problem = f"traceback: {type(e).__name__}: {str(e)[:300]}"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    stats = REPORT.setdefault(target, Counter())
    stats["cases"] += 1
    stats["seconds"] += round(time.monotonic() - t0, 3)
    if problem is None:
        stats[f"exit {code}"] += 1
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        if code not in (0, 1, 2):
            problem = f"exit status {code!r}"
        elif code != 0 and not lines:
            problem = "non-zero exit without a message"
        elif code != 0 and (len(lines) != 1 or len(lines[0]) > 2000):
            problem = f"{len(lines)} error lines: {lines[:3]!r}"
    if os.path.exists(marker):
        os.unlink(marker)
        problem = (problem or "") + " a pickle in the input ran (the marker file exists)"
    if _outside_state(outside) != before:
        problem = (problem or "") + " a file outside the folder changed"
        _reset_outside(outside)
    if problem:
        stats["failures"] += 1
        return f"{target} {call if not callable(call) else ''} after {what}: {problem}"
    return None


def _reset_outside(outside: Path) -> None:
    for p in outside.iterdir():
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()
    (outside / "target.txt").write_bytes(CONTENT)


def _rounds(rng: random.Random):
    """Case numbers: SUITE_CASES in the suite, or as many as fit in MINUTES."""
    end = time.monotonic() + MINUTES * 60
    i = 0
    while (i < SUITE_CASES) if MINUTES == 0 else (time.monotonic() < end):
        yield i
        i += 1


@pytest.fixture
def outside(tmp_path):
    d = tmp_path / "outside"
    d.mkdir()
    _reset_outside(d)
    return d


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A finished tiny ``kenv train`` run folder (its model.zip is the model seed)."""
    out = tmp_path_factory.mktemp("trained") / "run"
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        assert main(["train", "--config", "ppo", "--env", ENV, "--n-timesteps", "512", "--no-progress",
                     "--out", str(out)]) in (0, None)
    return out


# --------------------------------------------------------------------------- targets
YAML_SEEDS = {
    "profile": CONFIGS / "reward" / "throughput.yaml",
    "scenario": CONFIGS / "scenarios" / "hwrng.yaml",
    "train": CONFIGS / "train" / "ppo.yaml",
}


@pytest.mark.parametrize("kind", sorted(YAML_SEEDS))
def test_damaged_yaml_files(kind, tmp_path, outside):
    rng = random.Random(f"yaml-{kind}")
    seed_text = YAML_SEEDS[kind].read_text()
    marker = str(outside.parent / "MARKER")
    failures = []
    for i in _rounds(rng):
        text, what = mutate_text(rng, seed_text)
        (tmp_path / f"case{i}").mkdir()
        path = tmp_path / f"case{i}" / YAML_SEEDS[kind].name   # (train reads the algo from the name)
        path.write_text(text.replace("MARKER", marker), encoding="utf-8")
        out = tmp_path / f"out{i}"
        if kind == "profile":
            call = ["evaluate", "--env", ENV, "--policy", "original", "--episodes", "1", "--profile", str(path)]
        elif kind == "scenario":
            def call(path=path):
                gym.make(ENV, scenario=str(path)).reset(seed=0)
        else:
            call = ["train", "--config", str(path), "--env", ENV, "--n-timesteps", "1", "--no-progress",
                    "--eval-freq", "100000", "--out", str(out)]
        failures.append(run_case(f"yaml {kind}", call, outside, marker, what))
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(path.parent)
    assert not [f for f in failures if f], [f for f in failures if f]


@pytest.mark.parametrize("command", ["evaluate", "trace env"])
def test_damaged_model_zips(command, trained, tmp_path, outside):
    rng = random.Random(f"model-{command}")
    marker = str(outside.parent / "MARKER")
    failures = []
    for i in _rounds(rng):
        path = str(tmp_path / f"case{i}.zip")
        what = mutate_zip(rng, str(trained / "model.zip"), path, marker)
        if command == "evaluate":
            call = ["evaluate", "--env", ENV, "--policy", "original", "--episodes", "1", "--model", path]
        else:
            call = ["trace", "env", "--env", ENV, "--model", path, "--steps", "2",
                    "--out", str(tmp_path / f"t{i}.json")]
        failures.append(run_case(f"model {command}", call, outside, marker, what))
        os.unlink(path)
    assert not [f for f in failures if f], [f for f in failures if f]


@pytest.mark.parametrize("command", ["train --resume", "evaluate --model"])
def test_damaged_run_folders(command, trained, tmp_path, outside):
    rng = random.Random(f"run-{command}")
    marker = str(outside.parent / "MARKER")
    failures = []
    for i in _rounds(rng):
        run = tmp_path / f"run{i}"
        shutil.copytree(trained, run, symlinks=True)
        what = damage_folder(rng, run, outside)
        if command == "train --resume":
            call = ["train", "--config", "ppo", "--env", ENV, "--n-timesteps", "512", "--no-progress",
                    "--resume", "--out", str(run)]
        else:
            call = ["evaluate", "--env", ENV, "--policy", "original", "--episodes", "1", "--model", str(run)]
        failures.append(run_case(f"run {command}", call, outside, marker, what))
        shutil.rmtree(run, ignore_errors=True)
    assert not [f for f in failures if f], [f for f in failures if f]
