"""RLlib PPO (new API stack) on a kenv environment: several env runners, several envs each.

Needs the ``rllib`` extra (Ray RLlib; tested with ray 2.60.0)::

    pip install torch==2.13.0 && pip install -e '.[rllib]'
    python examples/rllib_ppo.py                                  # 2 iterations, 2 runners x 2 envs
    python examples/rllib_ppo.py --iterations 10 --env-id kenv/Raid6Bench-v3

Spelling the env for RLlib.  RLlib's env runners are separate processes that have not
imported kenv, so a bare ``.environment("kenv/HwrngWait-v2")`` fails in them with
``NamespaceNotFound: Namespace kenv not found``.  Three spellings work:

* ``--spelling register`` (default): register the id with RLlib's own registry in the
  driver, with a creator that makes the env through Gymnasium's ``module:id`` form (so the
  runner imports kenv itself); then the plain id works::

      from ray.tune.registry import register_env
      register_env("kenv/HwrngWait-v2",
                   lambda cfg: gym.make("kenv:kenv/HwrngWait-v2", **cfg))
      PPOConfig().environment("kenv/HwrngWait-v2")

* ``--spelling module``: no registration; Gymnasium's ``module:id`` form, which imports
  the module ``kenv`` before looking the id up::

      PPOConfig().environment("kenv:kenv/HwrngWait-v2")

* ``--spelling setup-hook``: the plain id, with Ray importing kenv's registration in every
  worker process as it starts::

      ray.init(runtime_env={"worker_process_setup_hook": "kenv.envs.registration.register_envs"})
      PPOConfig().environment("kenv/HwrngWait-v2")

The run fails (exit status 1) if RLlib sampled no env step: RLlib itself carries on with
``num_env_steps_sampled_lifetime == 0`` when its env runners' envs crash.
"""

from __future__ import annotations

import argparse
import math
import time

import gymnasium as gym

ENV_ID = "kenv/HwrngWait-v2"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env-id", default=ENV_ID)
    p.add_argument("--spelling", choices=("register", "module", "setup-hook"), default="register",
                   help="how the env id reaches RLlib (see the module docstring)")
    p.add_argument("--iterations", type=int, default=2)
    p.add_argument("--env-runners", type=int, default=2)
    p.add_argument("--envs-per-runner", type=int, default=2)
    p.add_argument("--train-batch-size", type=int, default=512, help="env steps per iteration")
    p.add_argument("--minibatch-size", type=int, default=128)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args(argv)


def register_kenv_env(env_id: str) -> str:
    """Register ``env_id`` with RLlib's registry so ``.environment(env_id)`` works in every
    env runner; the creator makes the env as ``gym.make("kenv:" + env_id, **env_config)``."""
    from ray.tune.registry import register_env

    module_env_id = "kenv:" + env_id

    # A closure (not a function of this module): Ray pickles it by value, so the runners
    # rebuild it without importing this file; Gymnasium's "kenv:" prefix imports kenv there.
    def make_env(env_config) -> gym.Env:
        return gym.make(module_env_id, **dict(env_config))

    register_env(env_id, make_env)
    return env_id


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    import ray
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.utils.metrics import (
        ENV_RUNNER_RESULTS, EPISODE_RETURN_MEAN, NUM_ENV_STEPS_SAMPLED,
        NUM_ENV_STEPS_SAMPLED_LIFETIME, NUM_EPISODES,
    )

    runtime_env = {}
    if args.spelling == "register":
        env = register_kenv_env(args.env_id)
    elif args.spelling == "module":
        env = "kenv:" + args.env_id
    else:
        env = args.env_id
        runtime_env = {"worker_process_setup_hook": "kenv.envs.registration.register_envs"}
    # one CPU per env runner plus the driver's learner; no dashboard on a small machine
    ray.init(num_cpus=args.env_runners + 1, include_dashboard=False, runtime_env=runtime_env)
    config = (
        PPOConfig()
        .environment(env)
        .env_runners(num_env_runners=args.env_runners, num_envs_per_env_runner=args.envs_per_runner,
                     rollout_fragment_length="auto")
        .training(train_batch_size_per_learner=args.train_batch_size, minibatch_size=args.minibatch_size,
                  num_epochs=args.epochs, lr=args.lr)
        .debugging(seed=args.seed)
    )
    algo = config.build_algo()
    rows = []
    start = time.time()
    try:
        for i in range(1, args.iterations + 1):
            result = algo.train()
            r = result[ENV_RUNNER_RESULTS]
            row = {"iteration": i,
                   "env_steps_sampled": int(r.get(NUM_ENV_STEPS_SAMPLED, 0)),
                   "env_steps_sampled_lifetime": int(r.get(NUM_ENV_STEPS_SAMPLED_LIFETIME, 0)),
                   "episodes": int(r.get(NUM_EPISODES, 0)),
                   "episode_return_mean": float(r.get(EPISODE_RETURN_MEAN, math.nan)),
                   "wall_s": time.time() - start}
            rows.append(row)
            print(f"iter {i:3d}  env_steps_sampled {row['env_steps_sampled']:6d}  "
                  f"lifetime {row['env_steps_sampled_lifetime']:7d}  episodes {row['episodes']:4d}  "
                  f"episode_return_mean {row['episode_return_mean']:8.3f}  wall {row['wall_s']:6.1f} s",
                  flush=True)
        print(f"env {env!r}: {args.env_runners} env runners x {args.envs_per_runner} envs, "
              f"{algo.env_runner_group.num_healthy_remote_workers()} healthy remote runners")
    finally:
        algo.stop()
        ray.shutdown()
    if not rows or rows[-1]["env_steps_sampled_lifetime"] <= 0:
        raise SystemExit("RLlib sampled no env step: see the env runners' errors above")
    return rows


if __name__ == "__main__":
    main()
