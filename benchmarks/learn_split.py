"""Where SB3 PPO ``learn()`` spends its time, per env step, for kenv ids and CartPole-v1.

    PYTHONPATH=. python benchmarks/learn_split.py [--env ID ...] [--steps 4096] [--rounds 2] [--json]

For each kenv id, ``model.learn(--steps)`` with the id's shipped block of
configs/train/ppo.yaml, built as benchmarks/bench_learn.py builds it, then CartPole-v1 with
the same block and with the RL Zoo's CartPole-v1 block.  Wall time per env step, split
where it is spent (medians over ``--rounds``; env and model construction untimed):

* ``env step``: the envs' own ``step()`` (the simulation, Gymnasium's wrappers, SB3's Monitor);
* ``reset``: the envs' resets at episode ends (DummyVecEnv resets inside its ``step_wait``);
* ``vec env``: the rest of DummyVecEnv's ``step_wait``: its buffers and the deep copy of
  every step's ``info`` dicts;
* ``policy``: the rest of collecting rollouts: the policy forward over the batch of envs,
  sampling, the rollout buffer, callbacks, and the rollout's last value forward and its
  returns and advantages (SB3's ``collect_rollouts`` computes them before
  ``on_rollout_end``);
* ``updates``: the rest of ``learn()``: the gradient updates (``PPO.train``), logging and
  ``learn()``'s set-up (the vec env's first reset is counted in ``reset`` and ``vec env``).

The parts add up to ``total``.

A second table gives, for each kenv id, learn()'s ratio to CartPole-v1 (``same``: CartPole
with the id's block; ``shipped``: with the Zoo's), computed from these totals, and the
ratio it would have if the id's env side (env step, reset, vec env) cost what CartPole's
does under the same block (``if env = CartPole's``): the most that a faster simulation
could give with SB3's policy and updates as they are.

Probes: a ``gymnasium.Wrapper`` around each env copy (outermost) times step and reset; a
``VecEnvWrapper`` times ``step_wait``; a callback marks each rollout's start and end.  They
add a few microseconds per step, the same on both sides.  One torch thread, as in training.
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import gymnasium as gym  # noqa: E402
from stable_baselines3.common.callbacks import BaseCallback  # noqa: E402
from stable_baselines3.common.vec_env import VecEnvWrapper  # noqa: E402

import kenv  # noqa: E402,F401
from benchmarks.bench_learn import build, parse_learn_args, zoo_cartpole_config  # noqa: E402
from kenv.agents import config as kc  # noqa: E402
from kenv.agents import train as tr  # noqa: E402

PARTS = ("env step", "reset", "vec env", "policy", "updates")


class Clock:
    """Seconds spent in each part of one ``learn()``."""

    def __init__(self) -> None:
        self.s = {"step": 0.0, "reset": 0.0, "step_wait": 0.0, "vec_reset": 0.0, "collect": 0.0}
        self.rollout_t0 = 0.0

    def add(self, part: str, dt: float) -> None:
        self.s[part] += dt


class TimedEnv(gym.Wrapper):
    """Times the wrapped env's ``step`` and ``reset`` into a :class:`Clock`."""

    def __init__(self, env: gym.Env, clock: Clock) -> None:
        super().__init__(env)
        self.clock = clock

    def step(self, action):
        t0 = time.perf_counter()
        out = self.env.step(action)
        self.clock.add("step", time.perf_counter() - t0)
        return out

    def reset(self, **kwargs):
        t0 = time.perf_counter()
        out = self.env.reset(**kwargs)
        self.clock.add("reset", time.perf_counter() - t0)
        return out


class TimedVecEnv(VecEnvWrapper):
    """Times the vec env's ``step_wait`` and ``reset`` into a :class:`Clock`."""

    def __init__(self, venv, clock: Clock) -> None:
        super().__init__(venv)
        self.clock = clock

    def reset(self):
        t0 = time.perf_counter()
        out = self.venv.reset()
        self.clock.add("vec_reset", time.perf_counter() - t0)
        return out

    def step_wait(self):
        t0 = time.perf_counter()
        out = self.venv.step_wait()
        self.clock.add("step_wait", time.perf_counter() - t0)
        return out


class RolloutClock(BaseCallback):
    """Adds each rollout's collection time to a :class:`Clock`."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock

    def _on_rollout_start(self) -> None:
        self.clock.rollout_t0 = time.perf_counter()

    def _on_rollout_end(self) -> None:
        self.clock.add("collect", time.perf_counter() - self.clock.rollout_t0)

    def _on_step(self) -> bool:
        return True


def split(cfg: kc.TrainConfig, env_id: str, steps: int, seed: int) -> dict[str, float]:
    """Microseconds per env step of one ``learn(steps)``: the total and each of :data:`PARTS`."""
    clock = Clock()
    venv, model = build(cfg, env_id, seed, outer=lambda env: TimedEnv(env, clock),
                        outer_vec=lambda v: TimedVecEnv(v, clock))
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps, callback=RolloutClock(clock))
    total = time.perf_counter() - t0
    n = model.num_timesteps
    venv.close()
    s = clock.s
    # The vec env's first reset (learn() makes it before the first rollout) is outside the
    # rollouts; its envs' resets count as resets, the rest as the vec env's.  The parts add up
    # to the total, and each is a difference of nested intervals (>= 0).
    parts = {"env step": s["step"], "reset": s["reset"],
             "vec env": s["step_wait"] + s["vec_reset"] - s["step"] - s["reset"],
             "policy": s["collect"] - s["step_wait"], "updates": total - s["collect"] - s["vec_reset"]}
    return {"total": total / n * 1e6, **{k: v / n * 1e6 for k, v in parts.items()}}


def median_split(runs: list[dict[str, float]]) -> dict[str, float]:
    """The split of the round with the median total (the mean of the two middle rounds for an
    even count): its parts add up to its total, as the tables say, where medians taken part by
    part (each from another round) did not with three rounds or more."""
    ordered = sorted(runs, key=lambda r: r["total"])
    mid = ordered[(len(ordered) - 1) // 2:len(ordered) // 2 + 1]
    return {k: sum(r[k] for r in mid) / len(mid) for k in runs[0]}


ENV_SIDE = ("env step", "reset", "vec env")


def ratios(own: dict[str, float], same: dict[str, float], zoo: dict[str, float]) -> dict[str, float]:
    """learn()'s rates against CartPole-v1 from one id's split and CartPole's (same block,
    Zoo block): now, and with the id's env side as cheap as CartPole's under the same block."""
    env_as_cartpole = own["total"] - sum(own[p] for p in ENV_SIDE) + sum(same[p] for p in ENV_SIDE)
    return {"same": same["total"] / own["total"], "shipped": zoo["total"] / own["total"],
            "same if env = CartPole's": same["total"] / env_as_cartpole,
            "shipped if env = CartPole's": zoo["total"] / env_as_cartpole}


def main() -> None:
    args, ids = parse_learn_args(__doc__.splitlines()[0], 4096, 2, "rounds, medians taken")
    tr.configure_torch()
    zoo = zoo_cartpole_config()
    rows, bounds = [], []
    for env_id in ids:
        cfg = kc.load_train_config("ppo", env_id)
        sides = {env_id: (cfg, env_id), "CartPole-v1, same": (cfg, "CartPole-v1"), "CartPole-v1, Zoo": (zoo, "CartPole-v1")}
        runs: dict[str, list] = {k: [] for k in sides}
        for _ in range(args.rounds):
            for name, (c, e) in sides.items():
                runs[name].append(split(c, e, args.steps, args.seed))
        med = {name: median_split(runs[name]) for name in sides}
        rows += [{"config": env_id, "run": name, **med[name]} for name in sides]
        bounds.append({"env": env_id, **ratios(*med.values())})
        if not args.json:
            print(f"... {env_id} done", file=sys.stderr, flush=True)
    if args.json:
        json.dump({"steps": args.steps, "rounds": args.rounds, "unit": "us per env step", "rows": rows,
                   "ratios": bounds}, sys.stdout, indent=2)
        print()
        return
    print(f"PPO learn(), {args.steps} env steps, microseconds per env step (median of {args.rounds}), "
          "one torch thread; config: the kenv id's shipped block")
    print_table("run", rows, ["total", *PARTS], 0, width=8)
    print()
    print("learn() rate / CartPole-v1's, from the totals above; 'if env = CartPole's': the id's env side")
    print("(env step, reset, vec env) as cheap as CartPole's under the same block")
    print_table("env", bounds, list(bounds[0])[1:], 2)


def print_table(key: str, rows: list[dict], cols: list[str], digits: int, width: int = 0) -> None:
    """A text table: a line per row, its ``key`` first, then ``cols`` right-aligned (at least
    ``width`` wide) with ``digits`` decimals."""
    w = max(len(key), *(len(r[key]) for r in rows))
    widths = [max(width, len(c)) for c in cols]
    head = f"{key:<{w}} " + " ".join(f"{c:>{n}}" for c, n in zip(cols, widths))
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r[key]:<{w}} " + " ".join(f"{r[c]:>{n}.{digits}f}" for c, n in zip(cols, widths)))

if __name__ == "__main__":
    main()
