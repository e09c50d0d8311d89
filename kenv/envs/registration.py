"""Registration of the kenv environments, from the versions each env class declares.

Every env class lists its versions in ``VERSIONS`` (kenv.envs.versions.Version:
the id, the keyword arguments it registers the class with, its time limit, ...);
this module registers each of them.

An id means one task.  A different task made from the same class (boot-time
starting states, load balancing, workloads that change within an episode) has a
name of its own, as Gymnasium's ``LunarLanderContinuous`` is ``LunarLander``
with other keyword arguments: ``kenv/KernelPhased-v0`` registers ``KernelEnv``
with the keyword arguments of its declaration (kenv.envs.kernel_env.PHASED).  A
version bump (``-vN``) is kept for a corrected simulation of the same task, so
that the recommended id of every task is the highest version of its name and
``gym.make`` does not warn.

The ids of before that rule (issue #39 item 1) stay registered with the dynamics
they had (:data:`RENAMED`: old id -> the id that replaces it, same dynamics):
``kenv/Kernel-v0`` is ``kenv/Kernel-v3``'s class and kwargs (Gymnasium's own
"out of date" notice names ``v3``), and an old variant id such as
``kenv/Kernel-v2`` is made by :func:`make_renamed`, which says which id it now is.
"""

from __future__ import annotations

import argparse
import warnings
from types import MappingProxyType

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator, parse_env_id

from ..errors import ConfigError
from ..schema import check_choice
from .hwrng_wait import HwrngWaitEnv
from .kernel_env import KernelEnv
from .raid6_bench import Raid6BenchEnv
from .random_mix import RandomMixEnv

#: the env classes, each with its declared versions (``VERSIONS``)
ENV_CLASSES = (RandomMixEnv, HwrngWaitEnv, Raid6BenchEnv, KernelEnv)
#: every declared version (kenv.envs.versions.Version) by its id
VERSIONS = MappingProxyType({v.id: v for cls in ENV_CLASSES for v in cls.VERSIONS})
ENVS = tuple(
    # id, entry point, max_episode_steps
    (v.id, f"{cls.__module__}:{cls.__name__}", v.max_episode_steps) for cls in ENV_CLASSES for v in cls.VERSIONS)

#: the ids registered before each task had a name of its own (issue #39 item 1) -> the id
#: of :data:`ENVS` that replaces each, with the same dynamics (benchmarks/fingerprint.py
#: prints the same fingerprint for both).  Still registered; kenv's commands and look-ups
#: (:func:`check_env_id`, the train configs, the scores, the estimates) take them as the new id.
RENAMED = MappingProxyType({
    "kenv/RandomMix-v0": "kenv/RandomMix-v2",
    "kenv/HwrngWait-v0": "kenv/HwrngWait-v2",
    "kenv/Raid6Bench-v0": "kenv/Raid6Bench-v3",
    "kenv/Kernel-v0": "kenv/Kernel-v3",
    "kenv/Raid6Bench-v1": "kenv/Raid6BenchBalanced-v0",
    "kenv/Kernel-v1": "kenv/KernelBoot-v0",
    "kenv/RandomMix-v1": "kenv/RandomMixPhased-v0",
    "kenv/HwrngWait-v1": "kenv/HwrngWaitPhased-v0",
    "kenv/Raid6Bench-v2": "kenv/Raid6BenchPhased-v0",
    "kenv/Kernel-v2": "kenv/KernelPhased-v0",
})

#: the namespace of the flat twins: ``kenv-flat/<Name>-vN`` is ``kenv/<Name>-vN`` with its info
#: flattened to numbers (kenv.envs.flat_info.FlatInfo), for clients that take an id only
FLAT_NAMESPACE = "kenv-flat"


def flat_id(env_id: str) -> str:
    """The flat twin of a ``kenv/...`` id: ``kenv-flat/...``."""
    return f"{FLAT_NAMESPACE}/{env_id.split('/', 1)[1]}"


def canonical_id(env_id: str) -> str:
    """The id to use for ``env_id``: its new id if it was renamed (:data:`RENAMED`), else itself."""
    return RENAMED.get(env_id, env_id) if isinstance(env_id, str) else env_id


def registered_option(env_id: str, option: str) -> bool:
    """Whether ``env_id`` is registered with the kernel option ``option`` on (an old id's
    spec only names its new id: the new id's setting)."""
    return bool(gym.spec(canonical_id(env_id)).kwargs.get(option, False))


def same_name(old: str, new: str) -> bool:
    """Whether ``new`` is a higher version of ``old``'s own name (``kenv/Kernel-v0`` ->
    ``kenv/Kernel-v3``): then Gymnasium's "out of date" notice names it already."""
    return parse_env_id(old)[:2] == parse_env_id(new)[:2]


def renamed_note(old: str, new: str) -> str:
    """What :func:`make_renamed` says when ``old`` (a variant that took a name of its own) is made."""
    base = next(i for i in ENV_IDS if same_name(old, i))
    return (f"{old} is now {new} (same dynamics); use {new}: the newer version of {old} that Gymnasium "
            f"suggests, {base}, is another task (docs/environments.md, Which id)")


# (DeprecationWarnings are hidden by default outside __main__; show kenv's once each, as
# gymnasium/logger.py does for Gymnasium's own)
warnings.filterwarnings("once", "", DeprecationWarning, module=r"^kenv\.envs\.registration$")


def make_renamed(env_id: str, **kwargs) -> gym.Env:
    """The entry point of an old variant id (:data:`RENAMED`, a different name now): warns
    (a DeprecationWarning through Gymnasium's logger) naming ``env_id``, the id that replaces
    it, and builds ``env_id``'s env class with its keyword arguments and ``kwargs``.
    ``env.spec.id`` stays the old id (``gym.make`` sets it)."""
    old = next(o for o, n in RENAMED.items() if n == env_id)
    gym.logger.deprecation(renamed_note(old, env_id))
    spec = gym.spec(env_id)
    return load_env_creator(spec.entry_point)(**{**spec.kwargs, **kwargs})


def register_envs() -> None:
    """Every id of :data:`ENVS` and of :data:`RENAMED`, each from the declaration of the
    version it is (or is now: its kwargs and time limit), and the flat twin ``kenv-flat/...``
    of each (the env in kenv.envs.flat_info.FlatInfo: info with one level of keys and numbers only)."""
    entries = [(env_id, entry_point, dict(VERSIONS[env_id].kwargs)) for env_id, entry_point, _ in ENVS]
    # an old id of the same name: the class of its new id (Gymnasium's notice names the new id);
    # of another name: make_renamed, which names the new id (Gymnasium's would name the base task)
    entries += [(old, next(e for i, e, _ in ENVS if i == new), dict(VERSIONS[new].kwargs)) if same_name(old, new)
                else (old, "kenv.envs.registration:make_renamed", {"env_id": new}) for old, new in RENAMED.items()]
    for env_id, entry_point, kwargs in entries:
        max_steps = VERSIONS[canonical_id(env_id)].max_episode_steps
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point, max_episode_steps=max_steps, kwargs=kwargs)
        twin = flat_id(env_id)
        if twin not in gym.registry:
            # (the inner gym.make applies the time limit; the twin's spec states it too)
            gym.register(id=twin, entry_point="kenv.envs.flat_info:make_flat", max_episode_steps=max_steps,
                         kwargs={"env_id": env_id})


#: every kenv environment id to use, in the order of :data:`ENVS` (the old ids: :data:`RENAMED`)
ENV_IDS = tuple(e[0] for e in ENVS)
#: the discover controls: registered for ``kenv discover --env``, but not tasks of the
#: benchmark (no patch to rediscover, no normalised score)
CONTROL_IDS = ("kenv/HwrngWaitControl-v0", "kenv/HwrngWaitNullControl-v0")
#: the ids rediscover and the scores cover by default
BENCHMARK_IDS = tuple(i for i in ENV_IDS if i not in CONTROL_IDS)


def check_env_id(env_id: object, field: str = "env") -> str:
    """The one check of a kenv environment id (the CLIs' ``--env``, ``kenv bench``, the
    agents' configs and commands): the id to use (an old id's new one, :data:`RENAMED`),
    or a ConfigError naming ``field``, the value and the ids."""
    return canonical_id(check_choice(env_id, field, ENV_IDS + tuple(RENAMED), ", ".join(ENV_IDS)))


def env_id_arg(text: str) -> str:
    """argparse ``type=`` of --env: :func:`check_env_id`, with its message."""
    try:
        return check_env_id(text, "--env")
    except ConfigError as e:
        raise argparse.ArgumentTypeError(f"got {text!r}; allowed: {e.allowed}") from None


def quiet_old_versions() -> None:
    """Hide Gymnasium's "The environment kenv/...-v0 is out of date" notice.

    kenv's own commands take an old id as the id that replaces it (:func:`check_env_id`),
    but a run made before the renaming (a model's or a record's id, a trace) may still
    make one: Gymnasium shows the notice once per process on stderr, where it broke the
    commands' promise of one line per error.  A user's own ``gym.make("kenv/...-v0")``
    still shows it."""
    warnings.filterwarnings("ignore", message=r".*The environment kenv/\S+ is out of date",
                            category=DeprecationWarning)
