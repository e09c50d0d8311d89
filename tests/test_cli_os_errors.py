"""One-line errors where the OS or the terminal is the problem (#43 item 4): a write that
fails names the path and the operation, a closed or full stdout ends the command
quietly, a numeric flag cannot overflow, every integer flag takes ASCII digits only,
and a value that starts with a dash is read as the value of the flag before it."""

from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys

import pytest

from kenv.cli import build_parser, main

ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}


def _kenv(*argv, **kw):
    return subprocess.run([sys.executable, "-m", "kenv.cli", *argv], capture_output=True, text=True, timeout=300,
                          env=ENV, **kw)


def _small_files():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)      # (EFBIG instead of a kill)
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))


def test_a_failed_write_names_the_path_and_the_operation(tmp_path):
    """A file-size limit makes the first model zip fail to write, as a full disk would
    (before: ``kenv train: error: : No space left on device``, no path)."""
    r = _kenv("train", "--config", "ppo", "--env", "kenv/RandomMix-v2", "--n-timesteps", "512", "--no-progress",
              "--out", str(tmp_path / "run"), preexec_fn=_small_files)
    [line] = [x for x in r.stderr.splitlines() if "error" in x]
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "cannot write" in line and str(tmp_path / "run") in line and ".zip: File too large" in line, line
    assert not [f for f in os.listdir(tmp_path / "run") if f.startswith(".kenv-tmp-")]


def test_a_closed_stdout_ends_quietly():
    r, w = os.pipe()
    os.close(r)   # the reader is gone before anything is written, as after `| head -1`
    p = subprocess.run([sys.executable, "-m", "kenv.cli", "experiment", "hwrng-dd", "--bytes", "100", "--json"],
                       stdout=w, stderr=subprocess.PIPE, text=True, timeout=120, env=ENV)
    os.close(w)
    assert p.returncode == 128 + signal.SIGPIPE and p.stderr == ""


def test_a_full_stdout_is_one_line():
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "kenv.cli", "experiment", "hwrng-dd", "--bytes", "100", "--json"],
                           stdout=full, stderr=subprocess.PIPE, text=True, timeout=120, env=ENV)
    assert p.returncode == 1 and p.stderr.strip().splitlines() == [
        "kenv experiment hwrng-dd: error: cannot write the standard output: No space left on device"]


@pytest.mark.parametrize("window", ["0:1e300", "1e300:", ":1e20"])
def test_a_huge_window_bound_is_one_line(window, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["trace", "experiment", "hwrng-dd", "--bytes", "100", "--out", str(tmp_path / "t.json"),
              "--window", window])
    [line] = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and "window: got" in line


def _typed_flags():
    """(command path, flag, type) of every flag of every subcommand with a ``type=``."""
    out = []
    stack = [((), build_parser())]
    while stack:
        path, p = stack.pop()
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                stack.extend((path + (n,), sp) for n, sp in a.choices.items())
            elif a.option_strings and a.type is not None:
                out.append((path, a.option_strings[-1], a.type))
    return out


def test_no_flag_takes_pythons_int():
    """``int()`` takes "1_000" and "٣" (Arabic-Indic three); kenv's integer flags do not."""
    assert [(c, f) for c, f, t in _typed_flags() if t in (int, float)] == []


@pytest.mark.parametrize("text", ["٣", "1_0", "３", "1" * 40])
def test_every_integer_flag_refuses_non_ascii_digits(text):
    ints = [(c, f, t) for c, f, t in _typed_flags() if isinstance(_try(t, "3"), int)]
    assert len(ints) >= 15, ints
    for command, flag, parse in ints:
        with pytest.raises((argparse.ArgumentTypeError, ValueError)):
            parse(text)


def _try(parse, text):
    try:
        return parse(text)
    except Exception:  # noqa: BLE001 - not an integer flag
        return None


def test_a_dash_value_is_the_flags_value(capsys):
    """``--load -1/2`` said "expected one argument"; the value is checked instead."""
    with pytest.raises(SystemExit) as e:
        main(["experiment", "raid6-cyclictest", "--load", "-1/2"])
    [line] = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and "load: got '-1/2'" in line, line
    with pytest.raises(SystemExit):
        main(["trace", "experiment", "hwrng-dd", "--bytes", "100", "--out", "t.json", "--window", "-1:2"])
    assert "window: got '-1:2'" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["train", "--config", "ppo", "--env", "kenv/HwrngWait-v2", "--seed"],
                                  ["discover", "--env", "kenv/HwrngWait-v2", "--train-seed"]])
def test_a_training_seed_numpy_cannot_take_is_refused_by_argparse(argv, capsys):
    """One seed rule (kenv.schema.check_seed): a training seed is 0..2**32-1, because SB3 seeds
    numpy's legacy generator with it; ``kenv train --seed 5000000000`` used to pass argparse
    and be refused later (and discover's --train-seed reached SB3)."""
    with pytest.raises(SystemExit) as e:
        main(argv + [str(2**32)])
    [line] = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and "argument --" in line and "an integer seed in 0..4294967295" in line, line
