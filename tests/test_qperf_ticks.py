"""The qperf fast-forward's busy-tick extension (kenv/fastforward/qperf_ticks.py):
a mix timer's softirq on a busy CPU is replayed as the steady round trip with
the model's delay; switched off (QperfLearned without ``busy_ticks``), those
round trips run in detail.  Either way the trajectory is that of every round
trip simulated.  (The models' cases in detail: tests/test_random.py,
test_mix_timer_on_a_busy_cpu_replayed_exactly.)"""

from __future__ import annotations

import gymnasium as gym
import pytest

import kenv  # noqa: F401  (registers the envs)
from kenv.envs.base import FastForwardMemory
from kenv.errors import ConfigError
from kenv.fastforward.declines import Reason
from kenv.fastforward.qperf_records import EXTENSIONS, QperfLearned

#: timer-deferred mixes only, at a size whose NAPI poll the model covers (64K)
KWARGS = {"actions": ["timer"], "scenario": {"msg_size": "64K", "preempt": "rt"}}


def _run(extensions: tuple | None):
    """RandomMix-v0 under KWARGS, 3 episodes of 32 steps under random actions
    (None: every round trip simulated): the trajectory, the busy ticks the
    fast-forwards replayed, and the env's fast-forward memory."""
    from search_fast_forward import record_episodes

    env = gym.make("kenv/RandomMix-v0", fast_forward=extensions is not None, **KWARGS)
    memory = None
    if extensions is not None:
        memory = FastForwardMemory()
        memory.qperf = QperfLearned(extensions=extensions)
        env.unwrapped.ff_memory = memory
    pairs = []
    out = record_episodes(env, range(3), 32, None, lambda env: pairs.append(env.unwrapped._episode.q.wl.pairs[0]))
    env.close()
    return out, sum(p.ff.stats.tick_replays for p in pairs if p.ff is not None), memory


def test_busy_ticks_on_and_off_give_every_round_trips_trajectory():
    exact, _, _ = _run(None)
    on, replays_on, memory_on = _run(EXTENSIONS)
    off, replays_off, memory_off = _run(())
    assert replays_on >= 5, replays_on
    assert replays_off == 0
    # off: the busy tick is not taken in, and the decline is counted where it would be
    assert memory_off.qperf.declines[Reason.QP_TICK_UNMODELLED] > memory_on.qperf.declines[Reason.QP_TICK_UNMODELLED]
    assert on == exact
    assert off == exact


def test_an_unknown_extension_is_a_config_error_naming_it():
    with pytest.raises(ConfigError, match="extensions.*ticks_busy.*busy_ticks"):
        QperfLearned(extensions=("ticks_busy",))
