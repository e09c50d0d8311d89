"""drivers/char/random.c: the input pool, credit_init_bits() and crng_init.

The rules are those of random.c in 6.x (which 5.15-stable follows after its
random.c backport): POOL_READY_BITS = POOL_BITS = 256, POOL_EARLY_BITS =
128, ``credit_init_bits()`` a no-op once ``crng_ready()``.

* ``InputPool``: ``input_pool``, credit_init_bits() and the crng EMPTY ->
  EARLY (128 bits) -> READY (256 bits) transitions, time-stamped.
* ``add_hwgenerator_randomness()``: what the hwrng kthread calls (seed 001).
* ``IrqRandomness``: the per-CPU ``fast_pool``, add_interrupt_randomness()
  and mix_interrupt_randomness() with the deferral strategies of seed 000
  (v5.18 .. v6.x, as backported to 5.15-stable): ``workqueue``
  (queue_work_on(cpu, system_highpri_wq), 58340f8e952b), ``schedule_work``
  (the normal-priority system_wq), ``timer`` (add_timer_on() of an expired
  timer, 748bc4dd9e66), ``hardirq`` (the original in-IRQ mix under the
  input_pool spinlock) and ``none``.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable

from ..schema import check_choice
from ..kernel.core import Task, TaskBody
from ..kernel.sleep import schedule_timeout_interruptible
from ..kernel.timer import timer_list, timer_pending
from ..kernel.workqueue import queue_work_on, system_highpri_wq, system_wq, work_struct

POOL_BITS = 256          # BLAKE2S_HASH_SIZE * 8
POOL_READY_BITS = POOL_BITS
POOL_EARLY_BITS = POOL_READY_BITS // 2

#: ``CRNG_RESEED_START_INTERVAL = HZ`` and ``CRNG_RESEED_INTERVAL = 60 * HZ``, in seconds
CRNG_RESEED_START_INTERVAL_S = 1
CRNG_RESEED_INTERVAL_S = 60

#: ``crng_init``: ``enum { CRNG_EMPTY = 0, CRNG_EARLY = 1, CRNG_READY = 2 }``
CRNG_EMPTY = 0
CRNG_EARLY = 1
CRNG_READY = 2
CRNG_STATE_NAMES = MappingProxyType({CRNG_EMPTY: "empty", CRNG_EARLY: "early", CRNG_READY: "ready"})


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
        CRNG_RESEED_START_INTERVAL = HZ), CRNG_RESEED_INTERVAL = 60*HZ once
        the uptime reaches twice that."""
        hz = self.k.HZ
        uptime_s = self.k.now // 1_000_000_000
        if uptime_s < CRNG_RESEED_INTERVAL_S * 2:
            return max(CRNG_RESEED_START_INTERVAL_S * hz, uptime_s // 2 * hz)
        return CRNG_RESEED_INTERVAL_S * hz


def add_hwgenerator_randomness(task: Task, pool: InputPool, nbytes: int, entropy_bits: int,
                               sleep_after: bool = True) -> TaskBody:
    """add_hwgenerator_randomness(): mix, credit, then (once READY) sleep a reseed interval."""
    pool.mix_pool_bytes(nbytes)
    pool.credit_init_bits(entropy_bits, source="hwrng")
    if sleep_after and (pool.crng_ready() or not entropy_bits):
        yield from schedule_timeout_interruptible(task, pool.crng_reseed_interval())


# ==========================================================================
# Interrupt entropy: the per-CPU fast pools (seed 000)
# ==========================================================================

#: add_interrupt_randomness(): ``enum { MIX_INFLIGHT = 1U << 31 }``.
MIX_INFLIGHT = 1 << 31
U32_MAX = (1 << 32) - 1
U16_MAX = 0xFFFF
#: Interrupts per mix since 534d2eaf1970 (``new_count < 1024``); 64 before it.
FAST_POOL_MIX_THRESHOLD = 1024
FAST_POOL_MIX_THRESHOLD_OLD = 64
ALLOWED_THRESHOLDS = (FAST_POOL_MIX_THRESHOLD, FAST_POOL_MIX_THRESHOLD_OLD)

#: How mix_interrupt_randomness() is deferred out of the hard IRQ.
#:
#: ``workqueue``      queue_work_on(cpu, system_highpri_wq) (58340f8e952b)
#: ``schedule_work``  queue_work_on(cpu, system_wq): schedule_work_on(), nice 0
#: ``timer``          add_timer_on(&mix, cpu) with expires = jiffies (748bc4dd9e66)
#: ``hardirq``        the original: mix under input_pool.lock in the IRQ handler
#: ``none``           the queue_work_on() line commented out: nothing is mixed
DEFERRALS = ("workqueue", "schedule_work", "timer", "hardirq", "none")

#: SipHash initial constants (include/linux/siphash.h), the fast pool's initial
#: contents on 64-bit.  The contents are carried for naming fidelity only:
#: no simulated figure depends on them, so fast_mix()'s arithmetic is not run.
SIPHASH_CONSTS = (0x736F6D6570736575, 0x646F72616E646F6D, 0x6C7967656E657261, 0x7465646279746573)


def check_deferral(deferral: str) -> str:
    return check_choice(deferral, "deferral", DEFERRALS)


def check_threshold(threshold: int) -> int:
    return check_choice(threshold, "threshold", ALLOWED_THRESHOLDS, "1024 (since 534d2eaf1970) or 64 (before it)")


@dataclass(frozen=True)
class RandomParams:
    """CPU costs of the interrupt-entropy path on one platform.

    ``mix_ns``: mix_interrupt_randomness() itself -- irq-off copy of two longs,
    mix_pool_bytes() (one BLAKE2s block under input_pool.lock) and
    credit_init_bits().  ``fast_mix_ns``: fast_mix() (two SipHash rounds) per
    interrupt, part of the hard-IRQ cost the workload charges.
    ``source``: where the numbers come from.
    """

    mix_ns: int
    fast_mix_ns: int
    source: str = ""


class fast_pool:
    """``struct fast_pool`` (one per CPU): ``pool[4]``, ``last``, ``count``, ``mix``.

    ``mix`` is the deferral object: a work_struct (workqueue, schedule_work)
    or a timer_list (timer).  The rest are statistics of this simulator.
    """

    __slots__ = ("cpu", "pool", "last", "count", "mix", "irqs", "mixes", "credited",
                 "counted", "scheduled", "mix_times")

    def __init__(self, cpu: int):
        self.cpu = cpu
        self.pool = list(SIPHASH_CONSTS)
        self.last = 0          # static per-CPU data starts zeroed
        self.count = 0
        self.mix = None
        self.irqs = 0          # interrupts seen (add_interrupt_randomness calls)
        self.mixes = 0         # mix_interrupt_randomness() runs
        self.credited = 0      # bits credit_init_bits() accepted from this pool
        self.counted = 0       # sum over mixes of (count & U16_MAX): the interrupts they covered
        self.scheduled = 0     # mixes scheduled (MIX_INFLIGHT set)
        self.mix_times: list[int] | None = None  # optional: ns of each mix (tests)

    @property
    def inflight(self) -> bool:
        return bool(self.count & MIX_INFLIGHT)


class IrqRandomness:
    """The interrupt half of random.c on one simulated kernel.

    ``add_interrupt_randomness(cpu)`` is called by the workloads from hard-IRQ
    context; the deferral strategy decides where ``mix_interrupt_randomness``
    runs.  ``mix_hooks`` are called as ``hook(fast_pool, context)`` after each
    mix, with context ``"kworker"``, ``"timer"`` or ``"hardirq"``: a workload
    uses it to see that a task other than its own ran on its CPU.
    ``pre_mix_hooks`` are called as ``hook(fast_pool)`` just before a mix reads
    ``count``: a workload that counts interrupts in bulk brings the count up
    to date there (MIX_INFLIGHT is set, so no interrupt it adds can trigger).
    """

    def __init__(self, kernel, pool: InputPool | None = None, *, deferral: str = "timer",
                 threshold: int = FAST_POOL_MIX_THRESHOLD, params: RandomParams | None = None,
                 long_bits: int = 64):
        self.k = kernel
        self.input_pool = pool if pool is not None else InputPool(kernel)
        self.deferral = check_deferral(deferral)
        self.threshold = check_threshold(threshold)
        self.params = params if params is not None else RandomParams(mix_ns=1_000, fast_mix_ns=50)
        self.long_bits = check_choice(long_bits, "long_bits", (32, 64), "32 or 64")
        #: sizeof(pool) * 8 where pool is ``unsigned long pool[2]``: the credit cap.
        self.max_credit = 2 * long_bits
        self.pools: dict[int, fast_pool] = {}
        self.mix_hooks: list[Callable[[fast_pool, str], None]] = []
        self.pre_mix_hooks: list[Callable[[fast_pool], None]] = []
        self._might_sleep_prev_jiffy = 0
        self.bug_count = 0
        #: mix_interrupt_randomness() runs on all CPUs (the sum of fast_pool.mixes)
        self.mixes = 0

    # ------------------------------------------------------------- helpers
    def fast_pool(self, cpu: int) -> fast_pool:
        fp = self.pools.get(cpu)
        if fp is None:
            fp = self.pools[cpu] = fast_pool(cpu)
            self._init_mix(fp)
        return fp

    def _init_mix(self, fp: fast_pool) -> None:
        if self.deferral in ("workqueue", "schedule_work"):
            fp.mix = work_struct(self._mix_work, cost_ns=self.params.mix_ns, data=fp,
                                 name="mix_interrupt_randomness")
        elif self.deferral == "timer":
            # .mix = __TIMER_INITIALIZER(mix_interrupt_randomness, 0)
            fp.mix = timer_list(self._mix_timer, cost_ns=self.params.mix_ns,
                                name="mix_interrupt_randomness", data=fp)

    def _mix_work(self, work) -> None:
        self.mix_interrupt_randomness(work.data, "kworker")

    def _mix_timer(self, timer) -> None:
        self.mix_interrupt_randomness(timer.data, "timer")

    def _trigger_due(self, fp: fast_pool, new_count: int, jiffies: int) -> bool:
        """``new_count >= threshold || time_is_before_jiffies(last + HZ)``."""
        return new_count >= self.threshold or jiffies > fp.last + self.k.HZ

    # ------------------------------------------------ add_interrupt_randomness
    def add_interrupt_randomness(self, cpu: int, irq: int = 0) -> bool:
        """add_interrupt_randomness(irq) on ``cpu``, in hard-IRQ context.

        Returns True when this interrupt scheduled (or, for ``hardirq``, ran)
        a mix.
        """
        fp = self.fast_pool(cpu)
        # fast_mix(fast_pool->pool, entropy, ip ^ swab(irq)): contents not simulated
        fp.irqs += 1
        fp.count = (fp.count + 1) & U32_MAX
        new_count = fp.count
        if new_count & MIX_INFLIGHT:
            return False
        if not self._trigger_due(fp, new_count, self.k.jiffies):
            return False
        fp.count |= MIX_INFLIGHT
        fp.scheduled += 1
        self._schedule_mix(fp)
        return True

    def add_interrupt_randomness_queued(self, cpu: int, jiffies: int | None = None) -> None:
        """add_interrupt_randomness() (at ``jiffies``, default now) for the
        interrupt that schedules a workqueue mix, when a fast-forward
        (kenv.fastforward.qperf) replays the kworker's run: the count,
        MIX_INFLIGHT and the work as add_interrupt_randomness() and
        queue_work_on() leave them, but no kworker is woken; the fast-forward
        calls mix_interrupt_randomness() where that kworker would have.
        (``work.pending`` and the worklist are left alone: the kworker's run
        that the fast-forward replays clears them before anything could look.)
        Raises if this interrupt would not schedule a mix, rather than silently
        dropping one."""
        self._trigger_unqueued(cpu, self.k.jiffies if jiffies is None else jiffies,
                               ("workqueue", "schedule_work"), work_struct, "add_interrupt_randomness_queued")

    def add_interrupt_randomness_timer(self, cpu: int, jiffies: int) -> timer_list:
        """add_interrupt_randomness() at ``jiffies`` for the interrupt that
        schedules a timer mix, when a fast-forward (kenv.fastforward.qperf) runs
        the timer's expiry in the same event: the count, MIX_INFLIGHT and the
        timer as add_interrupt_randomness() and _schedule_mix() leave them
        (``expires = jiffies``), but not queued -- the caller expires it at
        its tick (TimerWheel.expire_now), nothing looking at it in between.
        Raises if this interrupt would not schedule a timer mix."""
        fp = self._trigger_unqueued(cpu, jiffies, ("timer",), timer_list, "add_interrupt_randomness_timer")
        if timer_pending(fp.mix):  # pragma: no cover - MIX_INFLIGHT was clear: its last mix ran
            raise RuntimeError("add_interrupt_randomness_timer: the mix timer is pending")
        fp.mix.expires = jiffies
        return fp.mix

    def _trigger_unqueued(self, cpu: int, jiffies: int, deferrals: tuple, mix_type: type, caller: str) -> fast_pool:
        """What add_interrupt_randomness() does, at ``jiffies``, for an interrupt
        that schedules a mix on one of ``deferrals`` -- the count, MIX_INFLIGHT,
        ``fp.mix`` of ``mix_type`` -- short of queuing it (the two callers above).
        Raises if this interrupt would not schedule such a mix."""
        fp = self.fast_pool(cpu)
        fp.irqs += 1
        fp.count = (fp.count + 1) & U32_MAX
        if self.deferral not in deferrals or fp.count & MIX_INFLIGHT or not self._trigger_due(fp, fp.count, jiffies):
            raise RuntimeError(f"{caller}: this interrupt schedules no {'/'.join(deferrals)} mix")
        fp.count |= MIX_INFLIGHT
        fp.scheduled += 1
        if not isinstance(fp.mix, mix_type):
            self._init_mix(fp)  # the strategy changed since this pool's last mix (_schedule_mix)
        return fp

    def add_interrupt_randomness_many(self, cpu: int, n: int, t_last: int | None = None) -> None:
        """``n`` interrupts on ``cpu``, none of which triggers a mix.

        The bulk form of ``n`` calls of add_interrupt_randomness(): the caller
        has established with :meth:`first_trigger` that none of them reaches
        the threshold or the HZ rule (``t_last``: the time of the last one).
        Raises if that is not so, rather than silently dropping a mix.
        """
        if n <= 0:
            return
        fp = self.fast_pool(cpu)
        if not fp.count & MIX_INFLIGHT:
            j_last = self.k.jiffies if t_last is None else self.k.jiffies_at(t_last)
            if self._trigger_due(fp, fp.count + n, j_last):
                raise RuntimeError(f"add_interrupt_randomness_many: a mix is due among {n} interrupts")
        fp.irqs += n
        # count is 32 bits wide; MIX_INFLIGHT is its top bit, so wrapping is as in C
        fp.count = (fp.count + n) & U32_MAX

    def first_trigger(self, cpu: int, n: int, time_of: Callable[[int], int]) -> int | None:
        """Index (0-based) of the first of the next ``n`` interrupts that
        would schedule a mix, given the fast pool's state now, or None.

        ``time_of(i)`` is the time of interrupt ``i`` (non-decreasing).  Both
        rules are monotone in i, so the answer is the smaller of the count
        rule's index and the first index whose time satisfies the HZ rule.
        """
        fp = self.fast_pool(cpu)
        if n <= 0 or fp.count & MIX_INFLIGHT:
            return None
        by_count = max(0, self.threshold - fp.count - 1)   # count + i + 1 >= threshold
        best = by_count if by_count < n else None
        # HZ rule: jiffies(t_i) > last + HZ  <=>  t_i >= tick_time(last + HZ + 1)
        t_hz = self.k.tick_time(fp.last + self.k.HZ + 1)
        hi = n if best is None else best
        if hi > 0 and time_of(hi - 1) >= t_hz:
            lo, h = 0, hi - 1
            while lo < h:
                mid = (lo + h) // 2
                if time_of(mid) >= t_hz:
                    h = mid
                else:
                    lo = mid + 1
            best = lo
        return best

    def set_deferral(self, deferral: str) -> None:
        """Change the strategy (an environment decides it per step).  A mix
        already in flight completes the way it was scheduled; the next one
        uses the new strategy."""
        if deferral != self.deferral:      # (every step: an unchanged one needs no check)
            self.deferral = check_deferral(deferral)

    def _schedule_mix(self, fp: fast_pool) -> None:
        k = self.k
        d = self.deferral
        want = work_struct if d in ("workqueue", "schedule_work") else timer_list if d == "timer" else None
        if want is not None and not isinstance(fp.mix, want):
            self._init_mix(fp)  # the strategy changed since this pool's last mix
        if d == "workqueue":
            queue_work_on(k, fp.cpu, system_highpri_wq, fp.mix)
        elif d == "schedule_work":
            queue_work_on(k, fp.cpu, system_wq, fp.mix)
        elif d == "timer":
            if not timer_pending(fp.mix):
                fp.mix.expires = k.jiffies
                k.timers.add_timer_on(fp.mix, fp.cpu)
        elif d == "hardirq":
            # spin_lock(&input_pool.lock) in hard IRQ: a sleeping lock on PREEMPT_RT.
            if k.preempt == "rt":
                self._might_sleep_bug(fp.cpu)
            k.steal(fp.cpu, self.params.mix_ns)
            self.mix_interrupt_randomness(fp, "hardirq")
        # "none": the queue_work_on() line commented out -- MIX_INFLIGHT stays set

    def _might_sleep_bug(self, cpu: int) -> None:
        """__might_resched(): the splat, rate-limited to one per HZ jiffies."""
        self.bug_count += 1
        j = self.k.jiffies
        prev = self._might_sleep_prev_jiffy
        if prev and j < prev + self.k.HZ:
            return
        self._might_sleep_prev_jiffy = j
        self.k.BUG("BUG: sleeping function called from invalid context at "
                   "kernel/locking/spinlock_rt.c:46 (spin_lock(&input_pool.lock) from "
                   f"add_interrupt_randomness, hard IRQ, CPU {cpu}, t={self.k.now / 1e9:.6f} s)", cpu=cpu)

    # ------------------------------------------------ mix_interrupt_randomness
    def mix_interrupt_randomness(self, fp: fast_pool, context: str = "kworker") -> int:
        """Mix two longs of the fast pool into the input pool and credit.

        With IRQs off: read ``count``, set ``count = 0`` and ``last = jiffies``
        (this clears MIX_INFLIGHT); then mix_pool_bytes() and
        ``credit_init_bits(clamp((count & U16_MAX) / 64, 1, sizeof(pool) * 8))``.
        Interrupts counted while the mix was in flight are in ``count`` and are
        credited here.  Returns the bits the input pool accepted.
        """
        for hook in self.pre_mix_hooks:
            hook(fp)
        count = fp.count
        fp.count = 0
        fp.last = self.k.jiffies
        self.input_pool.mix_pool_bytes(2 * self.long_bits // 8)
        n = count & U16_MAX
        bits = min(max(n // 64, 1), self.max_credit)
        got = self.input_pool.credit_init_bits(bits, source="interrupts")
        fp.mixes += 1
        self.mixes += 1
        fp.counted += n
        fp.credited += got
        if fp.mix_times is not None:
            fp.mix_times.append(self.k.now)
        self.k.trace_instant(fp.cpu, "mix_interrupt_randomness", context=context, count=n, bits=got)
        for hook in self.mix_hooks:
            hook(fp, context)
        return got

    # --------------------------------------------------------------- stats
    def totals(self) -> dict:
        return {
            "irqs": sum(p.irqs for p in self.pools.values()),
            "mixes": sum(p.mixes for p in self.pools.values()),
            "credited": sum(p.credited for p in self.pools.values()),
            "counted": sum(p.counted for p in self.pools.values()),
        }
