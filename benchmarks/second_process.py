"""Does a second process pay for one training run on 2 cores?  ``learn()`` with the envs
split between the main process and one worker, against all of them in the main process.

    PYTHONPATH=. python benchmarks/second_process.py [--env ID ...] [--steps 2048] [--rounds 3] [--json]

For each env id (kenv ids and ``CartPole-v1``, which runs with kenv/Kernel-v3's block) and
its shipped block of configs/train/ppo.yaml: ``one``, the ``n_envs`` copies in a
DummyVecEnv, as ``kenv train`` runs them; ``split``, the first half in a DummyVecEnv in
the main process and the second half in a DummyVecEnv in one worker process
(``forkserver``), stepped at the same time: the worker gets its actions, the main process
steps its own envs, then takes the worker's results.  Each env is seeded as in ``one``,
so both give the same trajectories.  Printed: env steps per second of ``learn(--steps)``
(medians of ``--rounds`` alternating rounds), the start-up seconds of each (making the
envs and the model, and the worker), and the whole run of the block's ``n_timesteps`` as
start-up + n_timesteps / rate.  A measurement for the issue notes; kenv's commands use
``one`` (see docs/speed.md).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv  # noqa: E402
from stable_baselines3.common.vec_env.base_vec_env import CloudpickleWrapper  # noqa: E402

import kenv  # noqa: E402,F401
from benchmarks._common import env_ids  # noqa: E402
from kenv.agents import config as kc  # noqa: E402
from kenv.agents import train as tr  # noqa: E402


def _worker(conn, fns: CloudpickleWrapper) -> None:
    venv = DummyVecEnv(fns.var)
    conn.send("ready")
    while True:
        cmd, data = conn.recv()
        if cmd == "step":
            venv.step_async(data)
            conn.send(venv.step_wait())
        elif cmd == "reset":
            conn.send((venv.reset(), venv.reset_infos))
        elif cmd == "seed":
            venv.seed(data)
        else:
            venv.close()
            conn.close()
            return


class SplitVecEnv(VecEnv):
    """Envs ``fns[:k]`` stepped here, ``fns[k:]`` in one worker process, at the same time."""

    def __init__(self, fns, k: int) -> None:
        if not 1 <= k < len(fns):   # each side needs an env (n_envs 1 has nothing to split)
            raise ValueError(f"k: {k} envs here of {len(fns)}; allowed: 1 to {len(fns) - 1} (n_envs >= 2)")
        self.local, self.k = DummyVecEnv(fns[:k]), k
        ctx = mp.get_context("forkserver")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, CloudpickleWrapper(fns[k:])), daemon=True)
        self.proc.start()
        child.close()
        self.conn.recv()   # the worker's envs are made: start-up ends here
        super().__init__(len(fns), self.local.observation_space, self.local.action_space)

    def reset(self):
        self.conn.send(("reset", None))
        obs = self.local.reset()
        far, far_infos = self.conn.recv()
        self.reset_infos = self.local.reset_infos + far_infos
        return np.concatenate([obs, far])

    def seed(self, seed=None):
        """Env i's next reset takes ``seed + i``, as in a DummyVecEnv (the model seeds its env)."""
        seeds = super().seed(seed)
        self.conn.send(("seed", seeds[self.k]))
        self.local.seed(seeds[0])
        return seeds

    def step_async(self, actions) -> None:
        self.conn.send(("step", actions[self.k:]))
        self.local.step_async(actions[:self.k])

    def step_wait(self):
        near, far = self.local.step_wait(), self.conn.recv()
        return (*(np.concatenate([a, b]) for a, b in zip(near[:3], far[:3])), near[3] + far[3])

    def close(self) -> None:
        if self.conn.closed:   # closed already
            return
        self.conn.send(("close", None))
        self.conn.close()
        self.proc.join()
        self.local.close()

    # What learn() asks of a VecEnv beyond stepping: the envs' render mode and wrappers,
    # answered by the first env (all are copies of one).
    def env_is_wrapped(self, wrapper_class, indices=None):
        return self.local.env_is_wrapped(wrapper_class, [0]) * self.num_envs

    def get_attr(self, attr_name, indices=None):
        return self.local.get_attr(attr_name, [0]) * self.num_envs

    def set_attr(self, attr_name, value, indices=None):
        raise NotImplementedError

    def env_method(self, method_name, *args, indices=None, **kwargs):
        raise NotImplementedError


def env_fns(env_id: str, n: int) -> list:
    """``n`` makers of ``env_id`` behind a Monitor, the i-th seeded ``i``."""
    spec = gym.spec(env_id)

    def env_fn(i: int):
        def make():
            env = Monitor(spec.make())
            env.reset(seed=i)
            return env
        return make

    return [env_fn(i) for i in range(n)]


def run(cfg: kc.TrainConfig, env_id: str, steps: int, split: bool) -> tuple[float, float]:
    """(env steps per second of ``learn(steps)``, start-up seconds)."""
    t0 = time.perf_counter()
    fns = env_fns(env_id, cfg.n_envs)
    venv = SplitVecEnv(fns, cfg.n_envs // 2) if split else DummyVecEnv(fns)
    model = tr.build_model(cfg, venv, 0)
    t1 = time.perf_counter()
    model.learn(total_timesteps=steps)
    rate = model.num_timesteps / (time.perf_counter() - t1)
    venv.close()
    return rate, t1 - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", action="append", help="only this env id (repeatable; CartPole-v1 allowed)")
    ap.add_argument("--steps", type=int, default=2048, help="env steps per learn() (default 2048)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.steps < 1 or args.rounds < 1:
        ap.error(f"--steps {args.steps} / --rounds {args.rounds}: both must be >= 1")
    chosen = args.env or ["kenv/Kernel-v3", "kenv/RandomMix-v2", "CartPole-v1"]
    ids = [e if e == "CartPole-v1" else env_ids(ap, [e])[0] for e in chosen]
    tr.configure_torch()
    rows = []
    for env_id in ids:
        cfg = kc.load_train_config("ppo", "kenv/Kernel-v3" if env_id == "CartPole-v1" else env_id)
        if cfg.n_envs < 2:
            ap.error(f"--env {env_id}: its block's n_envs is {cfg.n_envs}; allowed: ids with n_envs >= 2")
        got: dict[bool, list] = {False: [], True: []}
        for _ in range(args.rounds):
            for split in (False, True):
                got[split].append(run(cfg, env_id, args.steps, split))
        row = {"env": env_id, "n_envs": cfg.n_envs, "n_timesteps": cfg.n_timesteps}
        for split, name in ((False, "one"), (True, "split")):
            rate = statistics.median(r for r, _ in got[split])
            start = statistics.median(s for _, s in got[split])
            row[name] = {"sps": rate, "startup_s": start, "run_s": start + cfg.n_timesteps / rate}
        rows.append(row)
    if args.json:
        json.dump({"steps": args.steps, "rounds": args.rounds, "rows": rows}, sys.stdout, indent=2)
        print()
        return
    print(f"PPO learn(), {args.steps} env steps, medians of {args.rounds} rounds, one torch thread")
    w = max(len("env"), *(len(r["env"]) for r in rows))
    head = (f"{'env':<{w}} {'one: steps/s':>12} {'start s':>7} {'run s':>6}   "
            f"{'split: steps/s':>14} {'start s':>7} {'run s':>6} {'split/one':>9}")
    print(head)
    print("-" * len(head))
    for r in rows:
        o, s = r["one"], r["split"]
        print(f"{r['env']:<{w}} {o['sps']:>12.0f} {o['startup_s']:>7.2f} {o['run_s']:>6.1f}   "
              f"{s['sps']:>14.0f} {s['startup_s']:>7.2f} {s['run_s']:>6.1f} {s['sps'] / o['sps']:>9.2f}")


if __name__ == "__main__":
    main()
