"""SB3 PPO ``learn()`` throughput of every kenv id against CartPole-v1, measured in one run.

    PYTHONPATH=. python benchmarks/bench_learn.py [--env ID ...] [--steps 2048] [--rounds 3] [--json]

For each kenv id, two comparisons, each a median over ``--rounds`` rounds alternating
kenv and CartPole-v1 (a fresh model per round; env and model construction untimed):

* ``same``: the id's shipped block of configs/train/ppo.yaml on both sides (same
  n_envs, rollout, batch size, epochs and network);
* ``shipped``: the id's shipped block against the RL Zoo's CartPole-v1 PPO block
  (:data:`ZOO_CARTPOLE_PPO`).

Figures are env steps per wall second of ``model.learn(--steps)``; the ratio is kenv / CartPole.
One torch thread, as in training (agents/train.py configure_torch).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from types import MappingProxyType

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import gymnasium as gym  # noqa: E402

import kenv  # noqa: E402,F401
from benchmarks._common import env_ids  # noqa: E402
from kenv.agents import config as kc  # noqa: E402
from kenv.agents import train as tr  # noqa: E402
from kenv.schema import cli_train_seed  # noqa: E402

#: RL Baselines3 Zoo, hyperparams/ppo.yml, block ``CartPole-v1`` (n_timesteps 1e5 there;
#: the benchmark times --steps instead).  Source: github.com/DLR-RM/rl-baselines3-zoo, checked
#: against its hyperparams/ppo.yml at commit 00128b5d46d4 (the values below are that block's).
ZOO_CARTPOLE_PPO = MappingProxyType({
    "n_envs": 8,
    "n_timesteps": 100000,
    "policy": "MlpPolicy",
    "n_steps": 32,
    "batch_size": 256,
    "gae_lambda": 0.8,
    "gamma": 0.98,
    "n_epochs": 20,
    "ent_coef": 0.0,
    "learning_rate": "lin_0.001",
    "clip_range": "lin_0.2",
})


def zoo_cartpole_config() -> kc.TrainConfig:
    """The Zoo's CartPole-v1 block, validated as kenv validates its own."""
    return kc.validate_block(dict(ZOO_CARTPOLE_PPO), "CartPole-v1", "ppo", "rl-baselines3-zoo hyperparams/ppo.yml")


def build(cfg: kc.TrainConfig, env_id: str, seed: int, outer=None, outer_vec=None):
    """The vec env and PPO model ``learn()`` is timed on: ``cfg``'s hyperparameters on ``env_id``
    (its kwargs and wrapper where ``cfg`` is ``env_id``'s own), ``n_envs`` copies in a DummyVecEnv
    as ``kenv train`` makes them.  ``outer`` wraps each copy last and ``outer_vec`` the vec env
    (a benchmark's probes)."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv

    spec = gym.spec(env_id)
    own = env_id == cfg.env_id
    inner = cfg.wrapper() if own else None

    def wrap(env):
        env = inner(env) if inner is not None else env
        return outer(env) if outer is not None else env

    venv = make_vec_env(lambda **kw: spec.make(**kw), n_envs=cfg.n_envs, seed=seed,
                        env_kwargs=dict(cfg.env_kwargs) if own else {}, wrapper_class=wrap, vec_env_cls=DummyVecEnv)
    if outer_vec is not None:
        venv = outer_vec(venv)
    return venv, tr.build_model(cfg, venv, seed)


def learn_rate(cfg: kc.TrainConfig, env_id: str, steps: int, seed: int) -> float:
    """Env steps per wall second of ``model.learn(steps)`` with ``cfg``'s hyperparameters on ``env_id``."""
    venv, model = build(cfg, env_id, seed)
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps)
    dt = time.perf_counter() - t0
    n = model.num_timesteps
    venv.close()
    return n / dt


def alternate(kenv_side, cart_side, rounds: int) -> tuple[float, float]:
    """Median rates of the two sides over ``rounds`` rounds, kenv then CartPole in each."""
    a, b = [], []
    for _ in range(rounds):
        a.append(kenv_side())
        b.append(cart_side())
    return statistics.median(a), statistics.median(b)


def parse_learn_args(description: str, steps: int, rounds: int, rounds_help: str) -> tuple[argparse.Namespace, list]:
    """The flags of the learn() benchmarks (``--env``, ``--steps``, ``--rounds``, ``--seed``,
    ``--json``), checked (an argparse error naming the flag), and the env ids chosen."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--env", action="append", help="only this env id (repeatable)")
    ap.add_argument("--steps", type=int, default=steps, help=f"env steps per learn() (default {steps})")
    ap.add_argument("--rounds", type=int, default=rounds, help=f"{rounds_help} (default {rounds})")
    ap.add_argument("--seed", type=cli_train_seed, default=0, help="training seed (default 0)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.steps < 1 or args.rounds < 1:
        ap.error(f"--steps {args.steps} / --rounds {args.rounds}: both must be >= 1")
    return args, env_ids(ap, args.env)


def main() -> None:
    args, ids = parse_learn_args(__doc__.splitlines()[0], 2048, 3, "alternating rounds per comparison")
    tr.configure_torch()
    zoo = zoo_cartpole_config()
    rows = []
    for env_id in ids:
        cfg = kc.load_train_config("ppo", env_id)
        k_same, c_same = alternate(lambda: learn_rate(cfg, env_id, args.steps, args.seed),
                                   lambda: learn_rate(cfg, "CartPole-v1", args.steps, args.seed), args.rounds)
        k_ship, c_zoo = alternate(lambda: learn_rate(cfg, env_id, args.steps, args.seed),
                                  lambda: learn_rate(zoo, "CartPole-v1", args.steps, args.seed), args.rounds)
        rows.append({"env": env_id, "same_kenv_sps": k_same, "same_cartpole_sps": c_same,
                     "same_ratio": k_same / c_same, "shipped_kenv_sps": k_ship, "zoo_cartpole_sps": c_zoo,
                     "shipped_ratio": k_ship / c_zoo})
        if not args.json:
            print(f"... {env_id} done", file=sys.stderr, flush=True)
    if args.json:
        json.dump({"steps": args.steps, "rounds": args.rounds, "rows": rows}, sys.stdout, indent=2)
        print()
        return
    print(f"PPO learn(), {args.steps} env steps, median of {args.rounds} alternating rounds, one torch thread")
    w = max(len("env"), *(len(r["env"]) for r in rows))
    head = (f"{'env':<{w}} {'same: kenv/s':>12} {'CartPole/s':>10} {'ratio':>6}   "
            f"{'shipped: kenv/s':>15} {'Zoo CartPole/s':>14} {'ratio':>6}")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['env']:<{w}} {r['same_kenv_sps']:>12.0f} {r['same_cartpole_sps']:>10.0f} {r['same_ratio']:>6.2f}   "
              f"{r['shipped_kenv_sps']:>15.0f} {r['zoo_cartpole_sps']:>14.0f} {r['shipped_ratio']:>6.2f}")


if __name__ == "__main__":
    main()
