"""Cost of the trace hooks: experiment and env-step wall times with recording OFF
(and, for information, ON), as ratios to CartPole-v1 measured in the same run.

    PYTHONPATH=. python benchmarks/bench_trace.py [--repeat 3] [--env-steps 300] [--json]

Machines here are noisy (2 shared cores), so each figure is the best of
``--repeat`` runs, divided by the best of ``--repeat`` CartPole-v1 references
(``--cartpole-steps`` random steps) measured just before it; an experiment's
figure is the wall time of one run (the mean over a few back-to-back runs).  To compare with
the code before the trace hooks existed, run this same script against a copy
of that tree (``PYTHONPATH=/path/to/old/tree python benchmarks/bench_trace.py``):
the "off" rows must agree within noise.  The "on" rows (only when
``kenv.trace`` exists) show what recording costs when it is asked for: an
experiment inside ``kenv.trace.recording()``, an env made with
``render_mode="rgb_array"`` (its episode recorded, the last step kept).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time

import gymnasium as gym
from _common import best_of, cartpole_reference

#: (label, module, function, kwargs, runs per measurement)
EXPERIMENTS = [
    ("hwrng-dd rpi3bplus hwrng_yield 10000 B",
     "kenv.experiments.hwrng_dd", "run_hwrng_dd",
     dict(platform="rpi3bplus", wait="hwrng_yield", nbytes=10000), 20),
    ("hwrng-dd rpi3bplus cpu_relax 10000 B",
     "kenv.experiments.hwrng_dd", "run_hwrng_dd",
     dict(platform="rpi3bplus", wait="cpu_relax", nbytes=10000), 10),
    ("raid6-cyclictest voluntary preempt_disable",
     "kenv.experiments.raid6_cyclictest", "run_raid6_cyclictest",
     dict(preempt="voluntary", mode="preempt_disable"), 2),
    ("raid6-cyclictest full migrate_disable",
     "kenv.experiments.raid6_cyclictest", "run_raid6_cyclictest",
     dict(preempt="full", mode="migrate_disable"), 2),
    ("qperf-tcp-lat workqueue 4K:1024K 5 s/size",
     "kenv.experiments.qperf_tcp_lat", "run_qperf_tcp_lat",
     dict(deferral="workqueue", time_s=5.0, baseline=False), 2),
]

ENV_IDS = ["kenv/RandomMix-v2", "kenv/HwrngWait-v2", "kenv/Raid6Bench-v3", "kenv/Kernel-v3"]


def env_steps(env_id: str, steps: int, seed: int = 0, **kwargs) -> float:
    env = gym.make(env_id, **kwargs)
    env.action_space.seed(seed)
    env.reset(seed=seed)
    t0 = time.perf_counter()
    for i in range(steps):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset(seed=seed + i + 1)
    dt = time.perf_counter() - t0
    env.close()
    return dt


def _recording_ctx(on: bool):
    if not on:
        return contextlib.nullcontext()
    from kenv.trace import recording
    return recording()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cartpole-steps", type=int, default=20_000)
    ap.add_argument("--env-steps", type=int, default=2000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    import importlib

    import kenv  # noqa: F401  (registers the envs)

    try:
        importlib.import_module("kenv.trace")
        modes = [False, True]
    except ImportError:  # a tree from before kenv.trace
        modes = [False]

    cartpole_reference(500)  # warm-up
    rows = []
    for label, mod, fn, kw, reps in EXPERIMENTS:
        run = getattr(importlib.import_module(mod), fn)
        for on in modes:
            ref, _ = best_of(args.repeat, lambda: cartpole_reference(args.cartpole_steps))

            def once(run=run, kw=kw, on=on, reps=reps):
                for _ in range(reps):
                    with _recording_ctx(on):
                        run(**kw)
            once(reps=1)  # warm-up (first-call costs)
            wall = best_of(args.repeat, once)[0] / reps
            rows.append({"what": label, "recording": "on" if on else "off", "wall_s": wall,
                         "ratio_to_cartpole": wall / ref})
    for env_id in ENV_IDS:
        for on in modes:
            ref, _ = best_of(args.repeat, lambda: cartpole_reference(args.cartpole_steps))

            # "on" for an env is render_mode="rgb_array": a recorder on the episode's
            # engine, keeping the last step (what RecordVideo needs); frames not drawn
            kw = {"render_mode": "rgb_array"} if on else {}

            def once(env_id=env_id, kw=kw):
                env_steps(env_id, args.env_steps, **kw)
            env_steps(env_id, 50, **kw)  # warm-up
            wall, _ = best_of(args.repeat, once)
            rows.append({"what": f"{env_id} x{args.env_steps} steps", "recording": "on" if on else "off",
                         "wall_s": wall, "ratio_to_cartpole": wall / ref})
    out = {"kenv": sys.modules["kenv"].__file__, "cartpole_steps": args.cartpole_steps, "rows": rows}
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        print()
        return
    print(f"kenv from {out['kenv']}; reference: {args.cartpole_steps} CartPole-v1 random steps, best of {args.repeat}")
    print(f"{'what':<48} {'rec':>4} {'wall s/run':>10} {'x CartPole':>11}")
    for r in rows:
        print(f"{r['what']:<48} {r['recording']:>4} {r['wall_s']:10.4f} {r['ratio_to_cartpole']:11.3f}")


if __name__ == "__main__":
    main()
