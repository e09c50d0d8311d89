"""Which kinds of step a kenv env's time goes to, against the time a 0.1x-CartPole step may take.

    PYTHONPATH=. python benchmarks/step_kinds.py [--env ID ...] [--by FIELD ...] [--steps 6000] [--rounds 5] [--warmup 1000]

``benchmarks/step_split.py`` splits the average step into its parts (engine,
glue, ...).  This splits the steps themselves by what happened in them, as
their ``info`` tells: by default the fast-pool mixes both hosts ran
(``mixes``: 0, 1, 2+), the rng wait chosen (``wait``) and whether a raid6
benchmark window ended (``window``); a field an env's info lacks is left out.
A step's cost is mostly set by the rare events in it (a mix, a window's end, a
reader's wakeup), which the fast-forwards cannot skip, so this shows which of
them a speed-up has to make cheaper.

The loop is ``kenv bench``'s: ``gym.make`` with defaults, uniformly random
actions, resets with bench's per-episode seeds, ``--warmup`` untimed steps,
then timed chunks alternating with Gymnasium's CartPole-v1 in the same
process.  Only ``env.step`` is timed (not the action draw or the resets, which
``step_split.py`` reports).  For each kind: its share of the steps, its mean
time per step, and its share of the stepping time; ``budget`` is ten times
CartPole-v1's time per step in the chunks next to them (the whole step's, the
action draw included, as bench counts it).
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time

import gymnasium as gym

import kenv  # noqa: F401  (registers the envs)
from _common import add_chunk_args, check_chunk_args
from kenv.envs.bench import WARMUP, _Stepper

#: the info fields a step is classified by unless --by says otherwise
DEFAULT_BY = ("mixes", "wait", "window")


def _label(field: str, value) -> str:
    if field == "mixes":
        return f"{'2+' if value >= 2 else value} mix{'es' if value != 1 else ''}"
    if field == "window":
        return "window ends" if value is not None else "no window end"
    return str(value)


def _chunk(stepper: _Stepper, steps: int, by: tuple, kinds: dict) -> None:
    """The next ``steps`` steps of ``stepper``'s env, each step's time added to its kind."""
    env = stepper.env
    pc = time.perf_counter
    for _ in range(steps):
        action = env.action_space.sample()
        t0 = pc()
        _, _, term, trunc, info = env.step(action)
        dt = pc() - t0
        kind = tuple(_label(f, info[f]) for f in by if f in info)
        kinds[kind].append(dt)
        stepper.done_steps += 1
        if term or trunc:
            stepper.next_episode()


def step_kinds(env_id: str, by: tuple, steps: int, rounds: int, warmup: int, seed: int = 0):
    """({kind: [seconds of each of its steps]}, CartPole-v1's median us per step)."""
    ref, env = _Stepper("CartPole-v1", seed), _Stepper(env_id, seed)
    try:
        if warmup:
            ref.chunk(warmup)
            env.chunk(warmup)
        kinds: dict[tuple, list[float]] = collections.defaultdict(list)
        refs = []
        for r in range(rounds):
            n = steps // rounds + (r < steps % rounds)
            rate, _ = ref.chunk(5 * n)
            refs.append(1e6 / rate)
            _chunk(env, n, by, kinds)
    finally:
        env.close()
        ref.close()
    return kinds, statistics.median(refs)


def _info_fields(env_id: str) -> set[str]:
    """The fields of ``env_id``'s step info (one step from a reset)."""
    env = gym.make(env_id)
    try:
        env.reset(seed=0)
        return set(env.step(env.action_space.sample())[4])
    finally:
        env.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_chunk_args(ap, steps=6000, warmup=WARMUP)
    ap.add_argument("--by", nargs="+", default=None,
                    help=f"info fields to classify steps by (default: {' '.join(DEFAULT_BY)})")
    args = ap.parse_args()
    ids = check_chunk_args(ap, args)
    if args.by is None:
        args.by = DEFAULT_BY    # each env is classified by those of them its info has
    else:
        fields = set().union(*map(_info_fields, ids))
        for f in args.by:
            if f not in fields:
                ap.error(f"--by: {f!r} is in no selected env's info; allowed: {', '.join(sorted(fields))}")
    for env_id in ids:
        kinds, cartpole_us = step_kinds(env_id, tuple(args.by), args.steps, min(args.rounds, args.steps),
                                        args.warmup, args.seed)
        n = sum(len(v) for v in kinds.values())
        total = sum(sum(v) for v in kinds.values())
        print(f"{env_id}: env.step {total / n * 1e6:.1f} us on average; budget {10 * cartpole_us:.1f} us "
              f"(10 x CartPole-v1's step)")
        print(f"  {'kind':<52}{'steps':>8}{'us/step':>10}{'time':>8}")
        for kind, v in sorted(kinds.items(), key=lambda kv: -sum(kv[1])):
            print(f"  {', '.join(kind) or '(all)':<52}{len(v) / n:>8.1%}{sum(v) / len(v) * 1e6:>10.1f}"
                  f"{sum(v) / total:>8.1%}")


if __name__ == "__main__":
    main()
