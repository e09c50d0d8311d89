"""PPO on a kenv environment in one file, CleanRL style: plain torch and Gymnasium's vector env.

Read top to bottom as CleanRL's ``ppo.py``: the arguments, ``make_env``, the agent, the loop.
It needs only what kenv already installs (torch, gymnasium), so no extra::

    python examples/cleanrl_ppo.py                      # kenv/HwrngWait-v2, 8,192 steps
    python examples/cleanrl_ppo.py --env-id kenv/Raid6Bench-v3 --total-timesteps 16384

It ends by playing the learned policy greedily on 32 seeded evaluation episodes, beside the
patched choice (``PATCHED`` of the env) and uniform random actions on the same episodes.

Differences from CleanRL's ``ppo.py``: argparse instead of tyro (no extra dependency);
the vector env uses ``autoreset_mode=SAME_STEP`` (Gymnasium >= 1.1), the semantics
CleanRL's loop was written for (the step that ends an episode returns the next episode's
first observation); episode returns are summed here instead of by RecordEpisodeStatistics;
no TensorBoard. As in CleanRL, a truncated episode is not bootstrapped. Discrete action
spaces only (kenv/Kernel-v3's MultiDiscrete is not handled here).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
from torch.distributions.categorical import Categorical

import kenv  # noqa: F401  (registers the kenv/... ids)


@dataclass
class Args:
    env_id: str = "kenv/HwrngWait-v2"
    seed: int = 1
    total_timesteps: int = 8192
    learning_rate: float = 2.5e-3
    num_envs: int = 4
    num_steps: int = 64            # steps per env per rollout
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    eval_episodes: int = 32
    torch_threads: int = 1         # a small MLP: more threads only contend
    record: str = ""               # a path: the learned policy's evaluation episodes as records (kenv validate)


def parse_args(argv: list[str] | None = None) -> Args:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f in dataclasses.fields(Args):
        p.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default)
    return Args(**vars(p.parse_args(argv)))


def make_env(env_id: str):
    def thunk():
        return gym.make(env_id)
    return thunk


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, n_obs: int, n_actions: int):
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(n_obs, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor = nn.Sequential(
            layer_init(nn.Linear(n_obs, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, n_actions), std=0.01),
        )

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        probs = Categorical(logits=self.actor(x))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


def evaluate(env_id: str, episodes: int, policy, seed0: int = 10_000, record: str = "") -> float:
    """Mean return of ``policy(env, obs) -> action`` over seeded episodes (seeds seed0, seed0+1, ...);
    ``record``: also append each episode's record there (kenv.RecordEpisodes)."""
    env = gym.make(env_id)
    if record:
        env = kenv.RecordEpisodes(env, record)
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
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = max(1, args.total_timesteps // batch_size)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.torch_threads)

    envs = gym.vector.SyncVectorEnv([make_env(args.env_id) for _ in range(args.num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    if not isinstance(envs.single_action_space, gym.spaces.Discrete):
        raise SystemExit(f"--env-id {args.env_id}: this example handles Discrete action spaces only")
    n_obs = int(np.prod(envs.single_observation_space.shape))
    agent = Agent(n_obs, int(envs.single_action_space.n))
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    obs = torch.zeros((args.num_steps, args.num_envs, n_obs))
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long)
    logprobs = torch.zeros((args.num_steps, args.num_envs))
    rewards = torch.zeros((args.num_steps, args.num_envs))
    dones = torch.zeros((args.num_steps, args.num_envs))
    values = torch.zeros((args.num_steps, args.num_envs))

    global_step, start = 0, time.time()
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = torch.tensor(next_obs, dtype=torch.float32)
    next_done = torch.zeros(args.num_envs)
    running = np.zeros(args.num_envs)
    episode_returns: list[float] = []
    history = []
    for iteration in range(1, num_iterations + 1):
        for g in optimizer.param_groups:   # linear learning-rate annealing
            g["lr"] = (1.0 - (iteration - 1.0) / num_iterations) * args.learning_rate
        n_done0 = len(episode_returns)
        for step in range(args.num_steps):
            global_step += args.num_envs
            obs[step], dones[step] = next_obs, next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
            values[step], actions[step], logprobs[step] = value.flatten(), action, logprob
            o, r, term, trunc, _ = envs.step(action.numpy())
            done = np.logical_or(term, trunc)
            running += r
            for i in np.flatnonzero(done):
                episode_returns.append(float(running[i]))
                running[i] = 0.0
            rewards[step] = torch.tensor(r, dtype=torch.float32)
            next_obs = torch.tensor(o, dtype=torch.float32)
            next_done = torch.tensor(done, dtype=torch.float32)

        with torch.no_grad():   # generalized advantage estimation
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0
            for t in reversed(range(args.num_steps)):
                if t == args.num_steps - 1:
                    nextnonterminal, nextvalues = 1.0 - next_done, next_value
                else:
                    nextnonterminal, nextvalues = 1.0 - dones[t + 1], values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
            returns = advantages + values

        b_obs, b_logprobs, b_actions = obs.reshape(-1, n_obs), logprobs.reshape(-1), actions.reshape(-1)
        b_advantages, b_returns, b_values = advantages.reshape(-1), returns.reshape(-1), values.reshape(-1)
        b_inds = np.arange(batch_size)
        rng = np.random.default_rng(args.seed + iteration)
        for _epoch in range(args.update_epochs):
            rng.shuffle(b_inds)
            for s in range(0, batch_size, minibatch_size):
                mb = b_inds[s:s + minibatch_size]
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb], b_actions[mb])
                ratio = (newlogprob - b_logprobs[mb]).exp()
                mb_adv = b_advantages[mb]
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = torch.max(-mb_adv * ratio,
                                    -mb_adv * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)).mean()
                v_loss = 0.5 * ((newvalue.view(-1) - b_returns[mb]) ** 2).mean()
                loss = pg_loss - args.ent_coef * entropy.mean() + v_loss * args.vf_coef
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

        recent = episode_returns[n_done0:]
        mean_ret = float(np.mean(recent)) if recent else float("nan")
        history.append({"iteration": iteration, "global_step": global_step,
                        "episodes": len(recent), "episode_return_mean": mean_ret})
        print(f"iter {iteration:3d}  global_step {global_step:6d}  episodes {len(recent):3d}  "
              f"episode_return_mean {mean_ret:8.3f}  sps {int(global_step / (time.time() - start))}",
              flush=True)
    envs.close()

    def greedy(env, o):
        with torch.no_grad():
            return int(agent.actor(torch.tensor(o, dtype=torch.float32)).argmax())

    def constant(name):
        return lambda env, o: env.unwrapped.action_for(name)

    base = gym.make(args.env_id).unwrapped   # for the name of its patched choice
    evals = {"learned (greedy)": evaluate(args.env_id, args.eval_episodes, greedy, record=args.record),
             f"patched ({base.PATCHED})": evaluate(args.env_id, args.eval_episodes, constant(base.PATCHED)),
             "random": evaluate(args.env_id, args.eval_episodes, lambda env, o: env.action_space.sample())}
    print(f"evaluation over {args.eval_episodes} seeded episodes (mean return): "
          + ", ".join(f"{k} {v:.3f}" for k, v in evals.items()))
    return {"iterations": num_iterations, "global_step": global_step, "history": history,
            "episodes": len(episode_returns), "eval": evals, "wall_s": time.time() - start}


if __name__ == "__main__":
    main()
