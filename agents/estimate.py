"""How long a command's flags ask for, said before it starts (#43 item 5).

A count that would run for days (``kenv train --n-timesteps 1000000000``,
``kenv evaluate --episodes 10000000``) should not start without a word.  Each such command, once
its flags are checked and before the work, calls :func:`announce`: above
:data:`LONG_JOB_S` it prints one line on stderr.  ``--json`` carries the figure
(:func:`estimate_s` of the flags) as ``estimate_s``.  The figures are CPU seconds on the machine measured (below), from the work the
flags ask for; they are an order of magnitude, not a promise.

Measured on 2026-12-05, Intel Xeon, 2 cores, Python 3.11, torch 2.13.0 CPU:
- :data:`TRAIN_STEPS_PER_S`: ``kenv train --config ppo --env ID --n-timesteps 4096
  --eval-freq 100000 --json``, ``steps / wall_s`` (SB3 PPO with the shipped config;
  A2C and DQN are used at the same rate; the three Kernel ids re-measured on 2026-12-06,
  mean of two runs, after their PPO blocks took batch 128 x 8 epochs, issue #44);
- :data:`EPISODE_S`: ``kenv.agents.evaluate.evaluate(ID, "all", episodes=20)`` after
  one warm-up call, wall seconds per episode of one policy.
"""

from __future__ import annotations

import sys
from types import MappingProxyType
from typing import Any, Callable

from kenv.envs.registration import canonical_id

#: above this (s), a command says how long it will take before it starts
LONG_JOB_S = 3600.0
#: env steps per second of SB3 PPO training with the shipped config, per id (measured: module doc)
TRAIN_STEPS_PER_S = MappingProxyType({
    "kenv/HwrngWait-v2": 2890, "kenv/HwrngWaitPhased-v0": 2950, "kenv/Kernel-v3": 1360,
    "kenv/KernelBoot-v0": 1450, "kenv/KernelPhased-v0": 1235, "kenv/Raid6Bench-v3": 2860,
    "kenv/Raid6BenchBalanced-v0": 2680, "kenv/Raid6BenchPhased-v0": 2490, "kenv/RandomMix-v2": 2510,
    "kenv/RandomMixPhased-v0": 2340,
})
#: seconds per evaluation episode of one policy, per id (measured: module doc)
EPISODE_S = MappingProxyType({
    "kenv/HwrngWait-v2": 0.0048, "kenv/HwrngWaitPhased-v0": 0.0040, "kenv/Kernel-v3": 0.0407,
    "kenv/KernelBoot-v0": 0.0389, "kenv/KernelPhased-v0": 0.0662, "kenv/Raid6Bench-v3": 0.0019,
    "kenv/Raid6BenchBalanced-v0": 0.0026, "kenv/Raid6BenchPhased-v0": 0.0030, "kenv/RandomMix-v2": 0.0053,
    "kenv/RandomMixPhased-v0": 0.0074,
})


def train_s(env_id: str, steps: int) -> float:
    """Seconds to train ``steps`` env steps on ``env_id`` (an old id: its new one's rate; an
    unknown id: the slowest rate)."""
    return steps / TRAIN_STEPS_PER_S.get(canonical_id(env_id), min(TRAIN_STEPS_PER_S.values()))


def episodes_s(env_id: str, episodes: int) -> float:
    """Seconds to play ``episodes`` evaluation episodes on ``env_id``."""
    return episodes * EPISODE_S.get(canonical_id(env_id), max(EPISODE_S.values()))


def estimate_s(command: str, args: Any) -> float | None:
    """Seconds of work the parsed ``args`` of ``kenv <command>`` ask for (what ``--json``
    reports as ``estimate_s``), or None for another command."""
    from .config import load_train_config, registered_env_ids

    try:
        if command == "train":
            cfg = load_train_config(args.config, args.env, args.algo)
            return train_s(cfg.env_id, args.n_timesteps or cfg.n_timesteps)
        if command == "rediscover":
            return args.seeds * sum(train_s(e, args.n_timesteps or load_train_config(args.config, e, args.algo)
                                             .n_timesteps) for e in args.envs or registered_env_ids())
        if command == "discover":
            from kenv.envs.reward import available_profiles

            from .discover import DEFAULT_CONFIG

            profiles = len(available_profiles()) if args.profile == "all" else 1
            return profiles * train_s(args.env, args.steps or load_train_config(DEFAULT_CONFIG, args.env).n_timesteps)
        if command == "evaluate":
            from .baselines import BASELINES

            n = (len(BASELINES) if args.policy == "all" else 1) + (args.model is not None)
            return episodes_s(args.env, n * args.episodes)
    except Exception:  # noqa: BLE001 - (an estimate of a command that ran: none if its flags do not say)
        return None
    return None


def announce(prog: str, seconds: float, log: Callable[[str], None] | None = None) -> None:
    """Say :func:`long_job_line` (on ``log``, default stderr) when ``seconds`` is over
    :data:`LONG_JOB_S`; each command calls it once its flags are checked, before the work."""
    if seconds > LONG_JOB_S:
        (log or (lambda s: print(s, file=sys.stderr, flush=True)))(long_job_line(prog, seconds))


def long_job_line(prog: str, seconds: float) -> str:
    """The one line said on stderr before a long job starts."""
    h = seconds / 3600
    when = f"{h:.1f} hours" if h < 48 else f"{h / 24:.1f} days"
    return (f"{prog}: these flags ask for about {when} of work on a 2-core machine like the one measured "
            f"(kenv/agents/estimate.py); Ctrl-C stops it")


__all__ = ["EPISODE_S", "LONG_JOB_S", "TRAIN_STEPS_PER_S", "announce", "episodes_s", "estimate_s", "long_job_line",
           "train_s"]
