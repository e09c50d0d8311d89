"""Registration of the kenv environments (one central list, as Gymnasium's own).

A new version of an env (``-v1``) registers the same class with the keyword
arguments of the dynamics it adds, as Gymnasium registers ``CartPole-v0`` and
``-v1`` with different ``max_episode_steps``: the ``-v0`` ids keep the
dynamics their results were measured with.  :data:`ENV_KWARGS` holds
what each ``-v1`` turns on (each entry a keyword argument of the env class,
documented in its Version History).
"""

from __future__ import annotations

import argparse
import warnings
from types import MappingProxyType

import gymnasium as gym

from ..errors import ConfigError
from ..schema import check_choice

#: what ``kenv/Raid6Bench-v1`` turns on: CFS load balancing in the simulated
#: kernel (kenv.kernel.balance; issue #30 part 1)
RAID6BENCH_V1 = MappingProxyType({"load_balance": True})
#: what ``kenv/Kernel-v1`` turns on: boot-time starting states before crng
#: READY, the crng state observed (issue #30 part 2).  Not load balancing: the
#: fast-forwards cannot skip a balancing kernel exactly and decline it, which
#: makes Kernel steps about 30x slower (``gym.make(..., load_balance=True)``
#: still gives it)
KERNEL_V1 = MappingProxyType({"boot_states": True})
#: what ``kenv/RandomMix-v1`` turns on: PREEMPT_RT's forced interrupt threads
#: on the rt scenarios (kenv.kernel.irq; issue #30 part 3) and traffic that
#: changes size or pauses within an episode, observed (issue #31)
RANDOMMIX_V1 = MappingProxyType({"irq_threads": True, "phases": True})
#: what ``kenv/HwrngWait-v1`` turns on: a /dev/hwrng reader that comes and
#: goes within an episode, observed (issue #31)
HWRNGWAIT_V1 = MappingProxyType({"phases": True})
#: what ``kenv/Raid6Bench-v2`` turns on: v1's load balancing, and a background
#: job that starts and stops within an episode, observed (issue #31)
RAID6BENCH_V2 = MappingProxyType({"load_balance": True, "phases": True})
#: what ``kenv/Kernel-v2`` turns on: v1's boot-time states, PREEMPT_RT's
#: interrupt threads on the rt scenarios, and the three phased workloads
KERNEL_V2 = MappingProxyType({"boot_states": True, "irq_threads": True, "phases": True})
#: the controls of ``kenv discover`` (issue #40 item 2; docs/discover.md, Controls):
#: HwrngWait-v0's dynamics on a scenario mix where, under the ``throughput`` profile,
#: the best wait flips with an observed row (positive), or does not (negative)
HWRNGWAIT_CONTROL = MappingProxyType({"scenario": "hwrng-control"})
HWRNGWAIT_NULL_CONTROL = MappingProxyType({"scenario": "hwrng-null-control"})

ENVS = (
    # id, entry point, max_episode_steps
    ("kenv/RandomMix-v0", "kenv.envs.random_mix:RandomMixEnv", 32),
    ("kenv/HwrngWait-v0", "kenv.envs.hwrng_wait:HwrngWaitEnv", 48),
    ("kenv/Raid6Bench-v0", "kenv.envs.raid6_bench:Raid6BenchEnv", 64),
    ("kenv/Kernel-v0", "kenv.envs.kernel_env:KernelEnv", 48),
    ("kenv/Raid6Bench-v1", "kenv.envs.raid6_bench:Raid6BenchEnv", 64),
    ("kenv/Kernel-v1", "kenv.envs.kernel_env:KernelEnv", 48),
    ("kenv/RandomMix-v1", "kenv.envs.random_mix:RandomMixEnv", 32),
    ("kenv/HwrngWait-v1", "kenv.envs.hwrng_wait:HwrngWaitEnv", 48),
    ("kenv/Raid6Bench-v2", "kenv.envs.raid6_bench:Raid6BenchEnv", 64),
    ("kenv/Kernel-v2", "kenv.envs.kernel_env:KernelEnv", 48),
    ("kenv/HwrngWaitControl-v0", "kenv.envs.hwrng_wait:HwrngWaitEnv", 48),
    ("kenv/HwrngWaitNullControl-v0", "kenv.envs.hwrng_wait:HwrngWaitEnv", 48),
)

#: the namespace of the flat twins: ``kenv-flat/<Name>-vN`` is ``kenv/<Name>-vN`` with its info
#: flattened to numbers (kenv.envs.flat_info.FlatInfo), for clients that take an id only
FLAT_NAMESPACE = "kenv-flat"


def flat_id(env_id: str) -> str:
    """The flat twin of a ``kenv/...`` id: ``kenv-flat/...``."""
    return f"{FLAT_NAMESPACE}/{env_id.split('/', 1)[1]}"

#: the keyword arguments an id registers with (ids not named here: none)
ENV_KWARGS = MappingProxyType({
    "kenv/Raid6Bench-v1": RAID6BENCH_V1,
    "kenv/Kernel-v1": KERNEL_V1,
    "kenv/RandomMix-v1": RANDOMMIX_V1,
    "kenv/HwrngWait-v1": HWRNGWAIT_V1,
    "kenv/Raid6Bench-v2": RAID6BENCH_V2,
    "kenv/Kernel-v2": KERNEL_V2,
    "kenv/HwrngWaitControl-v0": HWRNGWAIT_CONTROL,
    "kenv/HwrngWaitNullControl-v0": HWRNGWAIT_NULL_CONTROL,
})


def register_envs() -> None:
    """Every id of :data:`ENVS`, and its flat twin ``kenv-flat/...`` (the env in
    kenv.envs.flat_info.FlatInfo: info with one level of keys and numbers only)."""
    for env_id, entry_point, max_steps in ENVS:
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point, max_episode_steps=max_steps,
                         kwargs=dict(ENV_KWARGS.get(env_id, {})))
        twin = flat_id(env_id)
        if twin not in gym.registry:
            # (the inner gym.make applies the time limit; the twin's spec states it too)
            gym.register(id=twin, entry_point="kenv.envs.flat_info:make_flat", max_episode_steps=max_steps,
                         kwargs={"env_id": env_id})


#: every kenv environment id, in the order of :data:`ENVS`
ENV_IDS = tuple(e[0] for e in ENVS)
#: the discover controls: registered for ``kenv discover --env``, but not tasks of the
#: benchmark (no patch to rediscover, no normalised score)
CONTROL_IDS = ("kenv/HwrngWaitControl-v0", "kenv/HwrngWaitNullControl-v0")
#: the ids rediscover and the scores cover by default
BENCHMARK_IDS = tuple(i for i in ENV_IDS if i not in CONTROL_IDS)


def check_env_id(env_id: object, field: str = "env") -> str:
    """The one check of a kenv environment id (the CLIs' ``--env``, ``kenv bench``, the
    agents' configs and commands): a ConfigError naming ``field``, the value and the ids."""
    return check_choice(env_id, field, ENV_IDS)


def env_id_arg(text: str) -> str:
    """argparse ``type=`` of --env: :func:`check_env_id`, with its message."""
    try:
        return check_env_id(text, "--env")
    except ConfigError as e:
        raise argparse.ArgumentTypeError(f"got {text!r}; allowed: {e.allowed}") from None


def quiet_old_versions() -> None:
    """Hide Gymnasium's "The environment kenv/...-v0 is out of date" notice.

    kenv's own commands (``kenv rediscover``, ``evaluate``, ``train``, the
    workers they start) run the ``-v0`` ids on purpose: the published figures
    were made on them, and every registered id is a job.  Gymnasium shows the
    notice once per process on stderr, where it broke the commands' promise
    of one line per error.  A user's own ``gym.make("kenv/...-v0")`` still
    shows it."""
    warnings.filterwarnings("ignore", message=r".*The environment kenv/\S+ is out of date",
                            category=DeprecationWarning)
