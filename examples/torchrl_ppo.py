"""TorchRL PPO on a kenv environment through ``GymEnv(..., num_envs=N)`` (a Gymnasium vector env).

Needs the ``torchrl`` extra (TorchRL and TensorDict; tested with torchrl 0.14.1, tensordict
0.14.3)::

    pip install torch==2.13.0 && pip install -e '.[torchrl]'
    python examples/torchrl_ppo.py                        # kenv/HwrngWait-v2, 4 envs, 8,192 frames
    python examples/torchrl_ppo.py --num-envs 2 --total-frames 2048

The loop is TorchRL's PPO tutorial: a ``Collector`` gathers ``frames_per_batch`` frames from
the vector env, ``GAE`` computes advantages, ``ClipPPOLoss`` trains a small MLP actor and
critic.  It ends with the mean return of the greedy policy over seeded episodes, beside the
patched choice and random actions on the same episodes.

TorchRL's vector-env path reads every info key into the tensordict and refuses nested dicts
and strings, which kenv's info has (``info["scenario"]``, ``info["action_name"]``...); it also
fills the final observation of the envs that did not just end with zeros and checks it
against the observation Box.  So the env is made as the id's flat twin,
``kenv-flat/<Name>-vN`` (kenv.FlatInfo: nested keys as ``reward_components/latency``, numbers
only, the Box's lower bounds at most 0), spelled ``kenv:kenv-flat/...`` so that the spawned
workers import kenv first.
"""

from __future__ import annotations

import argparse
import math
import time

import gymnasium as gym
import numpy as np

import kenv  # noqa: F401  (registers the kenv/... ids)
from kenv.envs.registration import flat_id

ENV_ID = "kenv/HwrngWait-v2"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env-id", default=ENV_ID, help="a kenv id with a Discrete action space")
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--frames-per-batch", type=int, default=512)
    p.add_argument("--total-frames", type=int, default=8192)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--minibatch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=2.5e-3)
    p.add_argument("--eval-episodes", type=int, default=32)
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args(argv)


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
    from tensordict.nn import TensorDictModule
    from torch import nn
    from torchrl.collectors import Collector
    from torchrl.data import LazyTensorStorage, ReplayBuffer, SamplerWithoutReplacement
    from torchrl.envs import GymEnv
    from torchrl.modules import ProbabilisticActor, ValueOperator
    from torchrl.objectives import ClipPPOLoss
    from torchrl.objectives.value import GAE

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)   # a small MLP: more threads only contend
    env = GymEnv(f"kenv:{flat_id(args.env_id)}", num_envs=args.num_envs, categorical_action_encoding=True)
    env.set_seed(args.seed)
    n_obs = env.observation_spec["observation"].shape[-1]
    n_actions = int(env.action_spec.space.n)

    def mlp(out: int) -> nn.Module:
        return nn.Sequential(nn.Linear(n_obs, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, out))

    actor = ProbabilisticActor(TensorDictModule(mlp(n_actions), in_keys=["observation"], out_keys=["logits"]),
                               in_keys=["logits"], spec=env.action_spec,
                               distribution_class=torch.distributions.Categorical, return_log_prob=True)
    critic = ValueOperator(mlp(1), in_keys=["observation"])
    advantage = GAE(gamma=0.99, lmbda=0.95, value_network=critic, average_gae=True)
    loss_fn = ClipPPOLoss(actor, critic, clip_epsilon=0.2, entropy_coeff=0.01, critic_coeff=0.5)
    optim = torch.optim.Adam(loss_fn.parameters(), lr=args.lr)
    collector = Collector(env, actor, frames_per_batch=args.frames_per_batch, total_frames=args.total_frames)
    buffer = ReplayBuffer(storage=LazyTensorStorage(args.frames_per_batch), sampler=SamplerWithoutReplacement(),
                          batch_size=args.minibatch_size)

    history, frames, start = [], 0, time.time()
    running = np.zeros(args.num_envs)
    for i, data in enumerate(collector, start=1):
        frames += data.numel()
        # episode returns: rewards summed per env (across batches) up to each done
        reward = data["next", "reward"].reshape(data.batch_size).numpy()
        done = data["next", "done"].reshape(data.batch_size).numpy()
        rets = []
        for t in range(reward.shape[1]):
            running += reward[:, t]
            for e in np.flatnonzero(done[:, t]):
                rets.append(float(running[e]))
                running[e] = 0.0
        with torch.no_grad():
            advantage(data)
        buffer.extend(data.reshape(-1))
        for _ in range(args.epochs):
            for _ in range(max(1, data.numel() // args.minibatch_size)):
                losses = loss_fn(buffer.sample())
                loss = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
                optim.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(loss_fn.parameters(), 0.5)
                optim.step()
        collector.update_policy_weights_()
        mean_ret = float(np.mean(rets)) if rets else math.nan
        history.append({"iteration": i, "frames": frames, "episodes": len(rets), "episode_return_mean": mean_ret})
        print(f"iter {i:3d}  frames {frames:6d}  episodes {len(rets):3d}  "
              f"episode_return_mean {mean_ret:8.3f}  wall {time.time() - start:5.1f} s", flush=True)
    collector.shutdown()
    env.close()

    def greedy(genv, obs):
        with torch.no_grad():
            return int(actor.module[0].module(torch.as_tensor(obs, dtype=torch.float32)).argmax())

    base = gym.make(args.env_id).unwrapped
    evals = {"learned (greedy)": evaluate(args.env_id, args.eval_episodes, greedy),
             f"patched ({base.PATCHED})": evaluate(args.env_id, args.eval_episodes,
                                                   lambda genv, o: genv.unwrapped.action_for(base.PATCHED)),
             "random": evaluate(args.env_id, args.eval_episodes, lambda genv, o: genv.action_space.sample())}
    print(f"evaluation over {args.eval_episodes} seeded episodes (mean return): "
          + ", ".join(f"{k} {v:.3f}" for k, v in evals.items()))
    return {"iterations": len(history), "frames": frames, "history": history, "eval": evals}


if __name__ == "__main__":
    main()
