"""Registration of the kenv environments (one central list, as Gymnasium's own).

A new version of an env (``-v1``) registers the same class with the keyword
arguments of the dynamics it adds, as Gymnasium registers ``CartPole-v0`` and
``-v1`` with different ``max_episode_steps``: the ``-v0`` ids keep the
dynamics their results were measured with.  :data:`V1_KWARGS` is the one
preset of what ``-v1`` turns on (each entry a keyword argument of the env
classes, documented in their Version History); a further v1 change adds its
argument there.
"""

from __future__ import annotations

from types import MappingProxyType

import gymnasium as gym

#: what the ``-v1`` envs turn on: CFS load balancing in the simulated kernels
#: (kenv.kernel.balance)
V1_KWARGS = MappingProxyType({"load_balance": True})

ENVS = (
    # id, entry point, max_episode_steps
    ("kenv/RandomMix-v0", "kenv.envs.random_mix:RandomMixEnv", 32),
    ("kenv/HwrngWait-v0", "kenv.envs.hwrng_wait:HwrngWaitEnv", 48),
    ("kenv/Raid6Bench-v0", "kenv.envs.raid6_bench:Raid6BenchEnv", 64),
    ("kenv/Kernel-v0", "kenv.envs.kernel_env:KernelEnv", 48),
    ("kenv/Raid6Bench-v1", "kenv.envs.raid6_bench:Raid6BenchEnv", 64),
    ("kenv/Kernel-v1", "kenv.envs.kernel_env:KernelEnv", 48),
)

#: the keyword arguments an id registers with (ids not named here: none)
ENV_KWARGS = MappingProxyType({
    "kenv/Raid6Bench-v1": V1_KWARGS,
    "kenv/Kernel-v1": V1_KWARGS,
})


def register_envs() -> None:
    for env_id, entry_point, max_steps in ENVS:
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point, max_episode_steps=max_steps,
                         kwargs=dict(ENV_KWARGS.get(env_id, {})))
