"""Wall time of raid6-cyclictest runs, against a reference measured in the same process.

    PYTHONPATH=. python benchmarks/bench_raid6.py [--repeat 3] [--cartpole-steps 20000]

For each configuration: the best of ``--repeat`` wall times, the simulated
events, and the ratio to the reference (``--cartpole-steps`` steps of
gymnasium's CartPole-v1 with random actions), so figures from different
machines can be compared.  The target is < 2 s per run on 32 CPUs.
"""

from __future__ import annotations

import argparse

from _common import best_of, cartpole_reference
from kenv.experiments.raid6_cyclictest import run_raid6_cyclictest

CONFIGS = [
    ("voluntary", "preempt_disable", None),
    ("voluntary", "migrate_disable", None),
    ("voluntary", "cond_resched", None),
    ("full", "preempt_disable", None),
    ("full", "migrate_disable", None),
    ("rt", "preempt_disable", None),
    ("rt", "migrate_disable", None),
    ("full", "migrate_disable", "continuous"),
    ("full", "migrate_disable", "20/50"),
    ("voluntary", "preempt_disable", "continuous"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cartpole-steps", type=int, default=20_000)
    args = ap.parse_args()

    ref, _ = best_of(args.repeat, lambda: cartpole_reference(args.cartpole_steps))
    print(f"reference: {args.cartpole_steps} CartPole-v1 steps = {ref:.3f} s")
    print(f"{'preempt':<10} {'mode':<16} {'load':<11} {'wall s':>7} {'x ref':>6} "
          f"{'events':>8} {'us/event':>8}  max latency")
    for preempt, mode, load in CONFIGS:
        wall, r = best_of(args.repeat, lambda: run_raid6_cyclictest(
            preempt=preempt, mode=mode, load=load))
        print(f"{preempt:<10} {mode:<16} {str(load or '-'):<11} {wall:7.3f} {wall / ref:6.2f} "
              f"{r.events:8d} {wall / r.events * 1e6:8.2f}  {r.max_ns / 1e6:.3f} ms")


if __name__ == "__main__":
    main()
