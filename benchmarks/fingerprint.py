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

Without ``--env`` it prints every id to use, then every old id
(kenv.envs.registration.RENAMED), and fails (exit 1, a line on stderr) if an old
id's fingerprint differs from the id that replaces it: a renaming keeps the dynamics.
"""

from __future__ import annotations

import argparse
import hashlib
import json

import gymnasium as gym
import numpy as np

import kenv  # noqa: F401  (registers the envs)
from kenv.envs.registration import RENAMED
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
    ids = env_ids(ap, args.env) + ([] if args.env else list(RENAMED))
    got = {}
    for env_id in ids:
        got[env_id] = fingerprint(env_id, args.steps, args.seed)
        print(f"{env_id:<28} {got[env_id]}", flush=True)
    differ = [f"{old} {got[old]} != {new} {got[new]}" for old, new in RENAMED.items()
              if old in got and new in got and got[old] != got[new]]
    if differ:
        raise SystemExit("fingerprint: an old id's dynamics differ from its new id's: " + "; ".join(differ))


if __name__ == "__main__":
    main()
