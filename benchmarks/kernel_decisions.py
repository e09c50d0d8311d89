"""What each decision costs inside kenv/Kernel-v3: its step rate with one decision held.

    PYTHONPATH=. python benchmarks/kernel_decisions.py [--steps 600] [--rounds 5] [--warmup 1000]

Kernel-v3 runs the three simulations of the single envs in every step, so its
rate depends on what each of them is asked to do.  This steps it as ``kenv
bench`` does (uniformly random actions, resets counted, ``--warmup`` untimed
steps first, alternating timed chunks with Gymnasium's CartPole-v1 in the same
process, the median of the chunks' ratios), once with every decision random,
then once per choice of each decision with that one held and the other two
random.  A choice whose simulation has little to do shows as a higher ratio:
with ``hwrng_msleep(1000)`` held, for instance, the rng reader sleeps through
every step, and what is left is the cost of the other two subsystems and of
the env layer.
"""

from __future__ import annotations

import argparse

import gymnasium as gym

import kenv  # noqa: F401  (registers the envs)
from kenv.envs.bench import WARMUP, run_bench
from kenv.envs.kernel_env import DIMENSIONS

ENV_ID = "kenv/Kernel-v3"


class HoldDecision(gym.ActionWrapper):
    """Every action with entry ``dim`` replaced by ``choice``."""

    def __init__(self, env, dim: int, choice: int):
        super().__init__(env)
        self.dim, self.choice = dim, choice

    def action(self, action):
        action = action.copy()
        action[self.dim] = self.choice
        return action


def ratio(steps: int, rounds: int, warmup: int, seed: int, wrapper=None) -> float:
    """Kernel-v3's ratio to CartPole-v1, measured by run_bench (``wrapper`` around the env)."""
    (e,) = run_bench(steps=steps, env_ids=[ENV_ID], seed=seed, rounds=rounds, warmup=warmup,
                     wrapper=wrapper).envs
    return e["ratio_to_cartpole"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=600, help="Kernel-v3 steps per case (default 600)")
    ap.add_argument("--rounds", type=int, default=5, help="alternating chunks per case (default 5)")
    ap.add_argument("--warmup", type=int, default=WARMUP,
                    help=f"untimed steps per case first (default {WARMUP}, as kenv bench)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.steps < 1 or args.rounds < 1 or args.warmup < 0:
        ap.error("--steps and --rounds must be >= 1, --warmup >= 0")
    env = gym.make(ENV_ID)
    names = env.unwrapped.actions
    env.close()
    print(f"{'held':<32} {'x CartPole':>10}")
    print(f"{'(nothing: all three random)':<32} {ratio(args.steps, args.rounds, args.warmup, args.seed):>10.3f}")
    for dim, (d, choices) in enumerate(zip(DIMENSIONS, names)):
        for i, c in enumerate(choices):
            r = ratio(args.steps, args.rounds, args.warmup, args.seed,
                      lambda e, dim=dim, i=i: HoldDecision(e, dim, i))
            print(f"{d + ' = ' + c:<32} {r:>10.3f}")


if __name__ == "__main__":
    main()
