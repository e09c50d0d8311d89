"""Tianshou DQN on a kenv environment, with Tianshou's vector envs (DummyVectorEnv or
SubprocVectorEnv).

Needs the ``tianshou`` extra (tested with tianshou 2.0.1)::

    pip install torch==2.13.0 && pip install -e '.[tianshou]'
    python examples/tianshou_dqn.py                       # kenv/HwrngWait-v2, 4 epochs of 2,048 steps
    python examples/tianshou_dqn.py --vector subproc --epochs 10

The algorithm is Tianshou 2's: ``DiscreteQLearningPolicy`` (epsilon-greedy) trained by
``DQN`` (double Q-learning, n-step returns, a target network) through
``OffPolicyTrainerParams``.  Each epoch ends with a test on seeded episodes; the run ends
with the greedy policy beside the patched choice and random actions on the same seeded
episodes.  Tianshou's collector checks every transition for NaN and None, info included
(``raise_on_nan_in_buffer``): kenv's info has neither.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import kenv  # noqa: F401  (registers the kenv/... ids)

ENV_ID = "kenv/HwrngWait-v2"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env-id", default=ENV_ID, help="a kenv id with a Discrete action space")
    p.add_argument("--vector", choices=("dummy", "subproc"), default="dummy",
                   help="Tianshou's DummyVectorEnv (one process) or SubprocVectorEnv")
    p.add_argument("--train-envs", type=int, default=4)
    p.add_argument("--test-envs", type=int, default=4)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--epoch-steps", type=int, default=2048, help="env steps per epoch")
    p.add_argument("--steps-per-collect", type=int, default=16)
    p.add_argument("--test-episodes", type=int, default=8)
    p.add_argument("--buffer-size", type=int, default=20_000)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--gamma", type=float, default=0.9)
    p.add_argument("--n-step", type=int, default=3)
    p.add_argument("--target-update-freq", type=int, default=100)
    p.add_argument("--eps-train", type=float, default=0.2)
    p.add_argument("--eval-episodes", type=int, default=32)
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args(argv)


def make_env(env_id: str):
    def thunk():
        import kenv  # noqa: F401  (a SubprocVectorEnv worker registers the ids itself)
        return gym.make(env_id)
    return thunk


def evaluate(env_id: str, episodes: int, policy, seed0: int = 10_000) -> float:
    """Mean return of ``policy(env, obs) -> action`` over seeded Gymnasium episodes."""
    env = gym.make(env_id)
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed0 + i)
        env.action_space.seed(seed0 + i)
        done, ret = False, 0.0
        while not done:
            obs, r, term, trunc, _ = env.step(policy(env, obs))
            ret += float(r)
            done = term or trunc
        returns.append(ret)
    env.close()
    return float(np.mean(returns))


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    import torch
    from tianshou.algorithm import DQN
    from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
    from tianshou.algorithm.optim import AdamOptimizerFactory
    from tianshou.data import Collector, CollectStats, VectorReplayBuffer
    from tianshou.env import DummyVectorEnv, SubprocVectorEnv
    from tianshou.trainer import OffPolicyTrainerParams
    from tianshou.utils.net.common import Net

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)   # a small MLP: more threads only contend
    vector = DummyVectorEnv if args.vector == "dummy" else SubprocVectorEnv
    train_envs = vector([make_env(args.env_id) for _ in range(args.train_envs)])
    test_envs = vector([make_env(args.env_id) for _ in range(args.test_envs)])
    train_envs.seed(args.seed)
    test_envs.seed(args.seed + 1000)
    env = gym.make(args.env_id)
    if not isinstance(env.action_space, gym.spaces.Discrete):
        raise SystemExit(f"--env-id {args.env_id}: this example handles Discrete action spaces only")

    net = Net(state_shape=env.observation_space.shape, action_shape=int(env.action_space.n),
              hidden_sizes=[64, 64])
    policy = DiscreteQLearningPolicy(model=net, action_space=env.action_space,
                                     eps_training=args.eps_train, eps_inference=0.0)
    algorithm = DQN(policy=policy, optim=AdamOptimizerFactory(lr=args.lr), gamma=args.gamma,
                    n_step_return_horizon=args.n_step, target_update_freq=args.target_update_freq)
    train_collector = Collector[CollectStats](
        algorithm, train_envs, VectorReplayBuffer(args.buffer_size, len(train_envs)), exploration_noise=True)
    test_collector = Collector[CollectStats](algorithm, test_envs, exploration_noise=True)
    train_collector.reset()
    train_collector.collect(n_step=args.batch_size * args.train_envs, random=True)   # warm-up

    epochs = []

    def test_fn(epoch: int, env_step: int | None) -> None:   # called before each epoch's test
        epochs.append({"epoch": epoch, "env_step": env_step})

    start = time.time()
    result = algorithm.run_training(OffPolicyTrainerParams(
        training_collector=train_collector, test_collector=test_collector,
        max_epochs=args.epochs, epoch_num_steps=args.epoch_steps,
        collection_step_num_env_steps=args.steps_per_collect, test_step_num_episodes=args.test_episodes,
        batch_size=args.batch_size, update_step_num_gradient_steps_per_sample=1 / args.steps_per_collect * 4,
        test_fn=test_fn, test_in_training=False, show_progress=False, verbose=True))
    wall = time.time() - start
    train_envs.close()
    test_envs.close()
    print(f"trained {result.train_step} env steps, {result.train_episode} episodes, "
          f"{result.update_step} gradient steps in {wall:.1f} s; best test return "
          f"{result.best_reward:.3f} ± {result.best_reward_std:.3f}")

    def greedy(genv, obs):
        with torch.no_grad():
            q, _ = net(torch.as_tensor(obs, dtype=torch.float32)[None])
        return int(q.argmax())

    base = env.unwrapped
    evals = {"learned (greedy)": evaluate(args.env_id, args.eval_episodes, greedy),
             f"patched ({base.PATCHED})": evaluate(args.env_id, args.eval_episodes,
                                                   lambda genv, o: genv.unwrapped.action_for(base.PATCHED)),
             "random": evaluate(args.env_id, args.eval_episodes, lambda genv, o: genv.action_space.sample())}
    print(f"evaluation over {args.eval_episodes} seeded episodes (mean return): "
          + ", ".join(f"{k} {v:.3f}" for k, v in evals.items()))
    return {"train_step": int(result.train_step), "train_episode": int(result.train_episode),
            "update_step": int(result.update_step), "best_reward": float(result.best_reward),
            "epochs": epochs, "eval": evals, "wall_s": wall}


if __name__ == "__main__":
    main()
