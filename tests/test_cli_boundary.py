"""Bad values of every flag of every command: exit status 2, one line on
stderr naming the flag, no traceback (issue #28).

The flags are enumerated from the argparse parser itself: a new flag without
a case in BAD fails test_every_flag_has_bad_values.  ``train`` and
``rediscover`` are covered by their own tests (agents/), ``discover`` by
tests/test_discover.py and ``benchmark`` by tests/test_benchmark.py (a valid --out
starts a run of minutes).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

import gymnasium as gym
import pytest

from kenv import RecordEpisodes
from kenv.cli import build_parser, main

#: commands left to their own tests
SKIP = {("train",), ("rediscover",), ("discover",), ("benchmark",)}


def _leaves(parser: argparse.ArgumentParser, path=()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, p in subs[0].choices.items():
        if (path + (name,)) in SKIP:
            continue
        yield from _leaves(p, path + (name,))


def _options(parser):
    for a in parser._actions:
        if a.option_strings and a.nargs != 0 and not isinstance(a, argparse._HelpAction):
            yield a


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    (d / "latin1.yaml").write_bytes(b"name: caf\xe9\nweights: {}\n")
    (d / "overflow.yaml").write_text("weights: {entropy: 1e400, throughput: 1, latency: 1, rcu_stall: 1, "
                                     "bug: 1, spin: 1}\n")
    (d / "bigint.yaml").write_text("weights: {entropy: " + "9" * 400 + ", throughput: 1, latency: 1, "
                                   "rcu_stall: 1, bug: 1, spin: 1}\n")
    (d / "scalar.yaml").write_text("42\n")
    (d / "afile").write_text("x")
    (d / "notzip.zip").write_text("not a zip")
    (d / "adir").mkdir()
    return d


def bad_values(dest: str, files) -> list[str]:
    """Bad values of the flag whose dest is ``dest``."""
    table = {
        "seed": ["-1", "x", "1.5", str(2**64), "inf", "１"],
        "platform": ["bogus", ""],
        "wait": ["hwrng_msleep(99999999999)", "usleep_range(2,1)", "hwrng_msleep(\u0661)", "spin"],
        "bytes": ["0", "-1", "x", str(2**40)],
        "preempt": ["bogus"],
        "seconds": ["0", "-1", "inf", "nan", "1e300", "x"],
        "deferral": ["bogus"],
        "sizes": ["0", "x", "4K:1K", "1:99999M"],
        "time": ["0", "-1", "inf", "nan", "x", "1e300"],
        "instances": ["0", "-1", "x", "100000"],
        "threshold": ["0", "-1", "x", "7"],
        "mode": ["bogus"],
        "hz": ["0", "-1", "x", "101", str(2**70)],
        "kernel": ["bogus"],
        "load": ["1e-7/2e-7", "1/inf", "2/1", "nan/1", "x", "0/5", "1/1e300"],
        "env": ["bogus", "CartPole-v1"],
        "policy": ["bogus"],
        "episodes": ["0", "-1", "x", "1e3"],
        "profile": ["bogus", str(files / "latin1.yaml"), str(files / "overflow.yaml"),
                    str(files / "bigint.yaml"), str(files / "scalar.yaml"), str(files / "adir")],
        "steps": ["0", "-1", "x"],
        "warmup": ["-1", "x"],
        "out": [str(files / "adir"), str(files / "afile" / "t.json"), str(files / "nodir" / "t.json")],
        "record": [str(files / "adir"), str(files / "afile" / "r.jsonl"), str(files / "nodir" / "r.jsonl")],
        "format": ["bogus"],
        "window": ["x", "5:1", "nan:1", "inf:"],
        "model": [str(files / "nonexistent.zip"), str(files / "notzip.zip")],
        # (evaluate's env here is kenv/HwrngWait-v2: one decision)
        "actions": ["bogus", "", "cpu_relax,,hwrng_yield", "wait=cpu_relax", "cpu_relax,cpu_relax()",
                    "hwrng_msleep(99999999999)", "usleep_range(2,1)"],
    }
    return table.get(dest)


def _required(path, parser, files) -> list[str]:
    """Valid values of the required flags of ``path`` (the case's flag replaces its own)."""
    out = []
    dests = {a.dest for a in _options(parser)}
    if "out" in dests:
        out += ["--out", str(files / "trace.json")]
    if path == ("trace", "env"):
        out += ["--env", "kenv/HwrngWait-v2", "--policy", "original"]
    elif "env" in dests and path[0] == "evaluate":
        out += ["--env", "kenv/HwrngWait-v2"]
    return out


def _cases(files):
    for path, parser in _leaves(build_parser()):
        for a in _options(parser):
            for v in bad_values(a.dest, files) or []:
                yield path, parser, a, v


def test_every_flag_has_bad_values(tmp_path):
    missing = sorted({f"{' '.join(p)} {a.option_strings[0]}" for p, parser in _leaves(build_parser())
                      for a in _options(parser) if bad_values(a.dest, tmp_path) is None})
    assert not missing, f"flags without bad-value cases: {missing}"


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def test_bad_values_of_every_flag_exit_2_with_one_line(files, capsys):
    failures = []
    n = 0
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for path, parser, action, value in _cases(files):
            flag = action.option_strings[0]
            req = _required(path, parser, files)
            if flag in req:   # the case's value replaces the valid one
                i = req.index(flag)
                req = req[:i] + req[i + 2:]
            argv = list(path) + req + [flag, value]
            n += 1
            signal.alarm(30)
            try:
                code = main(argv)
            except SystemExit as e:
                code = e.code
            except _Timeout:
                code = "timeout"
            except Exception as e:  # noqa: BLE001 - the failure being tested for
                code = f"{type(e).__name__}: {e}"
            finally:
                signal.alarm(0)
            out, err = capsys.readouterr()
            lines = err.strip().splitlines()
            if code != 2 or len(lines) != 1 or flag not in lines[0] or "Traceback" in err:
                failures.append((" ".join(argv), code, err.strip()[:300]))
    finally:
        signal.signal(signal.SIGALRM, old)
    assert n > 100
    assert not failures, "\n".join(map(repr, failures))


@pytest.mark.parametrize("argv,flag", [
    (["experiment", "raid6-cyclictest", "--load", "1e-7/2e-7"], "--load"),
    (["experiment", "hwrng-dd", "--seed", "-1"], "--seed"),
    (["bench", "--env", "bogus"], "--env"),
    (["experiment", "hwrng-dd", "--seconds", "1e300"], "--seconds"),
])
def test_real_cli_one_line_no_traceback(argv, flag):
    r = subprocess.run([sys.executable, "-m", "kenv.cli", *argv], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0], r.stderr


@pytest.mark.parametrize("kenv_error, argparse_error, prog", [
    (["discover", "--env", "kenv/HwrngWait-v2", "--profile", "bogus"],
     ["discover", "--env", "kenv/HwrngWait-v2", "--seeds", "1"], "kenv discover"),
    (["evaluate", "--env", "kenv/HwrngWait-v2", "--profile", "bogus"],
     ["evaluate", "--env", "kenv/HwrngWait-v2", "--episodes", "0"], "kenv evaluate"),
    (["train", "--config", "/nonexistent/ppo.yaml", "--env", "kenv/HwrngWait-v2"],
     ["train", "--config", "ppo", "--env", "bogus"], "kenv train"),
    (["rediscover", "--envs", "bogus"], ["rediscover", "--seeds", "x"], "kenv rediscover"),
])
def test_kenv_errors_carry_argparses_prefix_for_the_subcommand(kenv_error, argparse_error, prog, tmp_path, capsys):
    """kenv's own errors (a ConfigError after parsing) used to say ``kenv: error:``
    where argparse's for the same subcommand say ``kenv discover: error:``."""
    lines = []
    for argv in (kenv_error, argparse_error):
        with pytest.raises(SystemExit) as e:
            main(argv + ["--out", str(tmp_path / "o")] if argv[0] != "evaluate" else argv)
        assert e.value.code == 2
        [line] = capsys.readouterr().err.strip().splitlines()
        lines.append(line)
    assert all(line.startswith(f"{prog}: error: ") for line in lines), lines


@pytest.mark.parametrize("argv,prog", [
    (["bench", "--nope"], "kenv bench"),
    (["experiment", "hwrng-dd", "--bytes", "100", "extra"], "kenv experiment hwrng-dd"),
    (["experiment", "raid6-cyclictest", "--lod", "1/5"], "kenv experiment raid6-cyclictest"),
    (["trace", "env", "--env", "kenv/HwrngWait-v2", "--policy", "patched", "--out", "t.json", "--stepz", "3"],
     "kenv trace env"),
    (["discover", "--env", "kenv/HwrngWait-v2", "--nope"], "kenv discover"),
])
def test_an_unknown_flag_names_the_subcommand(argv, prog, tmp_path, monkeypatch, capsys):
    """An unknown flag said ``kenv: error: unrecognized arguments`` (the top-level
    parser's prefix) where every other error of the subcommand says ``kenv bench: error:``."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(argv)
    [line] = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and line.startswith(f"{prog}: error: unrecognized arguments: "), line
    assert argv[-1] in line and os.listdir(tmp_path) == []


# (a value refused after parsing after it: without the refusal the run stops there, at once)
@pytest.mark.parametrize("command", [["rediscover", "--envs", "bogus"],
                                     ["discover", "--env", "kenv/HwrngWait-v2", "--profile", "bogus"]])
def test_seed_is_not_taken_for_seeds(command, tmp_path, monkeypatch, capsys):
    """``--seed`` (the flag of every other command) was argparse's abbreviation of
    ``--seeds``: ``kenv rediscover --seed 3`` trained seeds 0, 1 and 2, and
    ``kenv discover --seed 5`` played 5 held-out episodes.  It is refused, naming the flags."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(command[:1] + ["--seed", "3"] + command[1:])
    [line] = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and line.startswith(f"kenv {command[0]}: error: argument --seed: got '3'; "), line
    assert "--seeds N" in line and os.listdir(tmp_path) == []


def test_validate_takes_seed_and_says_it_is_ignored(tmp_path, capsys):
    """``kenv validate`` has always taken ``--seed`` (every command's flag); each record
    replays from its own seed, so the flag means nothing there.  It stays accepted (scripts
    pass it) with one line saying it is ignored, and the verdict is that without it."""
    path = tmp_path / "records.jsonl"
    env = RecordEpisodes(gym.make("kenv/HwrngWait-v2"), str(path))
    env.reset(seed=3)
    while not any(env.step(0)[2:4]):
        pass
    env.close()
    assert main(["validate", str(path)]) == 0
    plain = capsys.readouterr()
    assert main(["validate", "--seed", "3", str(path)]) == 0
    noted = capsys.readouterr()
    assert noted.out == plain.out
    assert noted.err.strip().splitlines() == [
        "kenv validate: note: --seed is ignored: each record is replayed from its own seed"]
    with pytest.raises(SystemExit) as e:     # still a seed: a bad value is an error
        main(["validate", "--seed", "-1", str(path)])
    assert e.value.code == 2 and "argument --seed: " in capsys.readouterr().err


def test_a_bare_kenv_lists_its_commands():
    """`kenv` alone prints its commands (it printed one error line, "the following
    arguments are required: command")."""
    r = subprocess.run([sys.executable, "-m", "kenv.cli"], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert r.returncode == 0 and r.stderr == ""
    for command in ("experiment", "reproduce", "evaluate", "bench", "train", "rediscover", "discover", "trace"):
        assert command in r.stdout


def _evaluate_raising(monkeypatch, error_in):
    """``kenv evaluate`` whose run raises what ``error_in()`` raises."""
    import kenv.agents.evaluate as ev

    def evaluate(*a, **k):
        error_in()
    monkeypatch.setattr(ev, "evaluate", evaluate)


def test_an_error_names_the_flag_of_the_argument_it_is_about(monkeypatch, capsys):
    """An error inside a file a flag names (its field: the path and a key) names that flag,
    by the argument it is about (kenv.errors.about), not by matching text."""
    from kenv.errors import ConfigError, about

    def bad_profile():
        with about("profile"):
            raise ConfigError("/elsewhere/p.yaml.weights.entropy", "x", "a number")
    _evaluate_raising(monkeypatch, bad_profile)
    with pytest.raises(SystemExit) as e:
        main(["evaluate", "--env", "kenv/HwrngWait-v2", "--profile", "/other/q.yaml", "--record", "/elsewhere"])
    [line] = capsys.readouterr().err.splitlines()
    assert e.value.code == 2 and line.startswith("kenv evaluate: error: argument --profile: /elsewhere/p.yaml"), line


def test_an_error_is_not_put_on_a_flag_whose_value_it_merely_contains(monkeypatch, capsys):
    """A field that is no argument names no flag, even when its text or value is another
    flag's value (the old guess put this on --env)."""
    from kenv.errors import ConfigError

    def bad():
        raise ConfigError("kenv/HwrngWait-v2.something", "kenv/HwrngWait-v2", "x")
    _evaluate_raising(monkeypatch, bad)
    with pytest.raises(SystemExit) as e:
        main(["evaluate", "--env", "kenv/HwrngWait-v2"])
    [line] = capsys.readouterr().err.splitlines()
    assert e.value.code == 2 and line.startswith("kenv evaluate: error: kenv/HwrngWait-v2.something: got"), line


def test_the_argument_an_error_is_about_survives_pickling():
    import pickle

    from kenv.errors import ConfigError, UnknownKeywordError, about

    for cls in (ConfigError, UnknownKeywordError):
        with pytest.raises(cls) as e, about("config"):
            raise cls("f.yaml: x", 1, "y")
        copy = pickle.loads(pickle.dumps(e.value))
        assert (copy.argument, str(copy), type(copy)) == ("config", str(e.value), cls)
        assert cls(e.value).argument == "config"


def test_about_tags_kenvs_file_errors_and_leaves_other_errors_alone():
    """A FileError (a failed write under --out) carries the argument across pickling, as
    a job's error does from a worker; an OSError of another origin gets no attribute."""
    import errno
    import pickle

    from kenv.errors import about
    from kenv.files import FileError

    with pytest.raises(FileError) as e, about("out"):
        raise FileError("write", "/x/trace.json", OSError(errno.ENOSPC, "No space left on device"))
    copy = pickle.loads(pickle.dumps(e.value))
    assert (copy.argument, copy.operation, copy.filename, copy.errno) == ("out", "write", "/x/trace.json", errno.ENOSPC)
    with pytest.raises(PermissionError) as p, about("out"):
        raise PermissionError(errno.EACCES, "denied", "/x")
    assert not hasattr(p.value, "argument")
