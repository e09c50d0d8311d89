"""The boundary of ``kenv train`` and ``kenv rediscover`` (issue 28).

A config file is data: nothing in it is evaluated or imported beyond an allow-list.  Bad
flags and damaged or foreign run files are one line on stderr naming the flag or the
file, exit status 2, no traceback.  A resumed run is the uninterrupted run, bit for bit.
Long jobs: a ``kill -9`` of ``kenv rediscover`` leaves no process behind, a second run on
the same ``--out`` is refused, Ctrl-C exits 130 with one line.

The CLI cases run ``kenv.cli.main`` in this process (an exception other than the exit
would fail the test, as a traceback would) except where a process of its own is the
point (the exploit, kills, signals, the lock), which run ``python -m kenv.cli``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from kenv.agents import rediscover as rd
from kenv.agents import train as tr
from kenv.cli import main

ENV = "kenv/Raid6Bench-v3"
CLI = [sys.executable, "-m", "kenv.cli"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN_FLAGS = ["--config", "ppo", "--env", ENV, "--n-timesteps", "1024", "--checkpoint-freq", "512",
               "--eval-freq", "512", "--eval-episodes", "2", "--no-progress"]


def _cli_error(capsys, argv: list[str], code: int = 2) -> str:
    """Run the CLI; it must exit ``code`` with exactly one line on stderr; that line."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == code, err
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _run(cmd: list[str], cwd: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


# ------------------------------------------------------------------- no code from configs
def test_cli_policy_kwargs_exploit_runs_nothing(tmp_path):
    """The issue's exploit, through the real CLI: exit 2, one line naming policy_kwargs,
    and the shell command never ran."""
    (tmp_path / "evil.yaml").write_text(
        'kenv/Raid6Bench-v3:\n  n_timesteps: 1024\n'
        '  policy_kwargs: "dict(net_arch=[8], ortho_init=nn.functional.torch.os.system(\\"id > pwned\\"))"\n')
    p = _run(CLI + ["train", "--config", "evil.yaml", "--algo", "ppo", "--env", ENV, "--out", "tmp"], str(tmp_path))
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().split("\n")) == 1 and "Traceback" not in p.stderr, p.stderr
    assert "policy_kwargs" in p.stderr
    assert not (tmp_path / "pwned").exists()
    assert not (tmp_path / "tmp").exists()  # refused before anything was written


def test_cli_env_wrapper_imports_only_the_allow_list(tmp_path, capsys):
    (tmp_path / "ppo.yaml").write_text("kenv/Raid6Bench-v3: {n_timesteps: 1024, env_wrapper: subprocess.Popen}\n")
    line = _cli_error(capsys, ["train", "--config", str(tmp_path / "ppo.yaml"), "--env", ENV,
                               "--out", str(tmp_path / "run")])
    assert "env_wrapper" in line and "gymnasium.wrappers.TimeLimit" in line


def test_cli_non_utf8_config_names_the_flag(tmp_path, capsys):
    (tmp_path / "ppo.yaml").write_bytes(b"kenv/Raid6Bench-v3: {n_timesteps: \xff\xfe}\n")
    assert "--config" in _cli_error(capsys, ["train", "--config", str(tmp_path / "ppo.yaml"), "--env", ENV])


# ----------------------------------------------------------------------- bad flags
@pytest.mark.parametrize("flags,name", [
    (["--seed", "-1"], "--seed"),
    (["--seed", str(2**32)], "--seed"),
    (["--eval-episodes", "1"], "--eval-episodes"),
    (["--checkpoint-freq", "0"], "--checkpoint-freq"),
    (["--n-timesteps", str(10**30)], "--n-timesteps"),
    (["--verbose", "7"], "--verbose"),
])
def test_cli_train_bad_flags(tmp_path, capsys, flags, name):
    line = _cli_error(capsys, ["train", "--config", "ppo", "--env", ENV, "--out", str(tmp_path / "run")] + flags)
    assert name in line


def test_python_m_train_is_kenv_train(tmp_path):
    """``python -m kenv.agents.train`` parses as ``kenv train`` does: a bad flag is one
    line and exit 2 (it had a parser of its own, which let the ConfigError out as a
    traceback)."""
    r = subprocess.run([sys.executable, "-m", "kenv.agents.train", "--config", "ppo", "--env", ENV,
                        "--out", str(tmp_path / "run"), "--eval-episodes", "1"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [
        "kenv train: error: --eval-episodes: got 1; allowed: an integer in 2..10000 (at least 2 for a 95% interval)"]
    assert not (tmp_path / "run").exists()


def _out_cases(tmp_path) -> list[tuple[str, str]]:
    """(an --out, why it is bad): a file, under a file, not writable."""
    (tmp_path / "file").write_text("x")
    if os.geteuid() == 0:  # root writes anywhere but in sysfs
        unwritable = "/sys/kenv-test-out"
    else:
        (tmp_path / "ro").mkdir(mode=0o500)
        unwritable = str(tmp_path / "ro" / "out")
    return [(str(tmp_path / "file"), "file"), (str(tmp_path / "file" / "sub"), "under a file"),
            (unwritable, "not writable")]


def test_cli_train_bad_out(tmp_path, capsys):
    for out, why in _out_cases(tmp_path):
        line = _cli_error(capsys, ["train", "--out", out] + TRAIN_FLAGS)
        assert line.startswith("kenv train: error: --out") and out in line, (why, line)


def test_cli_train_empty_out_is_refused(tmp_path, capsys, monkeypatch):
    """``--out ''`` trained into the default runs/<env>__<algo>__<seed> (an empty string
    read as no --out); every other command's --out refuses it."""
    monkeypatch.chdir(tmp_path)
    line = _cli_error(capsys, ["train", "--out", ""] + TRAIN_FLAGS)
    assert line.startswith("kenv train: error: --out: got ''; allowed: "), line
    assert os.listdir(tmp_path) == []


def test_cli_rediscover_bad_out_and_flags(tmp_path, capsys):
    base = ["rediscover", "--envs", ENV, "--n-timesteps", "512", "--no-plots", "--workers", "1"]
    for out, why in _out_cases(tmp_path):
        line = _cli_error(capsys, base + ["--out", out])
        assert line.startswith("kenv rediscover: error: --out") and out in line, (why, line)
    for flags, name in [(["--seeds", "-1"], "--seeds"), (["--seeds", "100000"], "--seeds"),
                        (["--workers", "0"], "--workers"), (["--n-timesteps", "0"], "--n-timesteps")]:
        assert name in _cli_error(capsys, base + ["--out", str(tmp_path / "rd")] + flags)


# -------------------------------------------------------------------- run files
@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> str:
    """A finished 1024-step run (checkpoints at 512 and 1024)."""
    out = str(tmp_path_factory.mktemp("finished") / "run")
    assert main(["train", "--out", out, "--json"] + TRAIN_FLAGS) == 0
    return out


def _partial(run: str) -> None:
    """As if killed after the 512-step checkpoint."""
    for f in ("result.json", "model.zip"):
        os.remove(os.path.join(run, f))
    os.remove(os.path.join(run, "checkpoints", "model_1024_steps.json"))


def _rewrite(path: str, edit) -> None:
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(edit(text))


@pytest.mark.parametrize("damage,names", [
    (lambda r: open(os.path.join(r, "run.yaml"), "w").write("42\n"), "run.yaml"),
    (lambda r: open(os.path.join(r, "run.yaml"), "wb").write(b"\xff\xfe\x00\x81binary"), "run.yaml"),
    (lambda r: open(os.path.join(r, "result.json"), "w").write("[1]"), "result.json"),
    (lambda r: open(os.path.join(r, "result.json"), "w").write("{}"), "result.json"),
    (lambda r: open(os.path.join(r, "result.json"), "w").write("{not json"), "result.json"),
    # a key of a summary row changed (a bit flipped, found by tests/test_fuzz_files.py): was a KeyError
    (lambda r: _rewrite(os.path.join(r, "result.json"), lambda s: s.replace('"return_mean"', '"return_meaN"', 1)),
     "result.json"),
    (lambda r: _rewrite(os.path.join(r, "result.json"),
                        lambda s: s.replace('"eval_return": ', '"eval_return": "x", "was": ', 1)), "result.json"),
    (lambda r: (shutil.rmtree(os.path.join(r, "checkpoints")),
                open(os.path.join(r, "checkpoints"), "w").write("x"), os.remove(os.path.join(r, "result.json"))),
     "checkpoints"),
    (lambda r: (_partial(r), open(os.path.join(r, "checkpoints", "model_512_steps.json"), "w").write("[512]")),
     "model_512_steps.json"),
    # a record of another checkpoint: the field that does not fit is named (CheckpointRecord)
    (lambda r: (_partial(r), open(os.path.join(r, "checkpoints", "model_512_steps.json"), "w")
                .write('{"steps": 256, "wall_s": 1.0}')), "model_512_steps.json.steps: got 256"),
    (lambda r: (_partial(r), open(os.path.join(r, "checkpoints", "model_512_steps.zip"), "wb").write(b"PK\x03")),
     "model_512_steps.zip"),
    (lambda r: (_partial(r), open(os.path.join(r, "checkpoints", "state_512_steps.pkl"), "wb").write(b"junk")),
     "state_512_steps.pkl"),
    (lambda r: (_partial(r), open(os.path.join(r, "evaluations.csv"), "a").write("garbage,,\n1,2\n")),
     "evaluations.csv"),
    (lambda r: (_partial(r), open(os.path.join(r, "evaluations.csv"), "w").write("\x00\x01 not a csv\n")),
     "evaluations.csv"),
    # lost: the first evaluation after the checkpoint beat -inf and replaced best_model.zip
    (lambda r: (_partial(r), os.remove(os.path.join(r, "evaluations.csv"))), "evaluations.csv: got 'missing'"),
])
def test_cli_resume_damaged_run_file_names_it(finished_run, tmp_path, capsys, damage, names):
    run = str(tmp_path / "run")
    shutil.copytree(finished_run, run)
    damage(run)
    line = _cli_error(capsys, ["train", "--out", run, "--resume"] + TRAIN_FLAGS)
    assert names in line, line


def test_resume_of_a_finished_run_without_model_and_curve_keeps_best_model(finished_run, tmp_path, capsys):
    """A finished run that lost model.zip is finished again from its final checkpoint; with its
    evaluations.csv lost too, that rebuild evaluated the final model, found it better than -inf
    and wrote it over best_model.zip (another model, the curve cut to one row). It is refused,
    naming evaluations.csv, and best_model.zip is left as it was."""
    run = str(tmp_path / "run")
    shutil.copytree(finished_run, run)
    for f in ("model.zip", "evaluations.csv"):
        os.remove(os.path.join(run, f))
    best = open(os.path.join(run, "best_model.zip"), "rb").read()
    with pytest.raises(SystemExit) as e:
        main(["train", "--out", run, "--resume"] + TRAIN_FLAGS)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "evaluations.csv: got 'missing'" in err.splitlines()[-1] and "Traceback" not in err
    assert open(os.path.join(run, "best_model.zip"), "rb").read() == best


@pytest.mark.slow
def test_damaged_rediscover_cache_is_recomputed(tmp_path):
    """learned.json / baselines.json that are not what rediscover wrote are recomputed
    (they are functions of the finished runs: nothing is lost), not a traceback."""
    kw = dict(envs=[ENV], seeds=1, n_timesteps=512, plots=False, workers=1, log=lambda s: None)
    out = str(tmp_path / "rd")
    first = rd.rediscover(out=out, **kw).to_dict()["rows"]
    with open(os.path.join(out, "kenv_Raid6Bench-v3", "seed_0", "learned.json"), "w") as f:
        f.write("[1]")
    with open(os.path.join(out, "kenv_Raid6Bench-v3", "baselines.json"), "w") as f:
        f.write('{"fingerprint": "x"}')
    again = rd.rediscover(out=out, **kw).to_dict()["rows"]
    for r in first + again:
        r.pop("wall_s")
    assert again == first


# ---------------------------------------------------------------- exact resume
@pytest.mark.parametrize("env_id,algo", [("kenv/HwrngWait-v2", "ppo"),
                                         pytest.param("kenv/RandomMix-v2", "dqn", marks=pytest.mark.slow)])
def test_resume_is_the_uninterrupted_run(tmp_path, env_id, algo):
    """Stopped after a mid-run checkpoint (later files removed, as a kill leaves them) and
    resumed: the same model bit for bit, the same evaluations, summary and episodes.
    (Before: HwrngWait resumed with fresh episodes, and PPO could overshoot its budget.)"""
    kw = dict(config=algo, env=env_id, seed=1, n_timesteps=2048, checkpoint_freq=512, eval_freq=512,
              eval_episodes=2, summary_episodes=1)
    a = tr.train(tr.TrainArgs(out=str(tmp_path / "a"), **kw), log=lambda s: None)
    b_dir = str(tmp_path / "b")
    tr.train(tr.TrainArgs(out=b_dir, **kw), log=lambda s: None)
    for f in ("result.json", "model.zip"):
        os.remove(os.path.join(b_dir, f))
    for n, path in tr.list_checkpoints(os.path.join(b_dir, "checkpoints")):
        if n > 1024:
            os.remove(path[:-4] + ".json")
    b = tr.train(tr.TrainArgs(out=b_dir, resume=True, **kw), log=lambda s: None)
    assert b.resumed_from == 1024 and b.steps == a.steps == 2048
    pa = [v.numpy() for v in tr.load_model(str(tmp_path / "a")).policy.state_dict().values()]
    pb = [v.numpy() for v in tr.load_model(b_dir).policy.state_dict().values()]
    assert len(pa) == len(pb) and all(np.array_equal(x, y) for x, y in zip(pa, pb))
    assert tr.read_evaluations(str(tmp_path / "a")) == tr.read_evaluations(b_dir)
    assert a.summary == b.summary
    for rank in range(2):  # the same training episodes, none twice (time column aside)
        ma, mb = (open(os.path.join(d, "monitor", f"{rank}.monitor.csv")).read().splitlines()[2:]
                  for d in (str(tmp_path / "a"), b_dir))
        assert [r.rsplit(",", 1)[0] for r in ma] == [r.rsplit(",", 1)[0] for r in mb] and ma


# --------------------------------------------------------------- processes
def _children(pid: int) -> set[int]:
    out = set()
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.add(int(p))
            except (OSError, IndexError, ValueError):
                pass
    return out


def _descendants(pid: int) -> set[int]:
    out, todo = set(), [pid]
    while todo:
        for c in _children(todo.pop()) - out:
            out.add(c)
            todo.append(c)
    return out


def _alive(pid: int) -> bool:
    """Running (a zombie has ended: only its exit status waits for a parent to read it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _mentions(d: str) -> list[int]:
    """Live processes whose command line names ``d``."""
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit() and int(p) != os.getpid():
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    if d.encode() in f.read() and _alive(int(p)):
                        out.append(int(p))
            except OSError:
                pass
    return out


def _wait_for_checkpoint(proc: subprocess.Popen, ckpt_dir: str, timeout: float = 120) -> None:
    t0 = time.monotonic()
    while not (os.path.isdir(ckpt_dir) and any(f.endswith("_steps.json") for f in os.listdir(ckpt_dir))):
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() - t0 < timeout, "no checkpoint"
        time.sleep(0.02)


def _ctrl_c_reaches_it() -> None:
    """preexec_fn of a run the test stops with SIGINT: the default disposition, so
    that Python installs its KeyboardInterrupt handler even when the test run
    itself ignores SIGINT (a shell starts background jobs so, and children
    inherit an ignored signal)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for_file(proc: subprocess.Popen, path: str, timeout: float = 120) -> None:
    t0 = time.monotonic()
    while not os.path.exists(path):
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() - t0 < timeout, f"no {path}"
        time.sleep(0.02)


RD_ARGS = ["rediscover", "--envs", ENV, "--seeds", "1", "--n-timesteps", "2048", "--no-plots"]


pytestmark_linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="scans /proc")


@pytestmark_linux
@pytest.mark.slow
def test_kill_9_leaves_no_process_and_resume_gives_the_uninterrupted_table(tmp_path):
    """kill -9 of a real rediscover after its first checkpoint: within 5 s no process it
    started is left (workers, resource tracker); the rerun resumes the partial training
    run and gives the table of an uninterrupted run."""
    out = str(tmp_path / "rd")
    proc = subprocess.Popen(CLI + RD_ARGS + ["--out", out, "--workers", "2"], cwd=str(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_checkpoint(proc, os.path.join(out, "kenv_Raid6Bench-v3", "seed_0", "checkpoints"))
        procs = _descendants(proc.pid)
        assert len(procs) >= 2  # the workers and the resource tracker
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        t0 = time.monotonic()
        while any(_alive(p) for p in procs) and time.monotonic() - t0 < 5:
            time.sleep(0.02)
        assert not [p for p in procs if _alive(p)], f"left after 5 s: {[p for p in procs if _alive(p)]}"
        assert not _mentions(out)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    assert not os.path.exists(os.path.join(out, "rediscover.json")), "finished before the kill"
    # the rerun: the lock is free, the partial run resumes
    p = _run(CLI + RD_ARGS + ["--out", out, "--workers", "2", "--json"], str(tmp_path), timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    resumed = json.loads(p.stdout)["rows"]
    result = json.load(open(os.path.join(out, "kenv_Raid6Bench-v3", "seed_0", "result.json")))
    assert result["resumed_from"] is not None and result["steps"] == 2048
    # the uninterrupted run; the static-action table and baselines (no training in them,
    # written atomically, fingerprinted) are taken from the run above to save time
    os.makedirs(str(tmp_path / "ref" / "kenv_Raid6Bench-v3"))
    shutil.copy(os.path.join(out, "kenv_Raid6Bench-v3", "baselines.json"),
                str(tmp_path / "ref" / "kenv_Raid6Bench-v3" / "baselines.json"))
    ref = rd.rediscover([ENV], seeds=1, out=str(tmp_path / "ref"), workers=1, plots=False, n_timesteps=2048,
                        log=lambda s: None).to_dict()["rows"]
    for r in resumed + ref:
        r.pop("wall_s")
    assert resumed == ref


@pytestmark_linux
@pytest.mark.slow
def test_second_run_on_the_same_out_is_refused_and_ctrl_c_exits_130(tmp_path):
    out = str(tmp_path / "rd")
    # a budget it does not reach before the Ctrl-C, however slow the machine
    long_args = [a if a != "2048" else "65536" for a in RD_ARGS]
    proc = subprocess.Popen(CLI + long_args + ["--out", out, "--workers", "2"], cwd=str(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=_ctrl_c_reaches_it)
    try:
        _wait_for_file(proc, os.path.join(out, "kenv_Raid6Bench-v3", "seed_0", "run.yaml"))  # training
        second = _run(CLI + long_args + ["--out", out], str(tmp_path))
        assert second.returncode == 2
        assert len(second.stderr.strip().split("\n")) == 1 and "Traceback" not in second.stderr
        assert "--out" in second.stderr and f"PID {proc.pid}" in second.stderr
        procs = _descendants(proc.pid)
        assert len(procs) >= 2  # the workers (and the resource tracker)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C at a terminal: the whole process group
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().split("\n")[-1].startswith("kenv rediscover: interrupted")
    t0 = time.monotonic()
    while any(_alive(p) for p in procs) and time.monotonic() - t0 < 5:
        time.sleep(0.02)
    assert not [p for p in procs if _alive(p)]


@pytestmark_linux
@pytest.mark.slow
def test_train_ctrl_c_exits_130_with_one_line(tmp_path):
    out = str(tmp_path / "run")
    flags = [f if f != "1024" else "65536" for f in TRAIN_FLAGS]
    proc = subprocess.Popen(CLI + ["train", "--out", out] + flags, cwd=str(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=_ctrl_c_reaches_it)
    try:
        _wait_for_checkpoint(proc, os.path.join(out, "checkpoints"))
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    lines = err.strip().split("\n")
    assert len(lines) == 1 and lines[0].startswith("kenv train: interrupted") and "--resume" in lines[0], err


# ------------------------------------------------------------------- config fuzzing
#: a small valid block per algorithm, under the fuzzed keys
FUZZ_BASE = {"ppo": {"n_steps": 16, "batch_size": 16}, "a2c": {"n_steps": 16},
             "dqn": {"buffer_size": 256, "batch_size": 16, "learning_starts": 0}}


def _fuzz_values():
    from hypothesis import strategies as st

    scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.integers(-3, 70),
                        st.floats(allow_nan=True, allow_infinity=True), st.floats(0, 1),
                        st.text(max_size=12), st.sampled_from(["lin_3e-3", "lin_x", "nn.Tanh", "dict(net_arch=[4])",
                                                               "step", "dict(a=nn.Module)", "os.system"]))
    return st.recursive(scalars, lambda c: st.one_of(st.lists(c, max_size=3),
                                                      st.dictionaries(st.text(max_size=6), c, max_size=3)),
                        max_leaves=6)


def test_fuzzed_train_configs_are_config_errors_or_build(tmp_path):
    """Random blocks of PPO/A2C/DQN keys with random values: reading the file and building
    the model either works or is a ConfigError, nothing else (bounded: 25 examples)."""
    import yaml
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from kenv.errors import ConfigError

    keys = sorted({"n_envs", "n_timesteps", "policy", "policy_kwargs", "env_wrapper", "env_kwargs", "normalize",
                   "learning_rate", "n_steps", "batch_size", "n_epochs", "gamma", "gae_lambda", "clip_range",
                   "clip_range_vf", "ent_coef", "max_grad_norm", "target_kl", "rollout_buffer_class",
                   "rollout_buffer_kwargs", "buffer_size", "train_freq", "tau", "exploration_fraction",
                   "use_sde", "learning_starts"})
    counts = {"built": 0, "config_error": 0}

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(algo=st.sampled_from(["ppo", "a2c", "dqn"]),
           block=st.dictionaries(st.sampled_from(keys), _fuzz_values(), max_size=4),
           n_envs=st.integers(1, 3))
    def check(algo, block, n_envs):
        block = {"n_timesteps": 64, "n_envs": n_envs, **FUZZ_BASE[algo], **block}
        path = tmp_path / f"{algo}.yaml"
        path.write_text(yaml.safe_dump({ENV: block}))
        try:
            cfg = tr.load_train_config(str(path), ENV)
            model = tr.build_model(cfg, tr.make_train_vec_env(cfg, 0, None, append=False), 0)
        except ConfigError:
            counts["config_error"] += 1
            return
        model.get_env().close()
        counts["built"] += 1

    check()
    assert counts["built"] > 0 and counts["config_error"] > 0, counts


def test_stale_tmp_cleanup_removes_only_kenvs_own_files_and_modes_follow_the_umask(tmp_path):
    """A rerun deletes what an interrupted atomic write left, not a user's own
    ``.tmp-*`` files under --out (found by a break-test: ``--out ~`` would have
    pruned a home directory); written files get 0666 less the umask, not 0600."""
    from kenv.agents.files import TMP_PREFIX, atomic_write_text, remove_stale_tmp

    (tmp_path / "project").mkdir()
    mine = tmp_path / "project" / ".tmp-notes.txt"
    mine.write_text("precious")
    stale = tmp_path / "project" / f"{TMP_PREFIX}result.json"
    stale.write_text("{")
    assert remove_stale_tmp(str(tmp_path)) == 1
    assert mine.read_text() == "precious" and not stale.exists()
    old = os.umask(0o027)
    try:
        atomic_write_text(str(tmp_path / "a.json"), "{}")
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o640


def test_cli_train_refuses_a_render_mode_that_needs_a_screen(tmp_path, capsys):
    """issue #43: ``render_mode: human`` passed validation and died 30 s later; now a one-line
    config error naming the field, before anything is written."""
    (tmp_path / "ppo.yaml").write_text("kenv/Raid6Bench-v3: {n_timesteps: 1024, env_kwargs: {render_mode: human}}\n")
    line = _cli_error(capsys, ["train", "--config", str(tmp_path / "ppo.yaml"), "--env", ENV,
                               "--out", str(tmp_path / "run")])
    assert "env_kwargs.render_mode" in line and "human" in line and "rgb_array" in line
    assert not (tmp_path / "run").exists()
