"""``kenv rediscover --ray``: a local Ray cluster (a head and one extra worker node on the
loopback address) gives the process pool's table, and survives a worker killed mid-job.

Skipped without the optional extra ``kenv-gym[ray]``."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

ray = pytest.importorskip("ray", reason="Ray is the optional extra kenv-gym[ray] (pip install -e '.[ray]')")

ENVS = ["kenv/HwrngWait-v2", "kenv/RandomMix-v2"]
#: two whole rollouts of both envs' shipped configs: cheap, and long enough to kill a job mid-run
STEPS = "1024"
#: the Ray task's process title while it runs a job (kenv.agents.jobs._ray_task)
TASK_TITLE = b"ray::_ray_task"


def _ray(*args, cwd=None):
    subprocess.run([os.path.join(os.path.dirname(sys.executable), "ray"), *args, "--disable-usage-stats"],
                   check=True, capture_output=True, timeout=120, cwd=cwd)


def _pids_with(text: bytes) -> list[int]:
    """This user's processes whose command line holds ``text``."""
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if text in f.read():
                        pids.append(int(d))
            except OSError:
                pass
    return pids


def _children(pids: set[int]) -> set[int]:
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) in pids:
                        out.add(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out


@pytest.fixture(scope="module")
def cluster():
    """``ray start``: a head and one extra worker node, one CPU each, on 127.0.0.1, in a
    temporary directory of their own, which is also their working directory (not the
    driver's: a worker that wrote a relative --out would write there); the teardown ends
    the processes that name it, by their ids (not ``ray stop``, which would end every Ray
    of this user).  Yields the address and that directory."""
    tmp = tempfile.mkdtemp(prefix="kray", dir="/tmp")   # (short: Ray's socket paths must be)
    port = "6" + str(os.getpid() % 1000 + 100)
    try:
        _ray("start", "--head", "--node-ip-address", "127.0.0.1", "--port", port, "--num-cpus", "1",
             "--include-dashboard=false", "--temp-dir", tmp, cwd=tmp)
        _ray("start", "--address", f"127.0.0.1:{port}", "--num-cpus", "1", cwd=tmp)
        yield f"127.0.0.1:{port}", tmp
    finally:
        for _ in range(3):
            ours = set(_pids_with(tmp.encode()) + _pids_with(f"127.0.0.1:{port}".encode()))
            for pid in ours | _children(ours):   # (the raylets' agents retitle themselves ray::...)
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.5)
        shutil.rmtree(tmp, ignore_errors=True)


def rediscover(out, *extra, wait=True, cwd=None):
    cmd = [sys.executable, "-m", "kenv.cli", "rediscover", "--envs", *ENVS, "--seeds", "2", "--n-timesteps", STEPS,
           "--out", str(out), "--no-plots", *extra]
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    if not wait:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, cwd=cwd)
    assert r.returncode == 0, r.stderr[-3000:]
    return table(os.path.join(cwd or "", out))


def table(out):
    with open(os.path.join(out, "rediscover.json")) as f:
        return _no_walls(json.load(f))


def _no_walls(doc):
    """The table without its wall times (and the --out it names)."""
    if isinstance(doc, dict):
        return {k: _no_walls(v) for k, v in doc.items() if not k.endswith("wall_s") and k != "out"}
    if isinstance(doc, list):
        return [_no_walls(v) for v in doc]
    return doc


@pytest.fixture(scope="module")
def pool_table(tmp_path_factory):
    return rediscover(tmp_path_factory.mktemp("pool"), "--workers", "2")


def _diff(a, b, path="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}.{k}: only in one" for k in set(a) ^ set(b)]
        for k in set(a) & set(b):
            out += _diff(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def _learned(out) -> dict[str, int]:
    """Each finished seed's learned.json under ``out`` and its modification time."""
    return {os.path.relpath(os.path.join(d, f), out): os.stat(os.path.join(d, f)).st_mtime_ns
            for d, _, fs in os.walk(out) for f in fs if f == "learned.json"}


def test_ray_table_equals_the_process_pool_table(cluster, pool_table, tmp_path):
    """... and the driver alone wrote --out: given relative, it is under the driver's
    working directory, not the workers' (the cluster's directory), with every run's files."""
    address, ray_cwd = cluster
    got = rediscover("out", "--ray", address, cwd=tmp_path)
    assert len(got["rows"]) == 4
    assert _diff(pool_table, got) == []
    assert not os.path.exists(os.path.join(ray_cwd, "out"))
    for e in ENVS:
        for s in range(2):
            run = tmp_path / "out" / e.replace("/", "_") / f"seed_{s}"
            assert {"learned.json", "model.zip", "result.json", "run.yaml"} <= set(os.listdir(run))


def _task_pids() -> list[int]:
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if f.read().startswith(TASK_TITLE):
                        pids.append(int(d))
            except OSError:
                pass
    return pids


def test_a_ray_worker_killed_mid_job_is_survived(cluster, pool_table, tmp_path):
    """Ray runs the killed task again (max_retries), or the run stops with one line naming
    the job; either way a rerun with the same --out redoes no finished job and completes."""
    address, _ = cluster
    before = set(_task_pids())   # (another Ray run on this machine: not ours to kill)
    p = rediscover(tmp_path / "ray", "--ray", address, wait=False)
    killed = None
    deadline = time.monotonic() + 300
    while killed is None and p.poll() is None and time.monotonic() < deadline:
        mine = [q for q in _task_pids() if q not in before]
        if mine:
            time.sleep(2.0)   # into the job (imports, then training)
            os.kill(mine[0], signal.SIGKILL)
            killed = mine[0]
        time.sleep(0.1)
    _, err = p.communicate(timeout=900)
    assert killed is not None, "no Ray task process seen"
    err = err.decode()
    if p.returncode != 0:
        assert "Traceback" not in err and "failed on Ray" in err and "job " in err, err[-3000:]
    finished = _learned(tmp_path / "ray")
    assert _diff(pool_table, rediscover(tmp_path / "ray", "--ray", address)) == []
    again = _learned(tmp_path / "ray")
    assert {f: again[f] for f in finished} == finished, "a finished job was redone"
    assert len(again) == 4
    assert not [f for _, _, fs in os.walk(tmp_path / "ray") for f in fs if f.startswith(".kenv-tmp-")]


def test_ray_without_a_cluster_is_a_one_line_error(tmp_path):
    r = subprocess.run([sys.executable, "-m", "kenv.cli", "rediscover", "--envs", ENVS[0], "--out", str(tmp_path),
                        "--ray", ""], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "--ray" in r.stderr and "Traceback" not in r.stderr


def test_ray_at_a_dead_address_is_a_one_line_error_within_the_connect_timeout(tmp_path):
    from kenv.agents.jobs import RAY_CONNECT_TIMEOUT_S

    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "kenv.cli", "rediscover", "--envs", ENVS[0], "--out", str(tmp_path),
                        "--ray", "127.0.0.1:1"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and time.monotonic() - t0 < RAY_CONNECT_TIMEOUT_S + 60   # (+ the imports)
    assert r.stderr.count("\n") == 1 and "--ray" in r.stderr and "127.0.0.1:1" in r.stderr, r.stderr


def _run_jobs_on(address: str, job: str, caught: str, tmp_path) -> tuple[subprocess.CompletedProcess, str]:
    """``run_jobs([job])`` on the cluster in a fresh Python; returns the process and the
    ``type | message`` line of a ``caught``, written to a file of its own: Ray's driver prints
    the raylet's notes on stdout from a thread of its own, and a note without its newline
    yet ran into the line once (CI)."""
    out = tmp_path / "caught.txt"
    code = ("import os, sys, ray; from kenv.agents.jobs import Job, run_jobs, check_workers\n"
            f"from kenv.errors import {caught}\n"
            "try:\n"
            f"    run_jobs([{job}], lambda j, r: [], ray={address!r})\n"
            f"except {caught} as e:\n"
            "    open(sys.argv[1], 'w').write(f\"{type(e).__name__} | {e.field if hasattr(e, 'field') else e}\\n\")\n"
            "finally:\n"
            "    ray.shutdown()\n")
    r = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, RAY_USAGE_STATS_ENABLED="0"))
    return r, out.read_text() if out.exists() else ""


def test_a_config_error_raised_in_a_ray_task_arrives_as_itself(cluster, tmp_path):
    r, caught = _run_jobs_on(cluster[0], "Job(('w',), check_workers, (0,))", "ConfigError", tmp_path)
    assert caught == "ConfigError | --workers\n", r.stdout + r.stderr[-2000:]


def test_a_job_whose_worker_dies_every_time_is_a_one_line_job_error(cluster, tmp_path):
    """Past RAY_MAX_RETRIES the run stops with kenv.errors.JobError, one line naming the job
    (the CLI prints it as such): here the job is os._exit, which kills its worker each try."""
    r, caught = _run_jobs_on(cluster[0], "Job(('exit', 'job'), os._exit, (3,))", "JobError", tmp_path)
    ours = caught.splitlines()
    assert len(ours) == 1 and ours[0].startswith("JobError | job exit job failed on Ray after 3 retries"), \
        caught + r.stdout[-2000:] + r.stderr[-2000:]
