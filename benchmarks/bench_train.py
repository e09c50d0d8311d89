"""Env steps and wall time PPO needs to rediscover each patch, next to PPO on CartPole-v1.

    PYTHONPATH=. python benchmarks/bench_train.py [--envs ID ...] [--seeds 1] [--checkpoint-freq 1024] [--json]

For each env and seed, with the shipped config (configs/train/ppo.yaml):

* ``steps to patch``: the first checkpoint (every ``--checkpoint-freq`` env steps) whose
  policy matches the patch wherever the choice matters, judged as ``kenv rediscover``
  judges the final model (agents/rediscover.py); ``wall to patch`` is the training wall
  time at that checkpoint (the run includes the evaluation callback and checkpoints);
  ``-`` if no checkpoint matches within the budget;
* ``learn s``: a plain ``model.learn(n_timesteps)`` with the same hyperparameters and no
  callbacks;
* ``CartPole s``: the same PPO hyperparameters and the same number of steps on
  gymnasium's CartPole-v1, measured in the same process (a wall-time reference: these
  settings are not meant to solve CartPole); ``x CartPole`` is the ratio.

One torch thread, as in training.  Each env's static-action table (for the "does the
choice matter" verdicts) is computed once and is not part of the timings.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import gymnasium as gym  # noqa: E402

import kenv  # noqa: E402,F401
from kenv.agents import rediscover as rd  # noqa: E402
from kenv.agents import train as tr  # noqa: E402


def plain_learn_wall(cfg: tr.TrainConfig, env_id: str, seed: int) -> float:
    """Wall time of model.learn(n_timesteps) with no callbacks (env construction excluded)."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv

    spec = gym.spec(env_id)
    kwargs = dict(cfg.env_kwargs) if env_id == cfg.env_id else {}
    wrapper = cfg.wrapper() if env_id == cfg.env_id else None
    venv = make_vec_env(lambda **kw: spec.make(**kw), n_envs=cfg.n_envs, seed=seed, env_kwargs=kwargs,
                        wrapper_class=wrapper, vec_env_cls=DummyVecEnv)
    model = tr.algorithms()[cfg.algo](cfg.policy, venv, seed=seed, device="cpu", **cfg.model_kwargs())
    t0 = time.perf_counter()
    model.learn(total_timesteps=cfg.n_timesteps)
    dt = time.perf_counter() - t0
    venv.close()
    return dt


def steps_to_patch(cfg: tr.TrainConfig, base: dict, seed: int, ckpt_freq: int, root: str) -> dict:
    """Train with checkpoints; judge each checkpoint in order until one matches."""
    out = os.path.join(root, f"{tr.env_slug(cfg.env_id)}_seed{seed}")
    res = tr.train(tr.TrainArgs(config=cfg.source, env=cfg.env_id, algo=cfg.algo, seed=seed, out=out,
                                checkpoint_freq=ckpt_freq, eval_episodes=rd.CURVE_EPISODES,
                                summary_episodes=rd.CHOICE_EPISODES), cfg, log=lambda s: None)
    env = tr.make_env(cfg)
    found = None
    for n, path in sorted(tr.list_checkpoints(os.path.join(out, "checkpoints"))):
        model = tr.algorithms()[cfg.algo].load(path, device="cpu")
        choices = rd.learned_choices(env, tr.ModelPolicy(model))
        learned = {"choices": choices, "return_mean": 0.0, "return_ci95": 0.0, "steps": n, "train_wall_s": 0.0,
                   "eval_wall_s": 0.0, "seed": seed, "algo": cfg.algo}
        if rd.build_row(base, learned)["match"]:
            found = {"steps": n, "wall_s": tr.read_json(path[:-4] + ".json")["wall_s"]}
            break
    env.close()
    return {"seed": seed, "budget_steps": res.steps, "train_wall_s": res.wall_s, "to_patch": found}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", nargs="+", default=None, help="env ids (default: every registered kenv/* id)")
    ap.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1 per env (default 1)")
    ap.add_argument("--config", default="ppo")
    ap.add_argument("--checkpoint-freq", type=int, default=1024, help="env steps between judged checkpoints")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    tr.configure_torch()
    env_ids = args.envs or tr.registered_env_ids()
    rows = []
    with tempfile.TemporaryDirectory(prefix="kenv-bench-train-") as root:
        for env_id in env_ids:
            cfg = tr.load_train_config(args.config, env_id)
            t0 = time.perf_counter()
            base = rd.baseline_job(env_id, args.config, None)
            table_s = time.perf_counter() - t0
            runs = [steps_to_patch(cfg, base, s, args.checkpoint_freq, root) for s in range(args.seeds)]
            learn_s = plain_learn_wall(cfg, env_id, 0)
            cart_s = plain_learn_wall(cfg, "CartPole-v1", 0)
            rows.append({"env": env_id, "patched": base["patched"], "n_timesteps": cfg.n_timesteps, "runs": runs,
                         "learn_s": learn_s, "cartpole_s": cart_s, "ratio": learn_s / cart_s,
                         "table_s": table_s})
            if not args.json:
                print(f"... {env_id} done", file=sys.stderr, flush=True)
    if args.json:
        json.dump({"rows": rows}, sys.stdout, indent=2)
        print()
        return
    print(f"PPO with configs/train/{args.config}.yaml, one torch thread; checkpoints judged every "
          f"{args.checkpoint_freq} steps")
    head = (f"{'env':<20} {'seed':>4} {'steps to patch':>14} {'wall to patch':>13} {'budget':>7} {'train s':>8} "
            f"{'learn s':>8} {'CartPole s':>10} {'x CartPole':>10}")
    print(head)
    print("-" * len(head))
    for r in rows:
        for run in r["runs"]:
            tp = run["to_patch"]
            print(f"{r['env']:<20} {run['seed']:>4} {tp['steps'] if tp else '-':>14} "
                  f"{(format(tp['wall_s'], '.1f') + ' s') if tp else '-':>13} {run['budget_steps']:>7} "
                  f"{run['train_wall_s']:>8.1f} {r['learn_s']:>8.1f} {r['cartpole_s']:>10.1f} {r['ratio']:>10.2f}")
    print("\nlearn s / CartPole s: the same PPO hyperparameters and steps on CartPole-v1 in the same process; "
          "train s includes evaluations and checkpoints.")


if __name__ == "__main__":
    main()
