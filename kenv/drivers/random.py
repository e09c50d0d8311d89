"""drivers/char/random.c: the input pool, credit_init_bits() and crng_init.

The fast pools and add_interrupt_randomness() (seed 000) extend this module;
the hwrng kthread credits through add_hwgenerator_randomness().
"""

from __future__ import annotations

from typing import Callable

from ..kernel.core import Task, TaskBody
from ..kernel.sleep import schedule_timeout_interruptible

POOL_BITS = 256          # BLAKE2S_HASH_SIZE * 8
POOL_READY_BITS = POOL_BITS
POOL_EARLY_BITS = POOL_READY_BITS // 2

CRNG_EMPTY = 0
CRNG_EARLY = 1
CRNG_READY = 2
CRNG_STATE_NAMES = {CRNG_EMPTY: "empty", CRNG_EARLY: "early", CRNG_READY: "ready"}


class InputPool:
    """``input_pool`` plus ``crng_init``, with the time of each crng transition.

    ``credited_by`` counts bits by source so a reward can attribute them.
    """

    def __init__(self, kernel) -> None:
        self.k = kernel
        self.init_bits = 0
        self.crng_init = CRNG_EMPTY
        self.early_ns: int | None = None   # "random: crng init early"? (time CRNG_EARLY reached)
        self.ready_ns: int | None = None   # "random: crng init done"
        self.credited_by: dict[str, int] = {}
        self.mixed_bytes = 0
        self.on_ready: list[Callable[[], None]] = []

    def crng_ready(self) -> bool:
        return self.crng_init >= CRNG_READY

    def mix_pool_bytes(self, nbytes: int) -> None:
        self.mixed_bytes += nbytes

    def credit_init_bits(self, bits: int, source: str = "other") -> int:
        """credit_init_bits(): no-op once READY; returns the bits actually added."""
        if self.crng_ready() or bits <= 0:
            return 0
        add = min(bits, POOL_BITS)
        orig = self.init_bits
        new = min(POOL_BITS, orig + add)
        self.init_bits = new
        self.credited_by[source] = self.credited_by.get(source, 0) + (new - orig)
        if orig < POOL_READY_BITS <= new:
            self.crng_init = CRNG_READY
            self.ready_ns = self.k.now
            if self.early_ns is None:
                self.early_ns = self.k.now
            self.k.trace_instant(0, "crng init done")
            for fn in self.on_ready:
                fn()
        elif orig < POOL_EARLY_BITS <= new:
            self.crng_init = CRNG_EARLY
            self.early_ns = self.k.now
            self.k.trace_instant(0, "crng init early")
        return new - orig

    def crng_reseed_interval(self) -> int:
        """crng_reseed_interval() in jiffies: uptime/2 early in boot (at least
        CRNG_RESEED_START_INTERVAL = HZ), CRNG_RESEED_INTERVAL = 60*HZ after."""
        hz = self.k.HZ
        uptime_s = self.k.now // 1_000_000_000
        if uptime_s < 60 * 2:
            return max(hz, uptime_s // 2 * hz)
        return 60 * hz


def add_hwgenerator_randomness(task: Task, pool: InputPool, nbytes: int, entropy_bits: int,
                               sleep_after: bool = True) -> TaskBody:
    """add_hwgenerator_randomness(): mix, credit, then (once READY) sleep a reseed interval."""
    pool.mix_pool_bytes(nbytes)
    pool.credit_init_bits(entropy_bits, source="hwrng")
    if sleep_after and (pool.crng_ready() or not entropy_bits):
        yield from schedule_timeout_interruptible(task, pool.crng_reseed_interval())
