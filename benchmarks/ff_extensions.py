"""What each qperf fast-forward extension earns: ``kenv bench`` with it off and on, in one run.

    PYTHONPATH=. nice -n 10 python benchmarks/ff_extensions.py [--env ID ...] [--steps 3000] [--warmup 1000]

An extension of the qperf fast-forward (``kenv.fastforward.qperf_records.EXTENSIONS``:
a take-in beyond the steady round trip, in a file of its own) stays only if it
earns at least 5% on some env (issue #44).  For each extension this runs
``kenv bench``'s measurement (kenv.envs.bench.run_bench: alternating chunks
with CartPole-v1, the median of the chunks' ratios) of the envs that run qperf
with every extension on, and with all but that one, in the same process, and
prints each env's ``x CartPole`` both ways and their ratio (on / off: above 1,
the extension earns that much).  The trajectories are the same either way
(tests/test_qperf_ticks.py); only the time differs.
"""

from __future__ import annotations

import argparse

from kenv.envs.base import FastForwardMemory
from kenv.envs.bench import run_bench
from kenv.fastforward.qperf_records import EXTENSIONS, QperfLearned

#: the envs that run qperf (and so its fast-forward)
QPERF_ENVS = ("kenv/RandomMix-v0", "kenv/RandomMix-v1", "kenv/Kernel-v0", "kenv/Kernel-v1", "kenv/Kernel-v2")


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
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.steps < 1 or args.warmup < 0:
        ap.error(f"--steps must be >= 1 and --warmup >= 0, got {args.steps} and {args.warmup}")
    ids = list(args.env or QPERF_ENVS)
    runs = {"all": run_bench(args.steps, ids, args.seed, warmup=args.warmup, wrapper=with_extensions(EXTENSIONS))}
    for ext in EXTENSIONS:
        rest = tuple(x for x in EXTENSIONS if x != ext)
        runs[ext] = run_bench(args.steps, ids, args.seed, warmup=args.warmup, wrapper=with_extensions(rest))
    on = {e["id"]: e["ratio_to_cartpole"] for e in runs["all"].envs}
    print(f"{'extension':<12} {'env':<20} {'off xCP':>8} {'on xCP':>8} {'on/off':>7}")
    for ext in EXTENSIONS:
        for e in runs[ext].envs:
            print(f"{ext:<12} {e['id']:<20} {e['ratio_to_cartpole']:>8.3f} {on[e['id']]:>8.3f} "
                  f"{on[e['id']] / e['ratio_to_cartpole']:>7.3f}")


if __name__ == "__main__":
    main()
