"""kenv: a Gymnasium environment whose world is a simulated Linux kernel.

``import kenv`` registers the environments (``kenv/RandomMix-v2``,
``kenv/HwrngWait-v2``, ``kenv/Raid6Bench-v3``, ``kenv/Kernel-v3``, their variants
such as ``kenv/KernelBoot-v0``, and the old ids; docs/environments.md, Which id).
"""

__version__ = "0.1.0"

from .envs.scores import normalized_score  # noqa: E402  (public: 0 = random, 100 = reference)


def __getattr__(name: str):
    """``kenv.RecordEpisodes`` (kenv.envs.record) and ``kenv.FlatInfo`` (kenv.envs.flat_info):
    imported on use (they need gymnasium)."""
    if name == "RecordEpisodes":
        from .envs.record import RecordEpisodes

        return RecordEpisodes
    if name == "FlatInfo":
        from .envs.flat_info import FlatInfo

        return FlatInfo
    raise AttributeError(f"module 'kenv' has no attribute {name!r}")


def _register() -> None:
    try:
        from .envs.registration import register_envs
    except ModuleNotFoundError as e:  # gymnasium missing: the simulator still works
        if e.name != "gymnasium":
            raise
        return
    register_envs()


_register()
