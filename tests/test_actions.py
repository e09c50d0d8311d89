"""The action codecs (kenv.envs.actions): one for Discrete envs, one for Kernel-v3's MultiDiscrete."""

from __future__ import annotations

import numpy as np
import pytest

from kenv.drivers.hwrng import parse_wait
from kenv.envs.base import KenvEnv
from kenv.envs.hwrng_wait import HwrngWaitEnv
from kenv.envs.kernel_env import KernelEnv
from kenv.errors import ConfigError

WAITS = ["cpu_relax", "usleep_range(100,200)"]


def test_the_episode_receives_the_kernel_form_of_a_choice():
    assert HwrngWaitEnv(actions=WAITS).codec.kernel_action(1) == parse_wait(WAITS[1])
    codec = KernelEnv(actions={"wait": WAITS}).codec
    deferral, wait, mode = codec.kernel_action((1, 1, 0))
    assert (deferral, wait, mode) == ("timer", parse_wait(WAITS[1]), "preempt_disable")
    assert codec.index(np.array([1, 1, 0])) == (1, 1, 0)


@pytest.mark.parametrize("bad", [np.array([0, 2, 0]), np.array([0, 0, -1]), [0, 0], [True, 0, 0]])
def test_a_multidiscrete_action_outside_the_space_is_refused(bad):
    with pytest.raises(ConfigError, match="shape \\(3,\\) with entries in 0..1, 0..1, 0..1"):
        KernelEnv(actions={"wait": WAITS}).codec.index(bad)


def test_kernel_env_overrides_no_action_hook():
    hooks = {name for name, v in vars(KenvEnv).items() if callable(v)}
    assert not hooks & {name for name, v in vars(KernelEnv).items() if callable(v)} - {"__init__", "_make_episode"}
