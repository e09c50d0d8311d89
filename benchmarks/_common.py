"""What every benchmark shares: the CartPole-v1 reference measured in the same run,
and best-of-N timing.  Machines here are noisy; report ratios, not raw seconds."""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym

from kenv.envs.registration import ENVS, RENAMED


def cartpole_reference(steps: int) -> float:
    """Seconds for ``steps`` steps of Gymnasium's CartPole-v1 with random actions."""
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    env.action_space.seed(0)
    t0 = time.perf_counter()
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()
    dt = time.perf_counter() - t0
    env.close()
    return dt


def best_of(n: int, fn):
    """(best wall time of ``n`` calls of ``fn``, the last result)."""
    best, out = None, None
    for _ in range(n):
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best, out


def add_chunk_args(ap: argparse.ArgumentParser, steps: int, warmup: int) -> None:
    """The options of a benchmark that steps envs in chunks alternating with
    CartPole-v1: --env, --steps (default ``steps``), --rounds, --warmup, --seed."""
    ap.add_argument("--env", action="append", help="only this env id (repeatable)")
    ap.add_argument("--steps", type=int, default=steps, help=f"timed steps per env (default {steps})")
    ap.add_argument("--rounds", type=int, default=5, help="alternating chunks per env (default 5)")
    ap.add_argument("--warmup", type=int, default=warmup, help=f"untimed steps first (default {warmup})")
    ap.add_argument("--seed", type=int, default=0)


def check_chunk_args(ap: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The env ids asked for (:func:`env_ids`), after checking the options of
    :func:`add_chunk_args` (an argparse error naming them otherwise)."""
    if args.steps < 1 or args.rounds < 1 or args.warmup < 0:
        ap.error("--steps and --rounds must be >= 1, --warmup >= 0")
    return env_ids(ap, args.env)


def env_ids(ap: argparse.ArgumentParser, chosen: list[str] | None) -> list[str]:
    """The ``--env`` ids asked for (all kenv envs if none; an old id of
    kenv.envs.registration.RENAMED only when asked for), each checked against
    the registered ones (an argparse error naming it otherwise)."""
    known = [e[0] for e in ENVS]
    for env_id in chosen or []:
        if env_id not in known and env_id not in RENAMED:
            ap.error(f"--env: unknown env {env_id!r}; allowed: {', '.join(known)}")
    return list(chosen or known)


#: the reference a valgrind benchmark counts next to the kenv envs, and its
#: steps per kenv step counted (its steps are short: more of them, less noise)
VALGRIND_REFERENCE = "CartPole-v1"
VALGRIND_REFERENCE_STEPS = 4


def valgrind_programs(ids: list[str], steps: int) -> list[tuple[str, int]]:
    """(program, steps counted) of a valgrind benchmark: the reference first, then ``ids``."""
    return [(VALGRIND_REFERENCE, steps * VALGRIND_REFERENCE_STEPS)] + [(e, steps) for e in ids]


def add_valgrind_args(ap: argparse.ArgumentParser, steps: int, warmup: int) -> None:
    """The options of a benchmark that runs ``kenv bench``'s stepper under
    valgrind in child processes: --env, --steps (default ``steps``), --warmup,
    --seed, --jobs, --json."""
    ap.add_argument("--env", action="append", help="only this env id (repeatable)")
    ap.add_argument("--steps", type=int, default=steps, help=f"counted steps per env (default {steps})")
    ap.add_argument("--warmup", type=int, default=warmup,
                    help=f"steps before the counted ones, as kenv bench's (default {warmup})")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="valgrind runs at once (default: the number of CPUs)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def check_valgrind_args(ap: argparse.ArgumentParser, args: argparse.Namespace, tool: str) -> list[str]:
    """The env ids asked for (:func:`env_ids`), after checking the options of
    :func:`add_valgrind_args` and that valgrind is on PATH (``tool``: what the
    benchmark runs it as, for the error); an argparse error naming the option
    otherwise."""
    for name, low in (("steps", 1), ("warmup", 0), ("jobs", 1)):
        value = getattr(args, name)
        if value < low:
            ap.error(f"--{name}: {value}; allowed: an integer >= {low}")
    ids = env_ids(ap, args.env)
    if shutil.which("valgrind") is None:
        ap.error(f"valgrind not found on PATH: this benchmark runs {tool}")
    return ids


def parse_valgrind_args(description: str, steps: int, warmup: int, tool: str) -> tuple[argparse.Namespace, list[str]]:
    """A valgrind benchmark's command line: its options (:func:`add_valgrind_args`),
    parsed and checked (:func:`check_valgrind_args`); the options and the env ids."""
    ap = argparse.ArgumentParser(description=description)
    add_valgrind_args(ap, steps=steps, warmup=warmup)
    args = ap.parse_args()
    return args, check_valgrind_args(ap, args, tool)


def run_under_valgrind(valgrind_args: list[str], child: str, child_args: list) -> subprocess.CompletedProcess:
    """``valgrind VALGRIND_ARGS python -c CHILD CHILD_ARGS``, output captured.

    The child has the repository on its path, a fixed hash seed, and OpenBLAS
    held to one thread: its threads, started at numpy's import, spin for a
    time-dependent while, and whole runs of the same child differed by up to
    15M instructions with them (within 10K without)."""
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    cmd = ["valgrind", *valgrind_args, sys.executable, "-c", child, *map(str, child_args)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def stderr_tail(proc: subprocess.CompletedProcess, lines: int = 15) -> str:
    """The last ``lines`` lines of a failed child's standard error, for the error raised."""
    return "\n".join(proc.stderr.strip().splitlines()[-lines:])


class OpCounter:
    """``with OpCounter() as c:`` counts the bytecodes executed and the Python
    calls made inside the block (``sys.settrace`` with opcode events; a
    generator's resumption counts as a call), per (file name, function).
    The counts depend on the code and the inputs only, not on the machine's
    load; they leave out work done in C (numpy, dict and list methods,
    builtins).  Counting slows the code it counts by about ten times."""

    def __init__(self) -> None:
        self.ops: collections.Counter = collections.Counter()
        self.calls: collections.Counter = collections.Counter()

    def _trace(self, frame, event, arg):
        code = frame.f_code
        key = (os.path.basename(code.co_filename), code.co_qualname)
        if event == "call":
            frame.f_trace_opcodes = True
            self.calls[key] += 1
        elif event == "opcode":
            self.ops[key] += 1
        return self._trace

    def __enter__(self) -> "OpCounter":
        sys.settrace(self._trace)
        return self

    def __exit__(self, *exc) -> None:
        sys.settrace(None)

    def by_file(self) -> collections.Counter:
        """Bytecodes per file name."""
        out: collections.Counter = collections.Counter()
        for (f, _), v in self.ops.items():
            out[f] += v
        return out
