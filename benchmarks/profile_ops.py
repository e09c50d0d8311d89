"""Where a step's interpreter work goes: bytecodes executed per env step, per function.

    PYTHONPATH=. python benchmarks/profile_ops.py --env kenv/Kernel-v3 [--steps 600] [--top 40]

Wall-clock profiles on these noisy 2-core machines move by more than the
changes worth looking for.  This one counts instead: ``sys.settrace`` with
opcode events over ``--steps`` uniformly random-action steps (resets
included), after ``--warmup`` steps that fill the fast-forwards' learned
records, and prints per step the bytecodes executed and the Python calls
made (a generator's resumption counts as a call), per file and for the
``--top`` functions.  The counts depend on the code and the seed only: run
it before and after a change.  They leave out work done in C (numpy, dict
and list methods, builtins); for that, count machine instructions, e.g.
``valgrind --tool=callgrind`` on a run of N steps and one of 0.
"""

from __future__ import annotations

import argparse

import gymnasium as gym

import kenv  # noqa: F401  (registers the envs)
from _common import OpCounter


def count_ops(env_id: str, warmup: int, steps: int, seed: int = 0):
    """The bytecodes and calls (an :class:`OpCounter`) of ``steps`` steps after ``warmup``."""
    env = gym.make(env_id)
    env.action_space.seed(seed)
    env.reset(seed=seed)
    actions = [env.action_space.sample() for _ in range(warmup + steps)]
    resets = 0

    def step(i):
        nonlocal resets
        _, _, term, trunc, _ = env.step(actions[i])
        if term or trunc:
            resets += 1
            env.reset(seed=seed + resets)

    for i in range(warmup):
        step(i)
    with OpCounter() as counter:
        for i in range(warmup, warmup + steps):
            step(i)
    env.close()
    return counter


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="kenv/RandomMix-v2")
    ap.add_argument("--warmup", type=int, default=300, help="steps before counting (default 300)")
    ap.add_argument("--steps", type=int, default=600, help="steps counted (default 600)")
    ap.add_argument("--top", type=int, default=30, help="functions listed (default 30)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.steps < 1 or args.warmup < 0 or args.top < 0:
        ap.error("--steps must be >= 1, --warmup and --top >= 0")
    counter = count_ops(args.env, args.warmup, args.steps, args.seed)
    ops, calls = counter.ops, counter.calls
    n = args.steps
    print(f"{args.env}: {sum(ops.values()) / n:,.0f} bytecodes and {sum(calls.values()) / n:,.1f} "
          f"calls per step ({n} steps after {args.warmup})")
    print("per file: " + ", ".join(f"{f} {v / n:,.0f}" for f, v in counter.by_file().most_common(12)))
    print(f"{'bytecodes':>10} {'calls':>7}  function")
    for (f, q), v in ops.most_common(args.top):
        print(f"{v / n:10.1f} {calls[(f, q)] / n:7.2f}  {f}:{q}")


if __name__ == "__main__":
    main()
