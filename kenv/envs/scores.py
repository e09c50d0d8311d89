"""Normalised scores: 0 = the random policy, 100 = the env's best reference.

As D4RL normalises its returns, kenv puts every env's return on one scale, so
users of any RL library can report a number comparable across ids::

    kenv.normalized_score("kenv/Raid6Bench-v3", returns)   # 0 random, 100 reference

Both ends are *simulator outputs*, measured on each env's evaluation
episodes: :data:`EVAL_EPISODES` episodes, episode i reset with seed i (the
seed draws the scenario context from the env's mix, so the seeds fix the
contexts too), reward profile ``balanced``.  ``random`` is the seeded uniform
policy of agents/baselines.py (action-space seed 0); the reference is the
context oracle (the best static action per scenario context, by exhaustive
search, agents/baselines.py ``build_oracle``), which exists for every id.
tests/test_scores.py re-measures both for every id, exactly: a change of an
env's dynamics changes them and fails that test, and then the env needs a new
version (or the table a new measurement, with the reason in the commit).

Measured with ``kenv evaluate --env ID --policy random`` / ``--policy oracle``
``--episodes 10 --seed 0`` (agents/evaluate.py ``evaluate``; tests/test_scores.py
makes the same call).
"""

from __future__ import annotations

import math
import numbers
from types import MappingProxyType
from typing import Iterable, Mapping, Sequence

import numpy as np

from ..errors import ConfigError
from ..schema import check_choice
from .registration import canonical_id

#: the evaluation episodes of every id: seeds 0..EVAL_EPISODES-1
EVAL_EPISODES = 10
#: the reward profile the ends of the scale are measured with
SCORE_PROFILE = "balanced"
#: the policy that scores 100 (for every id: the context oracle)
REFERENCE_POLICY = "oracle"

#: id -> (mean return of random, mean return of the reference) on the evaluation episodes
REFERENCE_RETURNS = MappingProxyType({
    "kenv/RandomMix-v2": (30.1419797102814, 32.96935438754579),
    "kenv/HwrngWait-v2": (20.71468600026511, 38.33887526116855),
    "kenv/Raid6Bench-v3": (6.676102039703599, 9.374597958981164),
    "kenv/Kernel-v3": (61.74269858333383, 86.32362752886522),
    "kenv/Raid6BenchBalanced-v0": (6.669886270412957, 9.374597958981164),
    "kenv/KernelBoot-v0": (48.59184111499613, 69.32377097954266),
    "kenv/RandomMixPhased-v0": (21.29594902943467, 22.790472272205925),
    "kenv/HwrngWaitPhased-v0": (12.088403982495631, 20.72934390769013),
    "kenv/Raid6BenchPhased-v0": (6.638256454555886, 8.680346612316546),
    "kenv/KernelPhased-v0": (30.441826617878213, 51.24647745875228),
})


def dynamics_fingerprint(env_id: str) -> str | None:
    """A short fingerprint of ``env_id``'s dynamics: a hash of its measured
    :data:`REFERENCE_RETURNS` (re-measured exactly by tests/test_scores.py, so a
    dynamics change changes it; an old id has its new one's); None for an unknown id."""
    import hashlib

    env_id = canonical_id(env_id)
    if env_id not in REFERENCE_RETURNS:
        return None
    return hashlib.sha256(repr(REFERENCE_RETURNS[env_id]).encode()).hexdigest()[:12]


def has_score(env_id: str, profile: str) -> bool:
    """Whether returns of ``env_id`` under ``profile`` have a normalised score."""
    return profile == SCORE_PROFILE and canonical_id(env_id) in REFERENCE_RETURNS


def _is_return(x: object) -> bool:
    if not isinstance(x, numbers.Real) or isinstance(x, (bool, np.bool_)):
        return False
    try:
        return math.isfinite(x)
    except OverflowError:   # (an int past a float's range: isfinite converts it)
        return False


def _returns(returns: object) -> list[float]:
    """``returns`` as a non-empty list of finite floats, or a ConfigError naming it (a
    string was read character by character, None raised a TypeError, NaN scored NaN)."""
    allowed = "a finite return (a number) or a non-empty list of finite returns"
    if _is_return(returns):
        return [float(returns)]
    if isinstance(returns, np.ndarray):
        vals = list(returns.ravel()) if returns.ndim <= 1 else [returns]   # (2-D: refused)
    elif isinstance(returns, (str, bytes, Mapping)) or not isinstance(returns, Iterable):
        raise ConfigError("returns", returns, allowed)
    else:
        vals = list(returns)
    if not vals or not all(_is_return(r) for r in vals):
        raise ConfigError("returns", returns, allowed)
    return [float(r) for r in vals]


def normalized_score(env_id: str, returns: float | Sequence[float]) -> float:
    """The normalised score of the mean of ``returns`` (a return or a list of
    returns of ``env_id`` under the ``balanced`` profile): 0 = random, 100 = the
    reference (:data:`REFERENCE_POLICY`); linear in the return.  An old id
    (kenv.envs.registration.RENAMED) is scored as the id that replaces it."""
    env_id = check_choice(canonical_id(env_id), "env", tuple(REFERENCE_RETURNS))
    vals = _returns(returns)
    lo, hi = REFERENCE_RETURNS[env_id]
    try:
        mean = math.fsum(vals) / len(vals)
    except OverflowError:   # (finite returns whose sum is not a float)
        raise ConfigError("returns", returns, "finite returns whose sum is a finite float") from None
    return 100.0 * (mean - lo) / (hi - lo)
