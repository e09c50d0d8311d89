"""Where a kenv step's wall time goes, against the time a 0.1x-CartPole step may take.

    PYTHONPATH=. python benchmarks/step_split.py [--env ID ...] [--steps 2000] [--rounds 5] [--warmup 1000]

``kenv bench`` gives one ratio per env.  This splits the same loop (uniformly
random actions drawn in the loop, resets counted, ``--warmup`` untimed steps
first, timed chunks alternating with Gymnasium's CartPole-v1 in the same
process) into its parts, timed where they run:

* ``sample``: ``action_space.sample()``;
* ``engine``: the simulated kernel's event loop (the outermost
  :meth:`kenv.sim.engine.Engine.run` inside a step: every simulated task,
  interrupt, timer and fast-forward of the step);
* ``glue``: the rest of ``env.step``: Gymnasium's wrappers, the action check,
  the subsystems' step set-up and accounting, reward, observation and info;
* ``reset``: ``env.reset`` when an episode ends, per step.

Each part is the median over the chunks of its time per step; ``budget`` is
ten times CartPole-v1's time per step in the chunks next to them, what a
step may take for the env to run at 0.1x.  ``engine / budget`` above 1 means
that the simulation alone, with an env layer that cost nothing, would be
slower than 0.1x.  The timers add about 0.2 us to a step.
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym

import kenv  # noqa: F401  (registers the envs)
from _common import add_chunk_args, check_chunk_args
from kenv.envs.bench import WARMUP, _Stepper
from kenv.sim.engine import Engine

PARTS = ("sample", "glue", "engine", "reset")


class _EngineClock:
    """Wall time inside the outermost Engine.run calls, summed (installed on the class)."""

    def __init__(self) -> None:
        self.total = 0.0
        self._depth = 0
        self._run = Engine.run

    def install(self) -> None:
        clock, run = self, self._run

        def timed_run(engine, until=None, stop=None):
            clock._depth += 1
            t0 = time.perf_counter() if clock._depth == 1 else 0.0
            try:
                return run(engine, until, stop)
            finally:
                if clock._depth == 1:
                    clock.total += time.perf_counter() - t0
                clock._depth -= 1

        Engine.run = timed_run

    def uninstall(self) -> None:
        Engine.run = self._run


def _chunk(env, steps: int, seed: int, done: list[int], clock: _EngineClock) -> dict[str, float]:
    """Seconds per step of each part over the next ``steps`` steps."""
    pc = time.perf_counter
    t_sample = t_step = t_reset = 0.0
    engine0 = clock.total
    for _ in range(steps):
        t0 = pc()
        action = env.action_space.sample()
        t1 = pc()
        _, _, term, trunc, _ = env.step(action)
        t2 = pc()
        t_sample += t1 - t0
        t_step += t2 - t1
        done[0] += 1
        if term or trunc:
            r0 = clock.total
            env.reset(seed=seed + done[0])
            t_reset += pc() - t2
            clock.total = r0          # a reset's boot is the reset's, not the steps'
    engine = clock.total - engine0
    return {"sample": t_sample / steps, "glue": (t_step - engine) / steps, "engine": engine / steps,
            "reset": t_reset / steps}


def split(env_id: str, steps: int, rounds: int, warmup: int, seed: int = 0) -> dict:
    """The parts of ``env_id``'s step and CartPole's time per step, in us (medians over the chunks)."""
    ref = _Stepper("CartPole-v1", seed)
    env = gym.make(env_id)
    env.action_space.seed(seed)
    env.reset(seed=seed)
    clock = _EngineClock()
    clock.install()
    done = [0]
    try:
        if warmup:
            ref.chunk(warmup)
            _chunk(env, warmup, seed, done, clock)
        rows, refs = [], []
        for r in range(rounds):
            n = steps // rounds + (r < steps % rounds)
            rate, _ = ref.chunk(5 * n)
            refs.append(1e6 / rate)
            rows.append(_chunk(env, n, seed, done, clock))
    finally:
        clock.uninstall()
        env.close()
        ref.close()
    out = {p: statistics.median(row[p] * 1e6 for row in rows) for p in PARTS}
    out["total"] = statistics.median(sum(row.values()) * 1e6 for row in rows)
    out["cartpole"] = statistics.median(refs)
    out["budget"] = 10 * out["cartpole"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_chunk_args(ap, steps=2000, warmup=WARMUP)
    args = ap.parse_args()
    ids = check_chunk_args(ap, args)
    print(f"{'env':<20}" + "".join(f"{p:>8}" for p in PARTS + ("total",))
          + f"{'budget':>8}{'engine/budget':>15}   (us per step)")
    for env_id in ids:
        s = split(env_id, args.steps, min(args.rounds, args.steps), args.warmup, args.seed)
        print(f"{env_id.removeprefix('kenv/'):<20}" + "".join(f"{s[p]:8.1f}" for p in PARTS + ("total",))
              + f"{s['budget']:8.1f}{s['engine'] / s['budget']:15.2f}")


if __name__ == "__main__":
    main()
