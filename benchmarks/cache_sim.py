"""Cache misses and mispredicted branches per step, simulated by valgrind, next to CartPole-v1's.

    PYTHONPATH=. python benchmarks/cache_sim.py [--env ID ...] [--steps 300] [--warmup 1000] [--json]

``benchmarks/instructions.py`` counts the instructions a step executes; on
the machines here kenv's instructions run at only 0.5-0.67 of the rate of
CartPole-v1's (docs/speed.md), so the wall-clock ratio of ``kenv bench`` is
lower than the instruction ratio.  This looks for why, with what valgrind can
simulate (the machines here expose no hardware counters: ``perf stat`` says
``<not supported>``): ``valgrind --tool=cachegrind --cache-sim=yes
--branch-sim=yes``, per 1,000 instructions,

* ``L1i``, ``L1d``: first-level instruction and data cache misses (reads and
  writes; the last level is left out: valgrind models one, and took this
  machine's as 512 MB, where nothing misses);
* ``indirect``: indirect branches (a bytecode interpreter's dispatch takes
  one per bytecode, and more in calls), and the mispredicted conditional
  (``cond mispr``) and indirect (``ind mispr``) branches.

These are valgrind's models: first-level caches of the host's sizes, and a
simple branch predictor (valgrind's manual: 2-bit counters indexed with the
global history for conditional branches, the last target for indirect
ones), not the CPU's own.  They compare two programs' behaviour; they do
not give time.

Each program (CartPole-v1, then each env) runs ``kenv bench``'s own stepper
(``gym.make`` with defaults, uniformly random actions, resets counted) in a
child Python under cachegrind twice: ``--warmup`` steps only, and
``--warmup`` steps then ``--steps`` more (CartPole four times as many).  The
figures per step are the difference of the two runs' whole-program totals
divided by the steps: the start-up, the imports, the warm-up and the exit
cancel out.  (Counting only the stepping stretch with callgrind's
``--zero-before``/``--dump-before`` triggers, as ``instructions.py`` does for
instructions, gave indirect-branch counts twice these in the dump's
``totals:`` line: those triggers are not used here.)  The defaults take 5-8
minutes on 2 cores (``--jobs``).
"""

from __future__ import annotations

import json
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import parse_valgrind_args, run_under_valgrind, stderr_tail, valgrind_programs
from kenv.envs.bench import WARMUP

#: what a child runs: kenv bench's own stepper (envs/bench.py _Stepper)
CHILD = """
import sys
from kenv.envs.bench import _Stepper
env_id, warmup, steps, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
stepper = _Stepper(env_id, seed)
for n in (warmup, steps):
    if n:
        stepper.chunk(n)
"""

#: the figures printed, per 1,000 instructions: (JSON key, column, cachegrind's events summed)
FIGURES = (
    ("l1i_misses", "L1i", ("I1mr",)),
    ("l1d_misses", "L1d", ("D1mr", "D1mw")),
    ("indirect_branches", "indirect", ("Bi",)),
    ("mispredicted_conditional", "cond mispr", ("Bcm",)),
    ("mispredicted_indirect", "ind mispr", ("Bim",)),
)

_EVENTS = re.compile(r"^events:\s*(.+)$", re.MULTILINE)
_SUMMARY = re.compile(r"^summary:\s*([\d ]+)$", re.MULTILINE)


def whole_run(env_id: str, warmup: int, steps: int, seed: int) -> dict[str, int]:
    """cachegrind's ``summary:`` (event name -> count over the whole run) of a
    child that steps ``env_id`` ``warmup`` then ``steps`` times."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cachegrind.out"
        proc = run_under_valgrind(["--tool=cachegrind", "--cache-sim=yes", "--branch-sim=yes",
                                   f"--cachegrind-out-file={out}"], CHILD, [env_id, warmup, steps, seed])
        text = out.read_text() if out.exists() else ""
    names, totals = _EVENTS.findall(text), _SUMMARY.findall(text)
    if proc.returncode != 0 or len(names) != 1 or len(totals) != 1:
        raise RuntimeError(f"{env_id}: cachegrind run failed (exit {proc.returncode}; 'events:' and "
                           f"'summary:' lines expected in its output):\n{stderr_tail(proc)}")
    return dict(zip(names[0].split(), map(int, totals[0].split())))


def per_step(env_id: str, steps: int, warmup: int, seed: int, jobs: int) -> dict[str, float]:
    """Events per step of ``steps`` steps after ``warmup``: the difference of two whole runs."""
    with ThreadPoolExecutor(max_workers=min(2, jobs)) as pool:
        short, long = pool.map(lambda n: whole_run(env_id, warmup, n, seed), (0, steps))
    return {name: (long[name] - short[name]) / steps for name in long}


def per_thousand(events: dict[str, float]) -> dict[str, float]:
    """FIGURES per 1,000 instructions (cachegrind's ``Ir``)."""
    return {key: 1000.0 * sum(events[e] for e in names) / events["Ir"] for key, _, names in FIGURES}


def main() -> None:
    args, ids = parse_valgrind_args(__doc__.splitlines()[0], 300, WARMUP, "valgrind --tool=cachegrind")
    programs = valgrind_programs(ids, args.steps)
    # each program's two runs go at once; programs one after another when --jobs is 2
    with ThreadPoolExecutor(max_workers=max(1, args.jobs // 2)) as pool:
        counts = list(pool.map(lambda p: per_step(p[0], p[1], args.warmup, args.seed, args.jobs), programs))
    rows = [{"id": name, "instructions_per_step": round(c["Ir"]), "per_1000_instructions": per_thousand(c)}
            for (name, _), c in zip(programs, counts)]
    if args.json:
        print(json.dumps({"steps": args.steps, "warmup": args.warmup, "programs": rows}))
        return
    print(f"per 1,000 instructions, valgrind's cache and branch models; each env over {args.steps:,} "
          f"steps after {args.warmup:,} ({programs[0][0]} {programs[0][1]:,})")
    print(f"{'':<22}{'instr/step':>12}" + "".join(f"{col:>11}" for _, col, _ in FIGURES))
    for r in rows:
        print(f"{r['id']:<22}{r['instructions_per_step']:>12,}"
              + "".join(f"{v:>11.1f}" for v in r["per_1000_instructions"].values()))


if __name__ == "__main__":
    main()
