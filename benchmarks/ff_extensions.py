"""What each qperf fast-forward extension earns: ``kenv bench`` with it off and on, in one run.

    PYTHONPATH=. nice -n 10 python benchmarks/ff_extensions.py [--env ID ...] [--steps 3000] [--warmup 1000] [--repeats 3]

An extension of the qperf fast-forward (``kenv.fastforward.qperf_records.EXTENSIONS``:
a take-in beyond the steady round trip, in a file of its own) stays only if it
earns at least 5% on some env (issue #44).  For each extension this runs
``kenv bench``'s measurement (kenv.envs.bench.run_bench: alternating chunks
with CartPole-v1, the median of the chunks' ratios) of the envs that run qperf
with every extension on ("on"), and with all but that one ("off"), in the same
process, and prints each env's ``x CartPole`` both ways and their ratio (on / off: above 1,
the extension earns that much).  Each extension is measured in ``--repeats``
off/on pairs (off first, then on first, ...: a drift of the machine's load
spoils neither side alone); the figures are the medians, ``on/off`` the median
of the pairs' ratios.  The trajectories are the same either way
(tests/test_qperf_extensions.py); only the time differs.
"""

from __future__ import annotations

import argparse
import statistics

from kenv.envs.base import FastForwardMemory
from kenv.envs.bench import run_bench
from kenv.fastforward.qperf_records import EXTENSIONS, QperfLearned

#: the envs that run qperf (and so its fast-forward)
QPERF_ENVS = ("kenv/RandomMix-v2", "kenv/RandomMixPhased-v0", "kenv/Kernel-v3", "kenv/KernelBoot-v0", "kenv/KernelPhased-v0")


def with_extensions(extensions: tuple):
    """A run_bench wrapper: the env's qperf fast-forward memory with only ``extensions``."""
    def wrap(env):
        memory = FastForwardMemory()
        memory.qperf = QperfLearned(extensions=extensions)
        env.unwrapped.ff_memory = memory
        return env
    return wrap


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", action="append", choices=QPERF_ENVS, help="only this env id (repeatable)")
    ap.add_argument("--steps", type=int, default=3000, help="timed steps per env (default 3000)")
    ap.add_argument("--warmup", type=int, default=1000, help="untimed steps of each env first (default 1000)")
    ap.add_argument("--repeats", type=int, default=3, help="off/on pairs per extension (default 3)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.steps < 1 or args.warmup < 0 or args.repeats < 1:
        ap.error(f"--steps and --repeats must be >= 1 and --warmup >= 0, got {args.steps}, {args.repeats} "
                 f"and {args.warmup}")
    ids = list(args.env or QPERF_ENVS)
    print(f"{'extension':<12} {'env':<20} {'off xCP':>8} {'on xCP':>8} {'on/off':>7}")
    for ext in EXTENSIONS:
        sides = {True: EXTENSIONS, False: tuple(x for x in EXTENSIONS if x != ext)}
        xcp: dict = {(env_id, on): [] for env_id in ids for on in (True, False)}
        for r in range(args.repeats):
            for on in ((False, True) if r % 2 == 0 else (True, False)):    # off/on, then on/off, ...
                res = run_bench(args.steps, ids, args.seed, warmup=args.warmup, wrapper=with_extensions(sides[on]))
                for e in res.envs:
                    xcp[e["id"], on].append(e["ratio_to_cartpole"])
        for env_id in ids:
            on, off = xcp[env_id, True], xcp[env_id, False]
            ratio = statistics.median(a / b for a, b in zip(on, off))
            print(f"{ext:<12} {env_id:<20} {statistics.median(off):>8.3f} {statistics.median(on):>8.3f} "
                  f"{ratio:>7.3f}", flush=True)


if __name__ == "__main__":
    main()
