"""Kernel-style traces (kenv trace): file formats, the mechanisms they show, bounded
size, bad input, and the environments' render modes."""

from __future__ import annotations

import json
import os
import re
import stat
import warnings
from collections import defaultdict

import gymnasium as gym
import numpy as np
import pytest

import kenv  # noqa: F401  (registers the ids)
from kenv.cli import main
from kenv.envs.registration import ENVS
from kenv.errors import ConfigError
from kenv.files import FileError
from kenv.sim.engine import Engine, Recorder
from kenv.trace import parse_window, recording, write_trace

ENV_IDS = [e[0] for e in ENVS]
HZ250_TWO_JIFFIES_US = 8000.0


# ----------------------------------------------------------------------------- helpers

def run_cli(argv, capsys) -> dict:
    """``kenv ...  --json``: returns the printed JSON object."""
    assert main(list(argv) + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def check_trace_events(path: str) -> list[dict]:
    """The trace-event format's required fields, ts order per track, strict nesting."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    assert events
    per_track = defaultdict(list)
    for e in events:
        for k in ("ph", "ts", "pid", "tid", "name"):
            assert k in e, (k, e)
        assert isinstance(e["ts"], (int, float)) and isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert isinstance(e["name"], str) and e["name"]
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
            per_track[(e["pid"], e["tid"])].append(e)
        elif e["ph"] == "C":
            assert isinstance(e["args"], dict) and e["args"]
        elif e["ph"] == "i":
            assert e.get("s") in ("t", "p", "g")
        else:
            assert e["ph"] == "M" and e["name"] in (
                "process_name", "thread_name", "process_sort_index", "thread_sort_index")
    # timestamps never go backwards within a track, and slices nest strictly
    for track, xs in per_track.items():
        ts = [e["ts"] for e in xs]
        assert ts == sorted(ts), track
        stack: list[int] = []
        for e in xs:
            a = round(e["ts"] * 1000)
            b = a + round(e["dur"] * 1000)
            while stack and stack[-1] <= a:
                stack.pop()
            assert not stack or b <= stack[-1], (track, e)
            stack.append(b)
    names = {(e["name"], e["args"]["name"]) for e in events if e["ph"] == "M" and "name" in e.get("args", {})}
    assert any(n == "process_name" for n, _ in names) and any(n == "thread_name" for n, _ in names)
    return events


FTRACE_LINE = re.compile(r"^\s*(?P<comm>.+?)-(?P<pid>\d+)\s+\[(?P<cpu>\d{3})\] (?P<ts>\d+\.\d{9}): "
                         r"(?P<event>\w+):\s+(?P<fields>.*)$")


def read_ftrace(path: str) -> dict[str, list[dict]]:
    """Per machine section: the parsed event lines, checked for shape and time order."""
    out: dict[str, list[dict]] = {}
    cur = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# machine: "):
                cur = out.setdefault(line[len("# machine: "):].split(" ")[0], [])
                continue
            if not line or line.startswith("#") or line.startswith("cpus="):
                continue
            m = FTRACE_LINE.match(line)
            assert m, line
            d = m.groupdict()
            d["t"] = float(d["ts"])
            d["cpu"] = int(d["cpu"])
            cur.append(d)
    for lines in out.values():
        ts = [d["t"] for d in lines]
        assert ts == sorted(ts)
    return out


def fields(d: dict) -> dict:
    return dict(kv.split("=", 1) for kv in re.findall(r"(\w+=\S+)", d["fields"]))


# ----------------------------------------------------------------------------- the hook

def test_recording_attaches_the_first_engine_created_only():
    assert Engine().recorder is None
    with recording() as rec:
        e1, e2 = Engine(), Engine()
    assert e1.recorder is rec and rec.engine is e1 and e2.recorder is None
    assert Engine().recorder is None


def test_counter_probes_are_removed_after_recording():
    from kenv.drivers.hwrng import Bcm2835Rng
    from kenv.drivers.random import InputPool

    before = (InputPool.credit_init_bits, InputPool.__init__, Bcm2835Rng._consume)
    with recording():
        assert InputPool.credit_init_bits is not before[0]
    assert (InputPool.credit_init_bits, InputPool.__init__, Bcm2835Rng._consume) == before


# ------------------------------------------------------------------- mechanism: hwrng

@pytest.fixture(scope="module")
def hwrng_traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("hwrng")
    args = ["trace", "experiment", "hwrng-dd", "--platform", "rpi3bplus", "--wait", "hwrng_yield",
            "--bytes", "2000"]
    assert main(args + ["--out", str(d / "dd.json")]) == 0
    assert main(args + ["--out", str(d / "dd.txt"), "--format", "ftrace"]) == 0
    assert main(args + ["--out", str(d / "dd-again.json")]) == 0
    assert main(args + ["--out", str(d / "win.json"), "--window", "121:121.2"]) == 0
    assert main(args + ["--out", str(d / "win.txt"), "--window", "121:121.2", "--format", "ftrace"]) == 0
    return d


def test_hwrng_yield_wakes_dd_every_two_jiffies_perfetto(hwrng_traces):
    events = check_trace_events(str(hwrng_traces / "dd.json"))
    wake = [e["ts"] for e in events if e["ph"] == "i" and e["name"] == "sched_wakeup"
            and e["args"]["comm"] == "dd"]
    gaps = np.diff(wake)
    assert len(gaps) > 50
    # 2 jiffies at HZ=250: expires = jiffies + 1 fires at the next-next tick
    assert np.median(gaps) == pytest.approx(HZ250_TWO_JIFFIES_US, abs=1e-3)
    assert np.mean(np.isclose(gaps, HZ250_TWO_JIFFIES_US, atol=1e-3)) > 0.95
    starts = [e["args"] for e in events if e["ph"] == "i" and e["name"] == "timer_start"
              and e["args"]["function"] == "process_timeout" and e["args"]["timeout"] == 1]
    assert starts and all(a["bucket_expiry"] == a["expires"] + 1 for a in starts)
    # the machine is a process named after its kernel, CPUs are threads
    procs = [e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"]
    assert procs == ["rpi3bplus (4 CPUs, HZ=250, preempt=full)"]
    slices = {e["name"] for e in events if e["ph"] == "X"}
    assert {"dd", "hwrng", "softirq: TIMER", "timer: process_timeout"} <= slices
    counters = {next(iter(e["args"])) for e in events if e["ph"] == "C"}
    assert {"credited entropy bits", "FIFO words", "runnable tasks"} <= counters
    assert any(e["ph"] == "i" and e["name"] == "crng init done" for e in events)
    assert any(e["ph"] == "i" and e["name"] == "timer expired" for e in events)


def test_hwrng_yield_wakes_dd_every_two_jiffies_ftrace(hwrng_traces):
    sec = read_ftrace(str(hwrng_traces / "dd.txt"))
    lines = sec["rpi3bplus"]
    wake = [d["t"] for d in lines if d["event"] == "sched_wakeup" and fields(d)["comm"] == "dd"]
    gaps = np.diff(wake)
    assert np.median(gaps) == pytest.approx(0.008, abs=1e-9)
    sw = [d for d in lines if d["event"] == "sched_switch"]
    assert sw and all(re.fullmatch(r"prev_comm=\S+ prev_pid=\d+ prev_prio=\d+ prev_state=\S+ ==> "
                                   r"next_comm=\S+ next_pid=\d+ next_prio=\d+", d["fields"]) for d in sw)
    # the line's task is the one switched out, and the next line's task is the one switched in
    first = next(d for d in sw if "next_comm=dd " in d["fields"])
    assert first["comm"] == "<idle>" and first["pid"] == "0"
    assert any(d["event"] == "softirq_entry" and d["fields"] == "vec=1 [action=TIMER]" for d in lines)
    assert any(d["event"] == "timer_expire_entry" and "function=process_timeout" in d["fields"] for d in lines)
    assert any(d["event"] == "sched_process_exit" and "comm=dd " in d["fields"] for d in lines)


def test_same_seed_same_trace_bytes(hwrng_traces):
    a = (hwrng_traces / "dd.json").read_bytes()
    b = (hwrng_traces / "dd-again.json").read_bytes()
    assert a == b


def test_window_keeps_only_that_time_range(hwrng_traces):
    events = check_trace_events(str(hwrng_traces / "win.json"))
    lo, hi = 121e6, 121.2e6
    for e in events:
        if e["ph"] in ("i", "C"):
            assert lo <= e["ts"] <= hi
        elif e["ph"] == "X":
            assert e["ts"] <= hi and e["ts"] + e["dur"] >= lo
    full = check_trace_events(str(hwrng_traces / "dd.json"))
    assert 10 < len(events) < len(full) / 2
    lines = read_ftrace(str(hwrng_traces / "win.txt"))["rpi3bplus"]
    assert lines and all(121.0 <= d["t"] <= 121.2 for d in lines)


# ----------------------------------------------------------------- mechanism: raid6

def test_raid6_modprobe_holds_a_cpu_while_its_cyclictest_waits(tmp_path, capsys):
    out = tmp_path / "r6.json"
    res = run_cli(["trace", "experiment", "raid6-cyclictest", "--platform", "x86-avx512-32",
                   "--preempt", "voluntary", "--mode", "preempt_disable", "--out", str(out)], capsys)
    assert res["trace"]["bytes"] == os.path.getsize(out)
    events = check_trace_events(str(out))
    mp = max((e for e in events if e["ph"] == "X" and e["name"] == "modprobe"), key=lambda e: e["dur"])
    assert 1.15e6 < mp["dur"] < 1.30e6        # about 1.2 s on one CPU
    track = (mp["pid"], mp["tid"])
    start, end = mp["ts"], mp["ts"] + mp["dur"]
    woken = [e for e in events if e["ph"] == "i" and e["name"] == "sched_wakeup"
             and (e["pid"], e["tid"]) == track and e["args"]["comm"] == "cyclictest" and start <= e["ts"] <= end]
    assert woken
    ran = min((e for e in events if e["ph"] == "X" and e["name"] == "cyclictest"
               and (e["pid"], e["tid"]) == track and e["ts"] > woken[0]["ts"]), key=lambda e: e["ts"])
    assert ran["ts"] >= end                   # it ran only when modprobe let go
    assert ran["ts"] - woken[0]["ts"] > 1.15e6
    # the stretch is non-preemptible (PREEMPT_VOLUNTARY kernel code, no cond_resched)
    np_ = [e for e in events if e["ph"] == "X" and e["cat"] == "nonpreempt" and (e["pid"], e["tid"]) == track]
    assert max(e["dur"] for e in np_) > 1.15e6
    assert "voluntary" in max(np_, key=lambda e: e["dur"])["name"]
    # the experiment's own figure agrees: worst cyclictest latency ~1.2 s
    assert res["result"]["max_us"] > 1.15e6


# ----------------------------------------------------------------- mechanism: qperf

@pytest.fixture(scope="module")
def qperf_traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("qperf")
    args = ["trace", "experiment", "qperf-tcp-lat", "--deferral", "workqueue", "--time", "0.05"]
    assert main(args + ["--out", str(d / "q.json")]) == 0
    assert main(args + ["--out", str(d / "q.txt"), "--format", "ftrace"]) == 0
    return d


def test_qperf_workqueue_queue_work_then_switch_to_the_kworker(qperf_traces):
    sec = read_ftrace(str(qperf_traces / "q.txt"))
    assert set(sec) == {"client", "server"}
    lines = sec["client"]
    queued = [i for i, d in enumerate(lines) if d["event"] == "workqueue_queue_work"]
    assert queued
    for i in queued:
        cpu = lines[i]["cpu"]
        nxt = next(d for d in lines[i + 1:] if d["event"] == "sched_switch" and d["cpu"] == cpu)
        f = fields(nxt)
        assert f["next_comm"] == f"kworker/{cpu}:1H", nxt
        assert "function=mix_interrupt_randomness" in lines[i]["fields"]
        assert "workqueue=events_highpri" in lines[i]["fields"]


def test_qperf_two_hosts_and_aggregated_round_trips(qperf_traces):
    events = check_trace_events(str(qperf_traces / "q.json"))
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert sorted(n.split(" ")[0] for n in procs.values()) == ["client", "server"]
    # tracks are per (machine, cpu): CPU 0 of each host is its own track
    by_pid = defaultdict(set)
    for e in events:
        if e["ph"] == "X" and e["name"].startswith("qperf-"):
            by_pid[e["pid"]].add(e["name"])
    assert sorted(by_pid.values(), key=sorted) == [{"qperf-client"}, {"qperf-server"}]
    agg = [e for e in events if e["ph"] == "X" and e["cat"] == "aggregated"]
    assert agg and all(re.fullmatch(r"qperf: \d+ round trips \(aggregated\)", e["name"]) for e in agg)
    n_agg = sum(e["args"]["round_trips"] for e in agg) // 2       # one slice per host
    assert n_agg > 2000
    assert len(events) < n_agg                # bounded: not one event per round trip
    # on each host the kworker of that CPU runs right after the queued work; the only
    # task that may come first is qperf, when it was already being switched in (its
    # slice starts a context switch + the interrupt after the queueing)
    q = [e for e in events if e["ph"] == "i" and e["name"] == "workqueue_queue_work"]
    assert {e["pid"] for e in q} == set(procs)
    for e in q:
        after = sorted((x for x in events if x["ph"] == "X" and x["cat"] == "task" and x["pid"] == e["pid"]
                        and x["tid"] == e["tid"] and x["ts"] >= e["ts"]), key=lambda x: x["ts"])
        kw = next(i for i, x in enumerate(after) if x["name"] == f"kworker/{e['tid'] - 1}:1H")
        assert kw <= 1 and all(x["ts"] - e["ts"] < 5.0 for x in after[:kw])
    assert any(e["ph"] == "i" and e["name"] == "mix scheduled" for e in events)


# ---------------------------------------------------------------------- bad input

@pytest.mark.parametrize("field, value", [
    ("format", "xml"), ("window", "1-2"), ("window", "2:1"), ("window", "a:b"), ("window", "-1:"),
    ("window", "nan:"), ("window", "1:2:3"),
])
def test_bad_format_or_window_is_a_clear_error_and_writes_nothing(tmp_path, capsys, field, value):
    out = tmp_path / "t.json"
    with pytest.raises(SystemExit) as ex:
        main(["trace", "experiment", "hwrng-dd", "--bytes", "100", "--out", str(out), f"--{field}={value}"])
    assert ex.value.code == 2
    err = capsys.readouterr().err
    assert f"{field}: got {value!r}; allowed:" in err
    assert ("perfetto, ftrace" in err) if field == "format" else ("START:END" in err)
    assert os.listdir(tmp_path) == []


def test_unwritable_out_is_a_clear_error(tmp_path, capsys):
    for bad in (tmp_path / "no" / "such" / "dir" / "t.json", tmp_path):
        with pytest.raises(SystemExit) as ex:
            main(["trace", "experiment", "hwrng-dd", "--bytes", "100", "--out", str(bad)])
        assert ex.value.code == 2
        err = capsys.readouterr().err
        assert "out: got" in err and "writable directory" in err
    assert os.listdir(tmp_path) == []


def test_out_that_is_a_device_or_fifo_is_refused_not_replaced(tmp_path, capsys):
    """The trace is written to a temporary file renamed over --out: ``--out /dev/null``
    (run as root) replaced the device node with a regular file.  A path that exists
    and is not a regular file (here a FIFO, directly and through a symlink) is refused
    before the run, and is left as it was."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "link").symlink_to(fifo)
    for bad in (fifo, tmp_path / "link"):
        with pytest.raises(SystemExit) as ex:
            main(["trace", "experiment", "hwrng-dd", "--bytes", "100", "--out", str(bad)])
        [line] = capsys.readouterr().err.strip().splitlines()
        assert ex.value.code == 2 and f"out: got {str(bad)!r}" in line and "not a regular file" in line, line
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and os.path.islink(tmp_path / "link")
    assert sorted(os.listdir(tmp_path)) == ["fifo", "link"]


def test_parse_window():
    assert (parse_window("1.5:").start, parse_window("1.5:").end) == (1_500_000_000, None)
    assert (parse_window(":2").start, parse_window(":2").end) == (None, 2_000_000_000)
    assert parse_window(None).start is None
    with pytest.raises(ConfigError) as e:
        parse_window("3")
    assert e.value.field == "window" and e.value.value == "3"


def test_a_failed_write_leaves_no_partial_file(tmp_path, monkeypatch):
    import kenv.trace.perfetto as perfetto

    with recording() as rec:
        from kenv.experiments.hwrng_dd import run_hwrng_dd
        run_hwrng_dd("rpi3bplus", "hwrng_yield", 200)
    out = tmp_path / "t.json"
    out.write_text("old")

    def broken(data, f, meta=None):
        f.write('{"traceEvents": [' + "x" * 100_000)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(perfetto, "write_perfetto", broken)
    with pytest.raises(FileError) as e:   # (as every write kenv makes: the path and the operation)
        write_trace(rec, str(out), "perfetto")
    assert e.value.filename == str(out) and e.value.operation == "write" and e.value.errno == 28
    assert sorted(os.listdir(tmp_path)) == ["t.json"] and out.read_text() == "old"
    monkeypatch.undo()
    s = write_trace(rec, str(out), "perfetto")
    assert s["bytes"] == os.path.getsize(out) and json.loads(out.read_text())["traceEvents"]


def test_write_trace_of_an_empty_recorder(tmp_path):
    s = write_trace(Recorder(), str(tmp_path / "e.json"))
    assert s["events"] == 0 and json.loads((tmp_path / "e.json").read_text())["traceEvents"] == []


# ------------------------------------------------------------------ environments

def test_trace_env_with_a_baseline_policy(tmp_path, capsys):
    out = tmp_path / "env.json"
    res = run_cli(["trace", "env", "--env", "kenv/HwrngWait-v2", "--policy", "patched", "--steps", "4",
                   "--out", str(out)], capsys)
    assert len(res["episode"]) == 4
    events = check_trace_events(str(out))
    env_pid = next(e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"
                   and e["args"]["name"].startswith("kenv env"))
    steps = [e for e in events if e["ph"] == "X" and e["pid"] == env_pid]
    marks = [e for e in events if e["ph"] == "i" and e["name"] == "env_step"]
    assert len(steps) == len(marks) == 4
    assert all(m["args"]["action"] == "hwrng_yield" and isinstance(m["args"]["reward"], float) for m in marks)
    assert [m["args"]["reward"] for m in marks] == pytest.approx([s["reward"] for s in res["episode"]])
    assert any(e["ph"] == "X" and e["pid"] != env_pid for e in events)   # the kernel ran
    txt = tmp_path / "env.txt"
    assert main(["trace", "env", "--env", "kenv/Kernel-v3", "--policy", "random", "--steps", "3",
                 "--out", str(txt), "--format", "ftrace"]) == 0
    capsys.readouterr()
    sec = read_ftrace(str(txt))
    assert set(sec) == {"client", "server"}
    assert sum(d["event"] == "bprint" and d["fields"].startswith("kenv_env_step:") for d in sec["client"]) == 3


def test_trace_env_with_a_saved_model(tmp_path, capsys):
    from stable_baselines3 import DQN, PPO

    env = gym.make("kenv/HwrngWait-v2")
    PPO("MlpPolicy", env, n_steps=16, batch_size=16, seed=0, device="cpu").save(str(tmp_path / "ppo.zip"))
    DQN("MlpPolicy", env, buffer_size=64, learning_starts=0, seed=0, device="cpu").save(str(tmp_path / "dqn.zip"))
    for name in ("ppo.zip", "dqn.zip"):
        out = tmp_path / f"{name}.json"
        res = run_cli(["trace", "env", "--env", "kenv/HwrngWait-v2", "--model", str(tmp_path / name),
                       "--steps", "3", "--out", str(out)], capsys)
        assert len(res["episode"]) == 3
        check_trace_events(str(out))
    with pytest.raises(SystemExit):
        main(["trace", "env", "--env", "kenv/HwrngWait-v2", "--model", str(tmp_path / "none.zip"),
              "--steps", "3", "--out", str(tmp_path / "x.json")])
    assert "model: got" in capsys.readouterr().err
    # a model of another version (HwrngWaitPhased-v0 observes more): one line, no traceback
    with pytest.raises(SystemExit) as e:
        main(["trace", "env", "--env", "kenv/HwrngWaitPhased-v0", "--model", str(tmp_path / "ppo.zip"),
              "--steps", "3", "--out", str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "model: got" in err and "a model trained on kenv/HwrngWaitPhased-v0" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit):
        main(["trace", "env", "--env", "kenv/Nope-v0", "--policy", "patched", "--out", str(tmp_path / "x.json")])
    assert "env: got 'kenv/Nope-v0'" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("mode", ["ansi", "rgb_array"])
def test_check_env_passes_with_each_render_mode(env_id, mode):
    from gymnasium.utils.env_checker import check_env

    env = gym.make(env_id, render_mode=mode).unwrapped
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=False)
    assert [str(x.message) for x in w] == []


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_rgb_array_frames_show_the_last_step_and_change_nothing(env_id):
    from kenv.trace.render import BG, HEIGHT, TOP, WIDTH

    plain = gym.make(env_id)
    drawn = gym.make(env_id, render_mode="rgb_array")
    for e in (plain, drawn):
        e.action_space.seed(1)
    o1, _ = plain.reset(seed=1)
    o2, _ = drawn.reset(seed=1)
    assert np.array_equal(o1, o2)
    first = drawn.render()
    assert first.shape == (HEIGHT, WIDTH, 3) and first.dtype == np.uint8
    frames = []
    for _ in range(4):
        a = plain.action_space.sample()
        drawn.action_space.sample()
        r1 = plain.step(a)
        r2 = drawn.step(a)
        assert np.array_equal(r1[0], r2[0]) and r1[1:4] == r2[1:4]   # recording changes nothing
        img = drawn.render()
        assert img.shape == (HEIGHT, WIDTH, 3) and img.dtype == np.uint8
        frames.append(img)
    assert any((f[TOP:] != np.array(BG, dtype=np.uint8)).any() for f in frames)   # CPU rows drawn
    assert not all(np.array_equal(frames[0], f) for f in frames[1:]) or len(frames) == 1
    assert isinstance(gym.make(env_id, render_mode="ansi").unwrapped.render(), str)


def test_record_video_writes_a_video(tmp_path):
    pytest.importorskip("moviepy", reason="RecordVideo needs moviepy (pip install 'kenv-gym[video]')")
    from gymnasium.wrappers import RecordVideo

    env = gym.make("kenv/HwrngWait-v2", render_mode="rgb_array", max_episode_steps=4)
    folder = tmp_path / "videos"
    env = RecordVideo(env, str(folder), episode_trigger=lambda i: i == 0, disable_logger=True)
    env.reset(seed=0)
    env.action_space.seed(0)
    while True:
        *_, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            break
    env.close()
    videos = [f for f in os.listdir(folder) if f.endswith(".mp4")]
    assert videos and os.path.getsize(folder / videos[0]) > 0


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_rgb_array_records_nothing_until_drawn_and_a_late_frame_shows_the_last_step(env_id):
    """render_mode="rgb_array" attaches no recorder until the episode's first
    render() (SB3's make_vec_env(id) passes that mode and never draws); a first
    render() in the middle of an episode still shows the last step: the same
    frame as an env drawn from the reset on, and the same trajectory after it.
    Without the fast-forwards: a stretch they skip is drawn as one aggregated
    slice, and which stretches are skipped depends on what the env has learned
    (the late env's replay runs with the tables its first pass filled), so
    only the trajectories, not the frames, are the same with them on."""
    from kenv.trace import episode_kernels

    late = gym.make(env_id, render_mode="rgb_array", fast_forward=False)
    every = gym.make(env_id, render_mode="rgb_array", fast_forward=False)
    late.reset(seed=2)
    every.reset(seed=2)
    every.render()
    space = late.action_space
    space.seed(3)
    for i in range(6):
        a = space.sample()
        r1, r2 = late.step(a), every.step(a)
        assert np.array_equal(r1[0], r2[0]) and r1[1:4] == r2[1:4]
        frame = every.render()
        if i < 3:
            assert all(k.engine.recorder is None for k in episode_kernels(late.unwrapped._episode))
        else:
            assert np.array_equal(late.render(), frame)
    late.reset(seed=4)   # a new episode records nothing until drawn again
    assert all(k.engine.recorder is None for k in episode_kernels(late.unwrapped._episode))
