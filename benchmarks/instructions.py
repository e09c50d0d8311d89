"""Machine instructions per step, counted by valgrind, next to CartPole-v1's.

    PYTHONPATH=. python benchmarks/instructions.py [--env ID ...] [--steps 1500] [--warmup 1000] [--json]

``kenv bench``'s wall-clock ratios move with the machine, not only with its
load: the same simulator (1db2d4a) gave Kernel-v3 0.047-0.052x CartPole-v1 on one
2-core machine of this workplace and 0.067-0.072x on another (presumably
because CartPole spends much of its step in numpy calls and kenv in plain
Python, and CPUs differ in how fast they run each).
A count of instructions (``valgrind --tool=callgrind``) does not depend on the
load.  Two AVX2-only machines with ratios a third apart (Kernel-v3
0.050-0.052x and 0.067-0.072x) gave the same counts to within 0.15%, and an
Intel Xeon with AVX-512 (0.042-0.044x) the same again (Kernel-v3 1,038,811
against 1,039,109; CartPole-v1 81,023 against 81,046).  That says less than
it seems: valgrind's simulated CPU has no AVX-512, so numpy, which picks its
kernels by SIMD level, finds none under it (``__cpu_features__`` there: AVX2,
no AVX512F) and the count is of the AVX2 code.  A count measures the work a step
asks for; how fast a given CPU does that work shows only in the wall-clock
ratio.

Each env (and CartPole-v1) runs ``kenv bench``'s own stepper -- ``gym.make``
with its defaults, uniformly random actions drawn in the loop, resets counted
-- in a child Python under callgrind: ``--warmup`` steps, then the ``--steps`` counted
ones (CartPole four times as many: its steps are short).  The child marks the
counted stretch with two calls the loop does not otherwise make,
``os.getppid()`` before it (``--zero-before=getppid``) and ``os.getpgrp()``
after it (``--dump-before=getpgrp``; a run with more than one dump is an
error), so the count leaves out the interpreter's start-up, the imports and
the warm-up.  It is the dump's ``totals`` (the sum of its cost lines): two
runs of the defaults agreed to within 0.13% per env.  It counts more than the difference of
two whole runs (``cache_sim.py``'s method, which has no markers): 6% more
with 200 steps after 200 on F (CartPole-v1 85,054 per step against 80,037
from two whole callgrind runs and 80,189 from cachegrind's; Raid6Bench-v3
682,078 against 641,476), though the ratio agreed (0.1247 against 0.1250);
1.5-2.5% more at the defaults, against cache_sim.py's own defaults
(CartPole-v1 81,057 against 79,863, Kernel-v3 1,038,556 against
1,014,111).  What the extra is was not found; compare counts of one method
only.  (Without a fixed hash
seed, three CartPole runs gave totals within 0.2% and summary lines a few
percent apart.)  valgrind runs code about 50 times slower: the
defaults take 1.5-4 minutes on 2 cores (``--jobs``, default the number of
CPUs).

The ratio printed, CartPole's instructions per step over the env's, is what
``kenv bench``'s ratio would be on a CPU that ran every instruction in the
same time.  Use it to compare speed changes and machines; ``kenv bench`` stays
the figure the speed target is stated in.
"""

from __future__ import annotations

import json
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import VALGRIND_REFERENCE, parse_valgrind_args, run_under_valgrind, stderr_tail, valgrind_programs
from kenv.envs.bench import WARMUP


#: what a child runs: kenv bench's own stepper (envs/bench.py _Stepper), chunk by chunk
CHILD = """
import os
import sys
from kenv.envs.bench import _Stepper
env_id, warmup, steps, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
stepper = _Stepper(env_id, seed)
if warmup:
    stepper.chunk(warmup)
os.getppid()    # callgrind zeroes its counters here
stepper.chunk(steps)
os.getpgrp()    # and dumps them here
"""

_TOTALS = re.compile(r"^totals:\s*(\d+)", re.MULTILINE)


def per_step(env_id: str, steps: int, warmup: int, seed: int = 0) -> float:
    """Instructions per step of ``steps`` steps of ``env_id`` after ``warmup`` others."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        proc = run_under_valgrind(["--tool=callgrind", "--zero-before=getppid", "--dump-before=getpgrp",
                                   f"--callgrind-out-file={out}"], CHILD, [env_id, warmup, steps, seed])
        dumps = sorted(Path(tmp).glob("callgrind.out.*"))
        if proc.returncode != 0 or len(dumps) != 1:
            raise RuntimeError(f"{env_id}: valgrind run failed (exit {proc.returncode}, {len(dumps)} dumps "
                               f"of the counted steps, 1 expected):\n{stderr_tail(proc)}")
        found = _TOTALS.findall(dumps[0].read_text())
    if len(found) != 1:
        raise RuntimeError(f"{env_id}: no single 'totals:' line in callgrind's dump")
    return int(found[0]) / steps


def main() -> None:
    args, ids = parse_valgrind_args(__doc__.splitlines()[0], 1500, WARMUP, "valgrind --tool=callgrind")
    jobs = valgrind_programs(ids, args.steps)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        counts = list(pool.map(lambda j: per_step(j[0], j[1], args.warmup, args.seed), jobs))
    ref, envs = counts[0], counts[1:]
    rows = [{"id": e, "instructions_per_step": round(n), "ratio_to_cartpole": ref / n}
            for e, n in zip(ids, envs)]
    if args.json:
        print(json.dumps({"cartpole_instructions_per_step": round(ref), "steps": args.steps,
                          "warmup": args.warmup, "envs": rows}))
        return
    print(f"{VALGRIND_REFERENCE}: {ref:,.0f} instructions per step (reference); "
          f"each env counted over {args.steps:,} steps after {args.warmup:,}")
    print(f"{'env':<22} {'instr/step':>12} {'x CartPole':>11}")
    for r in rows:
        print(f"{r['id']:<22} {r['instructions_per_step']:>12,} {r['ratio_to_cartpole']:>11.3f}")


if __name__ == "__main__":
    main()
