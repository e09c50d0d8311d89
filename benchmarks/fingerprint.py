"""A fingerprint of each env's trajectories: what a speed change must leave as it was.

    PYTHONPATH=. python benchmarks/fingerprint.py [--env ID ...] [--steps 1500] [--seed 0]

Speed work here is meant to be exact (the fast-forwards skip events, they do not
approximate them), so the envs' trajectories must come out the same before and
after it.  This steps each env ``--steps`` times with uniformly random actions
(reset when an episode ends, with seeds from ``--seed``) and prints a sha256 of
everything the env returned -- observations, rewards, terminated, truncated and
info -- shortened to 16 hex digits.  Run it on the commit before a change and on
the change: any difference in any step shows.  The tests check each
fast-forward against simulating every event; this checks a whole change at once.
"""

from __future__ import annotations

import argparse
import hashlib
import json

import gymnasium as gym
import numpy as np

import kenv  # noqa: F401  (registers the envs)
from kenv.agents.files import json_default  # numpy values as plain JSON (what info holds)
from _common import env_ids


def fingerprint(env_id: str, steps: int, seed: int = 0) -> str:
    """sha256 (16 hex digits) of ``steps`` random-action steps of ``env_id``."""
    h = hashlib.sha256()

    def add(obs, info, *rest):
        h.update(np.asarray(obs).tobytes())
        h.update(repr(rest).encode())
        h.update(json.dumps(info, sort_keys=True, default=json_default).encode())

    env = gym.make(env_id)
    try:
        env.action_space.seed(seed)
        obs, info = env.reset(seed=seed)
        add(obs, info)
        for i in range(steps):
            obs, reward, term, trunc, info = env.step(env.action_space.sample())
            add(obs, info, float(reward), bool(term), bool(trunc))
            if term or trunc:
                obs, info = env.reset(seed=seed + i + 1)
                add(obs, info)
    finally:
        env.close()
    return h.hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", action="append", help="only this env id (repeatable)")
    ap.add_argument("--steps", type=int, default=1500, help="steps per env (default 1500)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.steps < 1:
        ap.error("--steps must be >= 1")
    ids = env_ids(ap, args.env)
    for env_id in ids:
        print(f"{env_id:<20} {fingerprint(env_id, args.steps, args.seed)}")


if __name__ == "__main__":
    main()
