"""What ``render_mode="rgb_array"`` costs a step when nobody draws, and when every step is drawn.

    PYTHONPATH=. python benchmarks/bench_render.py [--env ID ...] [--steps 1000] [--rounds 5] [--warmup 300]
    PYTHONPATH=. python benchmarks/bench_render.py --sb3 [--timesteps 2048] [--rounds 3]

Step rates (default): each env is made three times with ``gym.make`` -- without a
render mode (the reference), with ``render_mode="rgb_array"`` and never drawn (what
SB3's ``make_vec_env(id)`` makes: it passes that render mode), and with
``render_mode="rgb_array"`` drawn after every step (RecordVideo's loop) -- and the three
are stepped with the same random actions in ``--rounds`` alternating chunks after
``--warmup`` untimed steps.  Each ratio is the median of the chunks' ratios to the
reference chunk next to them (a burst of load elsewhere spoils one chunk, not the figure).
Target: ``rgb_array, not drawn`` >= 0.9x.

``--sb3``: the issue's acceptance measurement.  SB3 PPO ``learn(--timesteps)`` on
``make_vec_env("kenv/Kernel-v3", n_envs=1)`` (an id string: SB3 passes
``render_mode="rgb_array"``) and on ``make_vec_env(callable)`` with a callable that makes
the env without a render mode, ``--rounds`` rounds of both (in alternating order), one
torch thread; the ratio is the median of the rounds' ratios.  Target: >= 0.9x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import gymnasium as gym  # noqa: E402

import kenv  # noqa: E402,F401
from _common import env_ids  # noqa: E402

MODES = ("plain", "rgb_array, not drawn", "rgb_array, drawn every step")


class _Runner:
    def __init__(self, env_id: str, mode: str, seed: int):
        self.env = gym.make(env_id, **({} if mode == "plain" else {"render_mode": "rgb_array"}))
        self.draw = mode == "rgb_array, drawn every step"
        self.env.action_space.seed(seed)
        self.env.reset(seed=seed)
        if self.draw:
            self.env.render()
        self.seed, self.episodes = seed, 0

    def chunk(self, steps: int) -> float:
        env = self.env
        t0 = time.perf_counter()
        for _ in range(steps):
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            if self.draw:
                env.render()
            if term or trunc:
                self.episodes += 1
                env.reset(seed=self.seed + self.episodes)
                if self.draw:
                    env.render()
        return steps / (time.perf_counter() - t0)


def step_rates(env_id: str, steps: int, rounds: int, warmup: int, seed: int) -> dict[str, float]:
    """{mode: median ratio of its chunks' rates to the plain env's next to them}, plus the plain rate."""
    runners = {m: _Runner(env_id, m, seed) for m in MODES}
    for r in runners.values():
        if warmup:
            r.chunk(warmup)
    ratios: dict[str, list[float]] = {m: [] for m in MODES[1:]}
    plain_rates = []
    for i in range(rounds):
        n = steps // rounds + (i < steps % rounds)
        ref = runners["plain"].chunk(n)
        plain_rates.append(ref)
        for m in MODES[1:]:
            ratios[m].append(runners[m].chunk(n) / ref)
    for r in runners.values():
        r.env.close()
    return {"plain steps/s": statistics.median(plain_rates), **{m: statistics.median(v) for m, v in ratios.items()}}


def sb3_rates(timesteps: int, rounds: int, seed: int) -> tuple[float, float, float]:
    """(median steps/s of PPO learn() on make_vec_env(id), on make_vec_env(callable),
    median of the per-round ratios); each round runs both, in alternating order."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)

    def run(env_arg) -> float:
        venv = make_vec_env(env_arg, n_envs=1, seed=seed)
        model = PPO("MlpPolicy", venv, n_steps=256, batch_size=64, n_epochs=4, seed=seed, device="cpu")
        t0 = time.perf_counter()
        model.learn(timesteps)
        dt = time.perf_counter() - t0
        venv.close()
        return timesteps / dt

    by_id, by_callable, ratios = [], [], []
    for i in range(rounds):
        if i % 2:
            b = run(lambda: gym.make("kenv/Kernel-v3"))
            a = run("kenv/Kernel-v3")
        else:
            a = run("kenv/Kernel-v3")
            b = run(lambda: gym.make("kenv/Kernel-v3"))
        by_id.append(a)
        by_callable.append(b)
        ratios.append(a / b)
    return statistics.median(by_id), statistics.median(by_callable), statistics.median(ratios)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", action="append", help="only this env id (repeatable)")
    ap.add_argument("--steps", type=int, default=1000, help="timed steps per env and mode (default 1000)")
    ap.add_argument("--rounds", type=int, default=5, help="alternating chunks, or learn() runs with --sb3")
    ap.add_argument("--warmup", type=int, default=300, help="untimed steps first (default 300)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sb3", action="store_true", help="SB3 PPO learn() on make_vec_env(id) vs (callable)")
    ap.add_argument("--timesteps", type=int, default=2048, help="learn() timesteps with --sb3 (default 2048)")
    args = ap.parse_args()
    if args.steps < 1 or args.rounds < 1 or args.warmup < 0 or args.timesteps < 1:
        ap.error("--steps, --rounds and --timesteps must be >= 1, --warmup >= 0")
    if args.sb3:
        by_id, by_callable, ratio = sb3_rates(args.timesteps, args.rounds, args.seed)
        print(f"SB3 PPO learn({args.timesteps}) on kenv/Kernel-v3 (n_steps 256, batch 64, 4 epochs, "
              f"one torch thread), median of {args.rounds} runs each:")
        print(f"  make_vec_env('kenv/Kernel-v3') (render_mode='rgb_array'): {by_id:8.0f} steps/s")
        print(f"  make_vec_env(callable, no render_mode):                     {by_callable:8.0f} steps/s")
        print(f"  ratio: {ratio:.3f} (median of the {args.rounds} rounds' ratios; target >= 0.9)")
        return
    ids = env_ids(ap, args.env)
    print(f"{'env':<20} {'plain steps/s':>13} " + " ".join(f"{m:>28}" for m in MODES[1:]))
    for env_id in ids:
        r = step_rates(env_id, args.steps, args.rounds, args.warmup, args.seed)
        print(f"{env_id:<20} {r['plain steps/s']:>13.0f} " + " ".join(f"{r[m]:>27.3f}x" for m in MODES[1:]))


if __name__ == "__main__":
    main()
