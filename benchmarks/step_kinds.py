"""Which kinds of step a kenv env's time goes to, against the time a 0.1x-CartPole step may take.

    PYTHONPATH=. python benchmarks/step_kinds.py [--env ID ...] [--by FIELD ...] [--steps 6000] [--rounds 5] [--warmup 1000]
    PYTHONPATH=. python benchmarks/step_kinds.py --count [--env ID ...] [--by FIELD ...] [--steps 1500]

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

``--count`` splits the same steps by the bytecodes each ``env.step`` executes
(:class:`_common.OpCounter`) instead of its time: figures that do not move
with the machine's load, so a change's effect on one kind of step shows
exactly (no CartPole-v1 chunks then; per kind also the files its bytecodes
run in).  Bytecodes leave out work done in C, so they rank kinds rather than
predict the time ratio; ``benchmarks/instructions.py`` counts instructions.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time

import gymnasium as gym

import kenv  # noqa: F401  (registers the envs)
from _common import OpCounter, add_chunk_args, check_chunk_args
from kenv.envs.bench import WARMUP, _Stepper

#: the info fields a step is classified by unless --by says otherwise
DEFAULT_BY = ("mixes", "wait", "window")
#: the default --steps: timed, and with --count (counting runs a step about ten times slower)
TIMED_STEPS = 6000
COUNT_STEPS = 1500


def _label(field: str, value) -> str:
    if field == "mixes":
        return f"{'2+' if value >= 2 else value} mix{'es' if value != 1 else ''}"
    if field == "window":
        return "window ends" if value["algo"] else "no window end"   # ("": no window ended)
    return str(value)


def _timed(env, action) -> tuple:
    """(``env.step(action)``, its wall time in seconds)."""
    t0 = time.perf_counter()
    out = env.step(action)
    return out, time.perf_counter() - t0


def _counted(env, action) -> tuple:
    """(``env.step(action)``, its bytecodes per file: :class:`OpCounter`)."""
    with OpCounter() as counter:
        out = env.step(action)
    return out, counter.by_file()


def _chunk(stepper: _Stepper, steps: int, by: tuple, kinds: dict, measure=_timed) -> None:
    """The next ``steps`` steps of ``stepper``'s env, what ``measure`` made of
    each step (its time by default) added to the step's kind."""
    env = stepper.env
    for _ in range(steps):
        action = env.action_space.sample()
        (_, _, term, trunc, info), cost = measure(env, action)
        kind = tuple(_label(f, info[f]) for f in by if f in info)
        kinds[kind].append(cost)
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


def step_kinds_counted(env_id: str, by: tuple, steps: int, warmup: int, seed: int = 0) -> dict:
    """{kind: [the bytecodes per file of each of its steps]} over ``steps`` steps after ``warmup``."""
    env = _Stepper(env_id, seed)
    try:
        if warmup:
            env.chunk(warmup)
        kinds: dict[tuple, list] = collections.defaultdict(list)
        _chunk(env, steps, by, kinds, _counted)
    finally:
        env.close()
    return kinds


def _print_counted(env_id: str, kinds: dict, steps: int, warmup: int) -> None:
    n = sum(len(v) for v in kinds.values())
    ops = {kind: [sum(c.values()) for c in v] for kind, v in kinds.items()}
    total = sum(sum(v) for v in ops.values())
    print(f"{env_id}: env.step {total / n:,.0f} bytecodes on average ({steps} steps after {warmup})")
    print(f"  {'kind':<44}{'steps':>8}{'bytecodes/step':>16}{'bytecodes':>11}  top files (bytecodes/step)")
    for kind, v in sorted(ops.items(), key=lambda kv: -sum(kv[1])):
        files = collections.Counter()
        for c in kinds[kind]:
            files.update(c)
        top = ", ".join(f"{f} {x / len(v):,.0f}" for f, x in files.most_common(4))
        print(f"  {', '.join(kind) or '(all)':<44}{len(v) / n:>8.1%}{sum(v) / len(v):>16,.0f}"
              f"{sum(v) / total:>11.1%}  {top}")


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
    add_chunk_args(ap, steps=TIMED_STEPS, warmup=WARMUP)
    ap.add_argument("--by", nargs="+", default=None,
                    help=f"info fields to classify steps by (default: {' '.join(DEFAULT_BY)})")
    ap.add_argument("--count", action="store_true",
                    help=f"bytecodes per step instead of time (no CartPole-v1 chunks, so no --rounds; "
                         f"--steps default {COUNT_STEPS})")
    ap.set_defaults(steps=None)     # 6000, or COUNT_STEPS with --count
    args = ap.parse_args()
    if args.steps is None:
        args.steps = COUNT_STEPS if args.count else TIMED_STEPS
    ids = check_chunk_args(ap, args)
    if args.by is None:
        args.by = DEFAULT_BY    # each env is classified by those of them its info has
    else:
        fields = set().union(*map(_info_fields, ids))
        for f in args.by:
            if f not in fields:
                ap.error(f"--by: {f!r} is in no selected env's info; allowed: {', '.join(sorted(fields))}")
    for env_id in ids:
        if args.count:
            _print_counted(env_id, step_kinds_counted(env_id, tuple(args.by), args.steps, args.warmup, args.seed),
                           args.steps, args.warmup)
            continue
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
