"""One job runner for ``kenv rediscover`` and ``kenv discover`` (and the benchmark table).

A :class:`Job` is a module-level function and its arguments; :func:`run_jobs` runs a list
of them and hands each result to ``on_done``, which may return further jobs (e.g. the
oracle once every context of a static table is in).  Back-ends:

- inline (``workers == 1`` and no ``ray``): in this process, in order;
- a local pool of ``workers`` *spawned* processes, one torch thread each.  The workers die
  with this process, ``kill -9`` included (Linux ``PR_SET_PDEATHSIG`` and a watchdog
  thread on the parent PID, :func:`_die_with_parent`); on any exception here,
  KeyboardInterrupt included, they are killed before it propagates (:func:`_kill_pool`);
- Ray (``ray="auto"`` or a cluster address, the optional extra ``kenv-gym[ray]``): each job
  is a Ray task carrying its function and arguments; a task whose worker dies is retried
  (``RAY_MAX_RETRIES``), and if it still fails the run stops with an error naming the job.

A job writes nothing into the output folder: one that writes files does so in a
worker-local temporary directory and returns them (:func:`read_tree`); the driver alone
writes them (:func:`write_tree`, atomically, under its lock).  An exception a job raises
(ConfigError included, which pickles) arrives here as itself, on every back-end.
The results come back to this process, in completion order; a job's result depends only
on its arguments, so the output does not depend on the back-end or the number of workers.
``progress``: a label for one tqdm bar over all jobs (on stderr), or None for no bar.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Iterable, Sequence

from pydantic import StringConstraints, TypeAdapter

from kenv.envs.registration import quiet_old_versions
from kenv.errors import ConfigError, JobError
from kenv.schema import check_int, validate

#: times Ray runs a task again when its worker process or node dies (Ray's max_retries)
RAY_MAX_RETRIES = 3
#: bound of --workers (far beyond a useful run)
MAX_WORKERS = 256
#: how to get the Ray back-end (the one-line error of --ray without it)
RAY_INSTALL = "pip install 'kenv-gym[ray]'"


@dataclass(frozen=True)
class Job:
    """``fn(*args)`` in a worker; ``key`` (hashable) names the job in errors and progress.
    ``fn`` is a module-level function (pickled by reference)."""

    key: tuple
    fn: Callable
    args: tuple = ()


def check_workers(workers: Any) -> int:
    """--workers: None is the default, ``min(2, CPUs)``."""
    if workers is None:
        return min(2, os.cpu_count() or 1)
    return check_int(workers, "--workers", 1, MAX_WORKERS)


#: ``--ray``: auto or an address (Ray itself checks the address when it connects)
_RAY_ADDRESS = TypeAdapter(Annotated[str, StringConstraints(strict=True, strip_whitespace=True, min_length=1)])


def check_ray(ray: str | None, flag: str = "--ray") -> str | None:
    """``--ray`` checked before any work: None, ``auto`` or an address; Ray importable."""
    if ray is None:
        return None
    validate(_RAY_ADDRESS, ray, flag, "auto or a Ray cluster address (host:port, ray://host:port)")
    try:
        import ray as _  # noqa: F401
    except ImportError:
        raise ConfigError(flag, ray, f"a run with Ray installed: {RAY_INSTALL}") from None
    return ray


#: the key of a cached job result (:func:`write_cached_doc`) holding the digest of the rest
DIGEST_KEY = "digest"


def doc_digest(doc: dict) -> str:
    """A digest of ``doc`` less :data:`DIGEST_KEY`, as it reads back from its JSON file
    (numpy values plain, keys strings, in sorted order)."""
    from .files import json_default

    plain = json.loads(json.dumps({k: v for k, v in doc.items() if k != DIGEST_KEY}, default=json_default))
    return hashlib.sha256(json.dumps(plain, sort_keys=True).encode()).hexdigest()[:16]


def write_cached_doc(path: str, doc: dict) -> None:
    """Write a finished job's result ``doc`` (a JSON object with its ``fingerprint``) to
    ``path``, atomically, with the digest :func:`cached_doc` checks; ``doc`` is unchanged."""
    from .files import atomic_write_json

    atomic_write_json(path, {**doc, DIGEST_KEY: doc_digest(doc)})


def check_cached(path: str, keys: Sequence[str], fp: str) -> tuple[dict | None, str]:
    """(the result :func:`write_cached_doc` wrote to ``path``, without its digest, "") if it
    is one for the fingerprint ``fp`` and has ``keys``; else (None, why), why "" unless the
    file claims to be that result (its fingerprint) but is not: keys missing, or values
    other than those written (its digest differs: an edited value, another type)."""
    from .files import read_json

    doc = read_json(path)
    if not (isinstance(doc, dict) and doc.get("fingerprint") == fp):
        return None, ""
    if not all(k in doc for k in keys):
        return None, "keys missing: " + ", ".join(k for k in keys if k not in doc)
    if doc.get(DIGEST_KEY) != doc_digest(doc):
        return None, "its values are not those kenv wrote (its digest differs)"
    return {k: v for k, v in doc.items() if k != DIGEST_KEY}, ""


def cached_doc(path: str, keys: Sequence[str], fp: str) -> dict | None:
    """A finished job's cached result (a JSON file in the output folder, written by
    :func:`write_cached_doc`) if it is one for the fingerprint ``fp`` and has ``keys``,
    else None: the job is (re)done.  A damaged or foreign file, or one whose values are
    not those written (its digest), is redone, which loses nothing: it is a function of
    the job's arguments.  (Before the digest a hand-edited value of the right key was
    read as it stood: a traceback where it had another type, a wrong table otherwise.)"""
    return check_cached(path, keys, fp)[0]


def run_jobs(jobs: Iterable[Job], on_done: Callable[[Job, Any], list[Job]], *, workers: int = 1,
             ray: str | None = None, progress: str | None = None) -> None:
    """Run ``jobs`` (see the module docstring); ``on_done(job, result)`` returns further jobs."""
    initial = list(jobs)
    from tqdm import tqdm

    if ray is not None:
        _connect_ray(ray)   # (before the bar: a bad address is one line)

    bar = tqdm(total=len(initial), desc=progress, unit="job", disable=progress is None, file=sys.stderr,
               dynamic_ncols=True)

    def done(job: Job, res: Any) -> list[Job]:
        more = list(on_done(job, res))
        bar.update(1)
        if more:
            bar.total += len(more)
            bar.refresh()
        return more

    try:
        if ray is not None:
            _run_ray(initial, done, ray)
        elif workers == 1:
            _init_worker()
            queue = deque(initial)
            while queue:
                job = queue.popleft()
                queue.extend(done(job, job.fn(*job.args)))
        else:
            _run_pool(initial, done, workers)
    finally:
        bar.close()


def _run_pool(initial: list[Job], done: Callable[[Job, Any], list[Job]], workers: int) -> None:
    import multiprocessing as mp
    import signal
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    pool = ProcessPoolExecutor(max_workers=min(workers, max(1, len(initial))), mp_context=mp.get_context("spawn"),
                               initializer=_init_worker, initargs=(os.getpid(),))

    def submit(job: Job):
        # Workers are started by submit(), in this thread: SIGINT blocked meanwhile, so
        # that a new worker starts with it blocked (the mask survives fork and exec) and
        # ignores it (_init_worker); here it is delivered once unblocked.
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            return pool.submit(job.fn, *job.args)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    try:
        futs = {submit(job): job for job in initial}
        while futs:
            ready, _ = wait(futs, return_when=FIRST_COMPLETED)
            for f in ready:
                job = futs.pop(f)
                for j2 in done(job, f.result()):
                    futs[submit(j2)] = j2
    except BaseException:
        _kill_pool(pool)
        raise
    pool.shutdown(wait=True)


def _ray_task(fn: Callable, args: tuple):
    """A job in a Ray worker: one torch thread, Gymnasium's notice on old ids hidden."""
    from .train import configure_torch

    quiet_old_versions()
    configure_torch()
    return fn(*args)


#: seconds a --ray host:port has to accept a TCP connection before ray.init (which, given
#: a dead address, retries for minutes: measured here, ray 2.60, more than 30 s)
RAY_CONNECT_TIMEOUT_S = 10.0


def _connect_ray(address: str) -> None:
    """Join the cluster at ``address`` (``auto``, ``host:port`` or ``ray://host:port``), or
    a one-line ConfigError within RAY_CONNECT_TIMEOUT_S when nothing answers there."""
    import socket

    import ray

    if ray.is_initialized():
        return

    def refuse(why: str) -> ConfigError:
        return ConfigError("--ray", address, "auto on a node of a running cluster (ray start, docs/scaling.md) "
                           f"or the address of one ({why})")

    host, sep, port = address.split("://")[-1].rpartition(":")
    if sep and address != "auto":
        try:
            with socket.create_connection((host, int(port)), timeout=RAY_CONNECT_TIMEOUT_S):
                pass
        except ValueError:
            raise refuse(f"port {port!r} is not a number") from None
        except OSError as e:
            raise refuse(f"nothing answers at {host}:{port} within {RAY_CONNECT_TIMEOUT_S:g} s: "
                         f"{e.strerror or type(e).__name__}") from None
    try:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    except (ConnectionError, ValueError, RuntimeError) as e:
        raise refuse(f"{type(e).__name__}: {str(e).splitlines()[0][:120]}") from None


def _run_ray(initial: list[Job], done: Callable[[Job, Any], list[Job]], address: str) -> None:
    import ray

    _connect_ray(address)
    task = ray.remote(num_cpus=1, max_retries=RAY_MAX_RETRIES)(_ray_task)
    refs = {task.remote(job.fn, job.args): job for job in initial}
    try:
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            job = refs.pop(ready[0])
            try:
                res = ray.get(ready[0])
            except ray.exceptions.RayTaskError as e:   # the job raised: its own exception, as itself
                cause = e.cause if isinstance(getattr(e, "cause", None), BaseException) else None
                if cause is None:
                    why = str(e).strip().splitlines()[-1][:200]
                    raise JobError(f"job {_name(job)} failed on Ray: {why}") from e
                raise cause from None
            except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                    ray.exceptions.RaySystemError) as e:
                raise JobError(f"job {_name(job)} failed on Ray after {RAY_MAX_RETRIES} retries: "
                               f"{type(e).__name__}; the same command resumes the run") from e
            for j2 in done(job, res):
                refs[task.remote(j2.fn, j2.args)] = j2
    except BaseException:
        for r in refs:
            ray.cancel(r, force=True)
        raise


def _name(job: Job) -> str:
    return " ".join(str(k) for k in job.key)


def read_tree(root: str) -> dict[str, bytes]:
    """Every file under ``root`` (its lock and temporary files left out), by relative path:
    what a job that wrote into a worker-local directory hands back to the driver."""
    tree = {}
    for rel in _tree_names(root):
        with open(os.path.join(root, rel), "rb") as fh:
            tree[rel] = fh.read()
    return tree


def _tree_names(root: str) -> list[str]:
    from .files import LOCK_NAME, TMP_PREFIX

    return sorted(os.path.relpath(os.path.join(dp, f), root) for dp, _, fs in os.walk(root) for f in fs
                  if f != LOCK_NAME and not f.startswith(TMP_PREFIX))


def write_tree(root: str, tree: dict[str, bytes]) -> None:
    """Replace the directory ``root`` by :func:`read_tree`'s files, all or nothing (in the
    driver): written into a staging directory beside it, which then takes its place (two
    renames); a staging or old directory an interrupted call left is removed first."""
    from .files import TMP_PREFIX, atomic_write_bytes

    parent, name = os.path.split(os.path.abspath(root))
    stage, old = (os.path.join(parent, f"{TMP_PREFIX}{what}-{name}") for what in ("new", "old"))
    for d in (stage, old):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(stage)
    for rel, data in tree.items():
        atomic_write_bytes(os.path.join(stage, rel), data)
    if os.path.isdir(root):
        os.rename(root, old)
    os.rename(stage, root)
    shutil.rmtree(old, ignore_errors=True)


@contextmanager
def job_dir(run_dir: str | None, prior: dict[str, bytes] | None = None):
    """Where a job writes its files: ``run_dir`` itself when given (a pool worker on the
    driver's machine, under its lock: a run killed mid-job resumes from the checkpoints
    there); else a worker-local temporary directory holding ``prior`` (a Ray task, maybe on
    another machine: its files go back to the driver, :func:`read_tree`)."""
    if run_dir is not None:
        yield run_dir
        return
    with tempfile.TemporaryDirectory(prefix="kenv-job-") as tmp:
        d = os.path.join(tmp, "run")
        os.makedirs(d)
        for rel, data in (prior or {}).items():
            os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            with open(os.path.join(d, rel), "wb") as f:
                f.write(data)
        yield d


def _kill_pool(pool) -> None:
    """Stop a ProcessPoolExecutor now: its workers killed (SIGKILL), not waited for."""
    procs = list((getattr(pool, "_processes", None) or {}).values())  # CPython's pid -> Process
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        try:
            p.kill()
        except (OSError, ValueError):
            pass
    for p in procs:
        try:
            p.join(timeout=5)
        except (OSError, ValueError, AssertionError):
            pass


def _init_worker(parent_pid: int | None = None) -> None:
    """A worker process: one torch thread, Ctrl-C left to the parent (which stops the
    workers itself), death with the parent (:func:`_die_with_parent`), and Gymnasium's
    notice on old ids hidden, as in the command that started it (kenv.cli)."""
    import signal

    from .train import configure_torch

    if parent_pid is not None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # the parent blocked SIGINT while it started this process (submit): a Ctrl-C
        # pressed meanwhile is now pending here, and ignored
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        _die_with_parent(parent_pid)
    quiet_old_versions()
    configure_torch()


#: Linux prctl(2) option: the signal a process gets when its parent dies
PR_SET_PDEATHSIG = 1
#: seconds between two checks of the watchdog thread
WATCHDOG_PERIOD_S = 0.5


def _die_with_parent(parent_pid: int) -> None:
    """End this process when ``parent_pid`` ends, even by SIGKILL: on Linux the kernel
    sends SIGKILL (prctl PR_SET_PDEATHSIG); everywhere, a daemon thread checks every
    WATCHDOG_PERIOD_S that the parent is still this process's parent (an orphan is
    re-parented) and exits otherwise.  Without this, a killed ``kenv rediscover`` left
    its workers finishing their jobs into --out (and the resource tracker, which ends
    when they do)."""
    import signal
    import threading

    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:  # the parent died before prctl
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(WATCHDOG_PERIOD_S)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="kenv-parent-watchdog", daemon=True).start()
