"""The timer wheel (kernel/time/timer.c).

Geometry as in the kernel: ``LVL_CLK_SHIFT = 3`` (each level is 8 times
coarser), ``LVL_BITS = 6`` (64 buckets per level), ``LVL_DEPTH = 9`` for
HZ > 100 and 8 otherwise.  ``calc_index()`` rounds the expiry *up* to the next
bucket boundary of its level, so a timer never fires early:

* level 0 (delta < 63 jiffies): ``expires = E`` fires at the tick where
  jiffies becomes ``E + 1``; ``expires = jiffies`` fires at the next tick.
* level 1 (delta < 504): fires at the smallest multiple of 8 strictly greater
  than ``E``; level 2 (delta < 4032): of 64; and so on.

Expired timers run from TIMER_SOFTIRQ on the CPU whose base holds them: on
the way out of the tick's interrupt, or, on PREEMPT_RT with the interrupt
threads simulated (``Kernel(irq_threads=True)``), in that CPU's ``ktimers/N``
or ``ksoftirqd/N`` thread (:mod:`kenv.kernel.irq`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # pragma: no cover
    from .core import Kernel

LVL_CLK_SHIFT = 3
LVL_BITS = 6
LVL_SIZE = 1 << LVL_BITS


def LVL_SHIFT(n: int) -> int:
    return n * LVL_CLK_SHIFT


def LVL_GRAN(n: int) -> int:
    return 1 << LVL_SHIFT(n)


def LVL_START(n: int) -> int:
    return (LVL_SIZE - 1) << ((n - 1) * LVL_CLK_SHIFT)


def lvl_depth(hz: int) -> int:
    return 9 if hz > 100 else 8


def wheel_timeout_cutoff(hz: int) -> int:
    return LVL_START(lvl_depth(hz))


def calc_index(expires: int, lvl: int) -> tuple[int, int]:
    """Bucket index within the level and ``bucket_expiry`` (the jiffy it fires at)."""
    expires = (expires >> LVL_SHIFT(lvl)) + 1
    bucket_expiry = expires << LVL_SHIFT(lvl)
    return expires & (LVL_SIZE - 1), bucket_expiry


def calc_wheel_index(expires: int, clk: int, hz: int) -> tuple[int, int]:
    """Level chosen for ``expires`` seen from ``clk``, and the bucket expiry.

    Returns ``(level, bucket_expiry)``: the timer fires when jiffies reaches
    ``bucket_expiry``.
    """
    delta = expires - clk
    depth = lvl_depth(hz)
    if delta < 0:
        # Already expired: the kernel puts it in the current level-0 bucket.
        return 0, clk
    for lvl in range(depth - 1):
        if delta < LVL_START(lvl + 1):
            return lvl, calc_index(expires, lvl)[1]
    if delta >= wheel_timeout_cutoff(hz):
        expires = clk + (wheel_timeout_cutoff(hz) - LVL_GRAN(depth - 1))
    return depth - 1, calc_index(expires, depth - 1)[1]


class timer_list:
    """``struct timer_list``: ``expires`` in jiffies and a callback.

    The callback is called as ``function(timer)`` in TIMER_SOFTIRQ context on
    the owning CPU.  ``cost_ns`` is the CPU time the callback takes there.
    """

    __slots__ = ("function", "expires", "cpu", "cost_ns", "data", "_event", "bucket_expiry", "name",
                 "_expiring")

    def __init__(self, function: Callable[["timer_list"], Any], *, cost_ns: int = 0,
                 name: str | None = None, data: Any = None):
        self.function = function
        self.expires = 0
        self.cpu: int | None = None
        self.cost_ns = cost_ns
        self.data = data
        self.name = name or getattr(function, "__name__", "timer")
        self._event = None
        self.bucket_expiry: int | None = None
        #: expired, its callback waiting in the timer softirq's thread (kenv.kernel.irq)
        self._expiring = False


def timer_pending(timer: timer_list) -> bool:
    return timer._event is not None and timer._event.pending


class TimerWheel:
    """Per-CPU timer bases of one simulated kernel.

    A pending timer is one engine event at the tick of its bucket expiry, so
    the cost is per timer, not per jiffy.  Each base knows its pending timers
    (``next_expiry(cpu)``, as ``timer_base->next_expiry`` does in the kernel).
    """

    def __init__(self, kernel: "Kernel"):
        self.k = kernel
        #: cpu -> the timers pending on that CPU's base
        self._bases: dict[int, set] = {}

    def add_timer_on(self, timer: timer_list, cpu: int) -> None:
        """add_timer_on(): queue ``timer`` on ``cpu``'s base (must not be pending)."""
        if timer_pending(timer):
            raise RuntimeError(f"add_timer_on: timer {timer.name} already pending (BUG_ON)")
        self._enqueue(timer, cpu)

    def add_timer(self, timer: timer_list, cpu: int) -> None:
        """add_timer(): queue on the calling CPU."""
        self.add_timer_on(timer, cpu)

    def mod_timer(self, timer: timer_list, expires: int, cpu: int) -> bool:
        """mod_timer(): (re)arm; returns whether the timer was pending."""
        was = self._detach(timer)   # (a callback waiting in a thread still runs)
        timer.expires = expires
        self._enqueue(timer, timer.cpu if (was and timer.cpu is not None) else cpu)
        return was

    def del_timer(self, timer: timer_list) -> bool:
        """del_timer(): dequeue a pending timer; True if it was pending.

        A timer that has expired but whose callback still waits in the timer
        softirq's thread (PREEMPT_RT, kenv.kernel.irq) is not pending; its
        callback is dropped: the kernel's del_timer_sync() (schedule_timeout()'s
        del_singleshot_timer_sync()) would have waited for it to run, with the
        deleting task awake, where process_timeout()'s wakeup changes nothing
        -- what dropping it gives, without modelling the wait."""
        if self._detach(timer):
            return True
        timer._expiring = False
        return False

    def _detach(self, timer: timer_list) -> bool:
        """detach_if_pending(): take a pending timer off its base."""
        if timer_pending(timer):
            timer._event.cancel()
            timer._event = None
            self._bases[timer.cpu].discard(timer)
            return True
        return False

    def next_expiry(self, cpu: int) -> int | None:
        """The earliest bucket expiry (in jiffies) pending on ``cpu``'s base, or None."""
        base = self._bases.get(cpu)
        if not base:
            return None
        return min(t.bucket_expiry for t in base)

    def _enqueue(self, timer: timer_list, cpu: int) -> None:
        k = self.k
        clk = k.jiffies  # forward_timer_base(): the base clock is brought up to jiffies
        _, bucket_expiry = calc_wheel_index(timer.expires, clk, k.HZ)
        if bucket_expiry <= clk:
            bucket_expiry = clk + 1  # an expired timer runs at the next tick
        self.enqueue_bucket(timer, cpu, bucket_expiry)
        rec = k.engine.recorder
        if rec is not None:
            # timer_start: the rounding of calc_index() shows as bucket_expiry - expires
            lvl, _ = calc_wheel_index(timer.expires, clk, k.HZ)
            rec.instant("timer", (k.name, cpu), "timer_start", k.now, timer=rec.ref(timer),
                        function=timer.name, expires=timer.expires, timeout=timer.expires - clk,
                        bucket_expiry=bucket_expiry, level=lvl, now=clk, cpu=cpu)

    def enqueue_bucket(self, timer: timer_list, cpu: int, bucket_expiry: int) -> None:
        """Put ``timer`` in the bucket that fires when jiffies reaches
        ``bucket_expiry`` (> jiffies), bypassing ``calc_wheel_index()``: for a
        caller that knows which bucket the timer of a skipped sleep would have
        been in (kenv.fastforward.hwrng)."""
        k = self.k
        timer.cpu = cpu
        timer.bucket_expiry = bucket_expiry
        timer._event = k.engine.at(k.tick_time(bucket_expiry), self._expire, timer)
        base = self._bases.get(cpu)
        if base is None:
            base = self._bases[cpu] = set()
        base.add(timer)

    def expire_now(self, timer: timer_list, cpu: int, bucket_expiry: int) -> None:
        """What the wheel does at this tick for ``timer`` queued on ``cpu`` in the
        bucket of ``bucket_expiry`` (now's jiffy): for a caller that knows the
        timer was armed and would fire now but did not queue it, nothing
        having looked at it in between (kenv.fastforward.qperf)."""
        if self.k.jiffies != bucket_expiry:
            raise RuntimeError(f"expire_now: timer {timer.name} is due at jiffy {bucket_expiry}, "
                               f"not now ({self.k.jiffies})")
        timer.cpu = cpu
        timer.bucket_expiry = bucket_expiry
        self._run(timer)

    def _expire(self, timer: timer_list) -> None:
        """__run_timers() -> expire_timers() -> call_timer_fn(), in TIMER_SOFTIRQ."""
        timer._event = None
        self._bases[timer.cpu].discard(timer)
        self._run(timer)

    def _run(self, timer: timer_list) -> None:
        k = self.k
        if k.irq is not None:
            # run_local_timers() raised TIMER_SOFTIRQ in the tick's hard IRQ:
            # its thread runs __run_timers() -> call_timer_fn()
            timer._expiring = True
            k.irq.raise_timer_softirq(timer.cpu, timer.cost_ns, self._call_timer_fn, timer)
            return
        rec = k.engine.recorder
        if rec is None:
            k.run_softirq(timer.cpu, "TIMER", timer.cost_ns, timer.function, timer, label=timer.name)
            return
        cpu, expires, baseclk = timer.cpu, timer.expires, timer.bucket_expiry
        start = max(k.now, k.cpus[cpu].irq_until)
        end = k.run_softirq(cpu, "TIMER", timer.cost_ns, timer.function, timer, label=timer.name)
        # timer_expire_entry .. timer_expire_exit, inside the TIMER softirq
        rec.slice("timer", (k.name, cpu), timer.name, start, end, timer=rec.ref(timer),
                  function=timer.name, expires=expires, now=k.jiffies_at(start), baseclk=baseclk)

    def _call_timer_fn(self, timer: timer_list) -> None:
        """call_timer_fn() in the timer softirq's thread (its CPU time was run
        before), unless del_timer() dropped it meanwhile."""
        if not timer._expiring:
            return
        timer._expiring = False
        self.k.trace_instant(timer.cpu, "timer_expire", function=timer.name, expires=timer.expires)
        timer.function(timer)
