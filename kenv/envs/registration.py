"""Registration of the kenv environments (one central list, as Gymnasium's own)."""

from __future__ import annotations

import argparse
from types import MappingProxyType

import gymnasium as gym

ENVS = (
    # id, entry point, max_episode_steps
    ("kenv/RandomMix-v0", "kenv.envs.random_mix:RandomMixEnv", 32),
    ("kenv/HwrngWait-v0", "kenv.envs.hwrng_wait:HwrngWaitEnv", 48),
    ("kenv/Raid6Bench-v0", "kenv.envs.raid6_bench:Raid6BenchEnv", 64),
    ("kenv/Kernel-v0", "kenv.envs.kernel_env:KernelEnv", 48),
    ("kenv/Kernel-v1", "kenv.envs.kernel_env:KernelEnv", 48),
)

#: kenv/Kernel-v1's constructor preset for issue #30 part 2 (boot-time
#: starting states, the crng state observed); the other v1 mechanisms merge
#: their keys into the same dict
KERNEL_V1_BOOT = MappingProxyType({"boot_states": True})

#: the constructor kwargs an id registers with (gym.make's own override them)
KWARGS = MappingProxyType({
    "kenv/Kernel-v1": KERNEL_V1_BOOT,
})


def register_envs() -> None:
    for env_id, entry_point, max_steps in ENVS:
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point, max_episode_steps=max_steps,
                         kwargs=dict(KWARGS.get(env_id, {})))


def env_id_arg(text: str) -> str:
    """argparse ``type=`` of --env: a kenv environment id."""
    ids = [e[0] for e in ENVS]
    if text not in ids:
        raise argparse.ArgumentTypeError(f"got {text!r}; allowed: {', '.join(ids)}")
    return text
