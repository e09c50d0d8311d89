"""The qperf fast-forward's extensions (kenv.fastforward.qperf_records.EXTENSIONS):
each take-in beyond the steady round trip replays what it covers when on
and leaves it to the detailed simulation when off (QperfLearned without it),
and either way the trajectory is that of every round trip simulated.  (Each
take-in's cases in detail: tests/test_random.py.)"""

from __future__ import annotations

import gymnasium as gym
import pytest

import kenv  # noqa: F401  (registers the envs)
from kenv.envs.base import FastForwardMemory
from kenv.errors import ConfigError
from kenv.fastforward.declines import Reason
from kenv.fastforward.qperf_records import EXTENSIONS, QperfLearned

#: workqueue mixes often (a trigger round trip, the refill after it, steady ones after that)
WORKQUEUE = {"actions": ["workqueue", "schedule_work"], "scenario": {"threshold": 64, "msg_size": "4K"}}
#: timer-deferred mixes only, at a size whose NAPI poll the busy tick's model covers (64K)
TIMER = {"actions": ["timer"], "scenario": {"msg_size": "64K", "preempt": "rt"}}


def _run(kwargs: dict, extensions: tuple | None, counter: str):
    """RandomMix-v2 under ``kwargs``, 3 episodes of 32 steps under random
    actions, with the qperf extensions ``extensions`` (None: every round trip
    simulated): the trajectory, the fast-forwards' ``counter`` (FastForwardStats)
    summed, and the env's fast-forward memory."""
    from search_fast_forward import record_episodes

    env = gym.make("kenv/RandomMix-v2", fast_forward=extensions is not None, **kwargs)
    memory = None
    if extensions is not None:
        memory = FastForwardMemory()
        memory.qperf = QperfLearned(extensions=extensions)
        env.unwrapped.ff_memory = memory
    pairs = []
    out = record_episodes(env, range(3), 32, None, lambda env: pairs.append(env.unwrapped._episode.q.wl.pairs[0]))
    env.close()
    return out, sum(getattr(p.ff.stats, counter) for p in pairs if p.ff is not None), memory


@pytest.mark.parametrize("extension,kwargs,counter", [
    ("busy_ticks", TIMER, "tick_replays"),
    ("wq_triggers", WORKQUEUE, "trigger_replays"),
    ("refills", WORKQUEUE, "trigger_refill_replays"),
    ("tails", WORKQUEUE, "tail_rts"),
])
def test_an_extension_on_and_off_gives_every_round_trips_trajectory(extension, kwargs, counter):
    exact, _, _ = _run(kwargs, None, counter)
    on, replays_on, _ = _run(kwargs, EXTENSIONS, counter)
    off, replays_off, _ = _run(kwargs, tuple(x for x in EXTENSIONS if x != extension), counter)
    assert replays_on >= 5, replays_on
    assert replays_off == 0
    assert on == exact
    assert off == exact


def test_busy_ticks_off_declines_where_it_would_take_the_tick_in():
    _, _, on = _run(TIMER, EXTENSIONS, "tick_replays")
    _, _, off = _run(TIMER, (), "tick_replays")
    assert off.qperf.declines[Reason.QP_TICK_UNMODELLED] > on.qperf.declines[Reason.QP_TICK_UNMODELLED]


def test_an_unknown_extension_is_a_config_error_naming_it():
    with pytest.raises(ConfigError, match="extensions.*ticks_busy.*busy_ticks"):
        QperfLearned(extensions=("ticks_busy",))
