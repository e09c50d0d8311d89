"""Entropy at boot (issue #30 part 2): the crediting rules of random.c and the
hwrng core decide when the crng becomes READY, and kenv/KernelBoot-v0 starts its
episodes before that.

The rules (drivers/char/random.c, 6.x; drivers/char/hw_random/core.c,
6.x): ``credit_init_bits()`` adds at most POOL_BITS (256) per call, crng_init
becomes CRNG_EARLY when the count crosses POOL_EARLY_BITS (128) and CRNG_READY
when it crosses POOL_READY_BITS (256), and nothing is credited once READY;
``hwrng_fillfn()`` credits ``(rc * quality * 8 + entropy_credit) >> 10`` bits
per read, keeping the remainder only while a read credits nothing;
``add_hwgenerator_randomness(..., sleep_after=true)`` sleeps
``crng_reseed_interval()`` once the crng is READY (or when it credited nothing).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kenv  # noqa: F401  (registers the ids)
from kenv.drivers.hwrng import HWRNG_DEFAULT_QUALITY, bcm2835_rng_probe
from kenv.envs.observation import obs_rows
from kenv.drivers.random import (
    CRNG_EARLY, CRNG_EMPTY, CRNG_READY, POOL_BITS, POOL_EARLY_BITS, POOL_READY_BITS, InputPool,
)
from kenv.kernel.core import Kernel
from kenv.platforms import get_platform
from kenv.sim.engine import NSEC_PER_SEC, Engine

ROOT = Path(__file__).resolve().parent.parent
#: benchmarks/fingerprint.py on main before Kernel-v1 (now KernelBoot-v0) existed (COMMON rules)
V0_FINGERPRINTS = {
    "kenv/RandomMix-v0": "e4d3441cca17a76a", "kenv/HwrngWait-v0": "69cbbc679ed74943",
    "kenv/Raid6Bench-v0": "ef1e95cdfaa85aae", "kenv/Kernel-v0": "2b2ae7cc18371c82",
}
BOOT = {"start": "boot"}


def _kernel(hz: int = 250) -> Kernel:
    plat = get_platform("rpi3bplus")
    return Kernel(Engine(), nr_cpus=plat.nr_cpus, hz=hz, preempt=plat.preempt, costs=plat.sched,
                  rng=np.random.default_rng(0))


# --------------------------------------------------------------- credit_init_bits

@settings(max_examples=200, deadline=None)
@given(credits=st.lists(st.integers(0, 400), min_size=1, max_size=40))
def test_ready_exactly_when_credited_bits_cross_the_threshold(credits):
    k = _kernel()
    pool = InputPool(k)
    total = 0
    for i, bits in enumerate(credits):
        k.engine.run(until=(i + 1) * 1000)      # a distinct time per credit
        was_ready = total >= POOL_READY_BITS
        got = pool.credit_init_bits(bits, "test")
        # credit_init_bits(): nothing once READY; else min(bits, POOL_BITS) up to POOL_BITS
        want = 0 if was_ready else min(POOL_BITS, total + min(bits, POOL_BITS)) - total
        assert got == want
        total += got
        assert pool.init_bits == total <= POOL_BITS
        state = CRNG_READY if total >= POOL_READY_BITS else CRNG_EARLY if total >= POOL_EARLY_BITS else CRNG_EMPTY
        assert pool.crng_init == state
        if state == CRNG_READY and not was_ready:
            assert pool.ready_ns == k.now       # the call that crossed 256, not before, not after
        if state >= CRNG_EARLY and pool.early_ns is not None:
            assert pool.early_ns <= k.now
    if pool.crng_init == CRNG_EMPTY:
        assert pool.early_ns is None and pool.ready_ns is None


# --------------------------------------------------------------- the hwrng core

def _fillfn_credits(read_log, quality: int) -> list[tuple[int, int]]:
    """(time, bits) of each of the hwrng kthread's reads, by hwrng_fillfn()'s rule."""
    out, entropy_credit = [], 0
    for t, words, comm in read_log:
        if comm != "hwrng":
            continue
        entropy = 4 * words * quality * 8 + entropy_credit
        if entropy >> 10 == 0:
            entropy_credit = entropy
        out.append((t, entropy >> 10))
    return out


@pytest.mark.parametrize("quality", [HWRNG_DEFAULT_QUALITY, 512, 100, 7])
def test_hwrng_credits_per_its_quality_and_sleeps_once_ready(quality):
    """rng_quality (sysfs) set to ``quality`` right after hwrng_register():
    each read credits rc * 8 * quality / 1024 bits (remainder carried); READY
    comes with the read whose credit crosses 256 bits; then the kthread sleeps
    crng_reseed_interval() (HZ jiffies this early in boot) before reading again."""
    k = _kernel()
    params = get_platform("rpi3bplus").hwrng
    pool = InputPool(k)
    core = bcm2835_rng_probe(k, params, "hwrng_yield", pool, smp_cache_bytes=64)
    core.rng.quality = quality
    k.run(until=params.warmup_ns + 3 * NSEC_PER_SEC)
    credits = _fillfn_credits(core.rng.read_log, quality)
    assert credits, "the kthread never read"
    total, t_ready, i_ready = 0, None, None
    for i, (t, bits) in enumerate(credits):
        if total < POOL_READY_BITS <= total + bits:
            t_ready, i_ready = t, i
        total += bits
    assert pool.credited_by.get("hwrng", 0) == min(total, POOL_READY_BITS)
    assert pool.init_bits == min(total, POOL_READY_BITS)
    if t_ready is None:
        assert not pool.crng_ready()
        return
    assert pool.crng_ready() and t_ready <= pool.ready_ns < t_ready + 1_000_000
    # add_hwgenerator_randomness(): no sleep before READY (reads follow one another
    # as the FIFO fills), a crng_reseed_interval() sleep after it
    after = [t for t, _ in credits[i_ready + 1:]]
    assert not after or after[0] - pool.ready_ns >= k.HZ * k.TICK_NSEC
    assert core.bits_credited == total


def test_kthread_sleeps_only_when_it_credited_nothing_or_ready():
    """Quality 0 (rng_quality written 0): every read credits nothing, so
    add_hwgenerator_randomness() sleeps a reseed interval after each one."""
    k = _kernel()
    params = get_platform("rpi3bplus").hwrng
    pool = InputPool(k)
    core = bcm2835_rng_probe(k, params, "hwrng_yield", pool, smp_cache_bytes=64)
    core.rng.quality = 0
    k.run(until=params.warmup_ns + 4 * NSEC_PER_SEC)
    times = [t for t, _, comm in core.rng.read_log if comm == "hwrng"]
    assert pool.init_bits == 0 and len(times) >= 2
    assert all(b - a >= k.HZ * k.TICK_NSEC for a, b in zip(times, times[1:]))


# --------------------------------------------------------------- KernelBoot-v0 at boot

def _episode(env, seed, action, scenario=BOOT):
    obs, info = env.reset(seed=seed, options={"scenario": scenario})
    first = (obs, info)
    while True:
        obs, _, term, trunc, info = env.step(action)
        if term or trunc:
            return first, info


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_boot_episode_starts_before_ready(seed):
    env = gym.make("kenv/KernelBoot-v0")
    obs, info = env.reset(seed=seed)
    assert info["scenario"]["start"] == "boot"
    assert info["crng_init"] == CRNG_EMPTY and info["bits_credited_total"] == 0
    assert info["crng_ready_s"] == -1.0
    rows = [r[0] for r in env.unwrapped.obs_rows]
    i = rows.index("crng_init == CRNG_EMPTY")
    assert list(obs[i:i + 3]) == [1.0, 0.0, 0.0]
    # the observation follows the state through the episode
    while True:
        obs, _, term, trunc, info = env.step(env.action_space.sample())
        assert obs[i + info["crng_init"]] == 1.0 and obs[i:i + 3].sum() == 1.0
        if term or trunc:
            break


def test_wait_decides_ready_through_the_kthreads_reads():
    """4K, voluntary: interrupts alone credit ~550 bits/s (too slow for the
    episode); hwrng_yield's kthread reads as the warm-up ends and makes the
    crng READY then; hwrng_msleep(1000) sleeps a second on the empty FIFO and
    the crng is not READY when modprobe exits."""
    env = gym.make("kenv/KernelBoot-v0")
    u = env.unwrapped
    scenario = {**BOOT, "msg_size": "4K", "preempt": "platform", "load": "none"}
    wait = {w: i for i, w in enumerate(u.actions[1])}
    (_, info0), yield_end = _episode(env, 0, np.array([1, wait["hwrng_yield"], 1]), scenario)
    pool = u._episode.pool
    assert yield_end["crng_init"] == CRNG_READY and pool.credited_by["hwrng"] > 0
    warm_end_s = u._episode.hw.core.rng.t_start / NSEC_PER_SEC      # (t_start: the warm-up's end)
    assert warm_end_s <= yield_end["crng_ready_s"] < warm_end_s + 0.01
    _, msleep_end = _episode(env, 0, np.array([1, wait["hwrng_msleep(1000)"], 1]), scenario)
    pool = u._episode.pool
    assert msleep_end["crng_init"] != CRNG_READY and "hwrng" not in pool.credited_by
    assert 0 < pool.credited_by["interrupts"] < POOL_READY_BITS


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), actions=st.lists(st.tuples(
    st.integers(0, 1), st.integers(0, 2), st.integers(0, 1)), min_size=40, max_size=40))
def test_no_entropy_credited_beyond_what_was_collected(seed, actions):
    env = gym.make("kenv/KernelBoot-v0")
    env.reset(seed=seed)
    ep = env.unwrapped._episode
    total = 0.0
    for a in actions:
        _, _, term, trunc, info = env.step(np.array(a))
        total += info["reward_components"]["entropy"]
        if term or trunc:
            break
    pool, core, rnd = ep.pool, ep.hw.core, ep.q.randoms[0]
    assert pool.init_bits == sum(pool.credited_by.values()) <= POOL_READY_BITS
    assert total == pytest.approx(pool.init_bits / 256)
    # the hwrng: at most bytes * 8 * quality / 1024 of what the kthread handed over
    assert pool.credited_by.get("hwrng", 0) <= core.bytes_to_pool * 8 * core.rng.quality // 1024
    # the interrupts: at most count / 64 per mix, at least 1, capped per mix
    fps = rnd.pools.values()
    assert pool.credited_by.get("interrupts", 0) == sum(fp.credited for fp in fps)
    assert all(fp.credited <= fp.counted // 64 + fp.mixes for fp in fps)
    assert all(fp.credited <= fp.mixes * rnd.max_credit for fp in fps)


def test_ready_start_of_v1_is_v0s():
    """scenario start=ready: KernelBoot-v0's trajectory is Kernel-v3's, plus the crng entries."""
    v0, v1 = gym.make("kenv/Kernel-v3"), gym.make("kenv/KernelBoot-v0")
    o0, i0 = v0.reset(seed=5)
    o1, i1 = v1.reset(seed=5, options={"scenario": {**i0["scenario"], "start": "ready"}})
    n = len(obs_rows(v0.unwrapped.version.observation))
    assert np.array_equal(o0[:n], o1[:n]) and list(o1[n:n + 3]) == [0.0, 0.0, 1.0]
    for a in ([1, 2, 1], [0, 1, 0], [1, 0, 1]):
        s0, s1 = v0.step(np.array(a)), v1.step(np.array(a))
        assert s0[1] == s1[1] and s0[2:4] == s1[2:4]
        assert np.array_equal(s0[0][:n], s1[0][:n])
        assert s0[4]["reward_components"] == s1[4]["reward_components"]


def test_v0_ids_keep_their_fingerprints():
    out = subprocess.run([sys.executable, "benchmarks/fingerprint.py", *sum((["--env", e] for e in V0_FINGERPRINTS), [])],
                         cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    got = dict(line.split() for line in out.stdout.splitlines() if line.strip())
    assert got == V0_FINGERPRINTS
