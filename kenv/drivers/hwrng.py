"""The bcm2835 hardware RNG and the hwrng core (seed 001).

Kernel sources modelled:

* ``drivers/char/hw_random/bcm2835-rng.c``: ``bcm2835_rng_init()`` (enable the
  generator, discard ``RNG_WARMUP_COUNT`` numbers) and ``bcm2835_rng_read()``
  with the wait strategy under study in its empty-FIFO loop;
* ``drivers/char/hw_random/core.c``: ``rng_dev_read()`` (readers of
  /dev/hwrng), ``rng_get_data()``, ``reading_mutex``, ``hwrng_fillfn()`` (the
  "hwrng" kthread), ``hwrng_msleep()`` and ``hwrng_yield()``;
* ``kernel/locking/mutex.c``: the parts of ``mutex_lock()`` /
  ``mutex_unlock()`` that decide who gets ``reading_mutex`` (lock stealing and
  ``MUTEX_FLAG_HANDOFF``).

The generator is a function of time, not an event per word: it has produced
``floor((t - t_start) * word_rate)`` words by time ``t``; the FIFO level is
the level after the last read plus the words produced since, capped at the
FIFO depth (words produced into a full FIFO are lost -- equivalently the
generator stalls; a reader cannot tell the two apart).  ``RNG_STATUS >> 24``
is that level.  Reading ``n`` words moves the reference point.  So the cost of
the simulation scales with reads and wakeups, never with simulated
nanoseconds, and "bytes delivered never exceed bytes generated" holds by
construction (and is checked).

Wait strategies (``<wait>`` in ``bcm2835_rng_read``), as kernel-style strings
(see :func:`parse_wait`):

=======================  ==============================================================
``cpu_relax``            busy spin (<= 6.0): one ``RunUntil(next word)`` interval
``hwrng_msleep(MS)``     6.1 (96cb9d055445): ``wait_for_completion_interruptible_timeout(
                         &rng->dying, msecs_to_jiffies(MS) + 1)``
``hwrng_yield``          6.7 (the seed): ``wait_for_completion_interruptible_timeout(
                         &rng->dying, 1)``
``usleep_range(MIN,MAX)`` tried in review: an hrtimer sleep, not cancellable via ``dying``
=======================  ==============================================================

Simplifications (none changes a reproduced figure): mutex optimistic spinning
is not modelled (a waiter sleeps at once; it would spin only while the owner
is running, a few hundred ns here); ``mix_pool_bytes()`` costs no CPU time;
``put_rng``/``get_current_rng`` reference counting is omitted (one rng).
"""

from __future__ import annotations

from types import MappingProxyType

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..schema import check_int
from ..kernel.core import Run, RunUntil, Task, TaskBody
from ..kernel.jiffies import msecs_to_jiffies
from ..kernel.mutex import mutex, mutex_lock, mutex_unlock
from ..kernel.sleep import (
    complete_all, completion, schedule_timeout_interruptible, usleep_range,
    wait_for_completion_interruptible_timeout,
)
from ..sim.engine import NSEC_PER_SEC, NSEC_PER_USEC
from ..fastforward.hwrng import HwrngFastForward, HwrngLearned
from .random import InputPool, add_hwgenerator_randomness

if TYPE_CHECKING:  # pragma: no cover
    from ..kernel.core import Kernel

# drivers/char/hw_random/bcm2835-rng.c
RNG_CTRL = 0x0
RNG_STATUS = 0x4
RNG_DATA = 0x8
RNG_RBGEN = 0x1              # enable the random bit generator
#: "the initial numbers generated are 'less random' so will be discarded"
RNG_WARMUP_COUNT = 0x40000
#: RNG_STATUS bits 31:24: words available in the FIFO
RNG_STATUS_NUM_WORDS_SHIFT = 24
RNG_STATUS_NUM_WORDS_MAX = 0xFF

# drivers/char/hw_random/core.c
#: ``default_quality``: entropy per 1024 bits of input, "default to maximum"
HWRNG_DEFAULT_QUALITY = 1024
#: ``hwrng_fillfn``: ``if (rc <= 0) hwrng_msleep(rng, 10000)``
HWRNG_FILLFN_ERROR_SLEEP_MS = 10000

def rng_buffer_size(smp_cache_bytes: int) -> int:
    """``RNG_BUFFER_SIZE``: ``SMP_CACHE_BYTES < 32 ? 32 : SMP_CACHE_BYTES``.

    64 bytes (16 words) on arm64, 32 bytes (8 words) on ARM1176 (L1 line 32 B).
    """
    return max(32, smp_cache_bytes)


# --------------------------------------------------------------------------
# platform parameters
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class Bcm2835Params:
    """What a platform says about its bcm2835 RNG block and the cost of reading it.

    Each platform file documents the source of every value (or "fitted").

    ``word_rate_hz``: 32-bit words the generator adds to the FIFO per second
    once warm.  ``fifo_words``: FIFO depth, the ceiling of ``RNG_STATUS>>24``.
    ``probe_ns``: time after boot at which ``bcm2835_rng_probe()`` runs
    (enables the generator, ``hwrng_register()`` starts the "hwrng" kthread).
    ``silent_until_ns``: if set, the generator produces nothing before this
    time after boot (a generator that is not running, whatever the reason).
    ``warmup_bits_per_number``: how many generator bits one of the
    ``RNG_WARMUP_COUNT`` discarded "numbers" is (the unit is undocumented).
    ``rng_readl_ns``: one ``rng_readl()`` of RNG_STATUS or RNG_DATA (an
    uncached device read).  ``copy_chunk_ns``: the per-chunk work of
    ``rng_dev_read()`` outside the driver: mutex lock/unlock, ``memcpy`` to
    the stack buffer and ``copy_to_user`` of at most one buffer.
    """

    word_rate_hz: int
    fifo_words: int
    probe_ns: int
    rng_readl_ns: int
    copy_chunk_ns: int
    silent_until_ns: int | None = None
    warmup_bits_per_number: int = 1

    def __post_init__(self) -> None:
        check_int(self.word_rate_hz, "hwrng.word_rate_hz", 1, allowed="an integer > 0 (words per second)")
        check_int(self.fifo_words, "hwrng.fifo_words", 1, RNG_STATUS_NUM_WORDS_MAX,
                  f"an integer 1..{RNG_STATUS_NUM_WORDS_MAX} (RNG_STATUS bits 31:24)")
        for name in ("probe_ns", "rng_readl_ns", "copy_chunk_ns"):
            check_int(getattr(self, name), f"hwrng.{name}", 0, allowed="an integer >= 0 (ns)")
        check_int(self.silent_until_ns, "hwrng.silent_until_ns", 0, allowed="None or an integer >= 0 (ns)",
                  optional=True)
        check_int(self.warmup_bits_per_number, "hwrng.warmup_bits_per_number", 1)

    @property
    def warmup_ns(self) -> int:
        """Time to produce the ``RNG_WARMUP_COUNT`` discarded numbers."""
        bits = RNG_WARMUP_COUNT * self.warmup_bits_per_number
        return -(-bits * NSEC_PER_SEC // (32 * self.word_rate_hz))


# --------------------------------------------------------------------------
# wait strategies
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class WaitKind:
    """What a kind of wait in ``bcm2835_rng_read()`` is, declared once here:
    the driver's wait and the fast-forward (kenv.fastforward.hwrng) read only
    this, so a new kind is added in this file alone."""

    #: how many integer arguments it takes
    arity: int
    #: the poller sleeps (False: it spins, cpu_relax())
    sleeps: bool
    #: it sleeps in schedule_timeout(): a timer-wheel timer, woken at a tick
    on_timer_wheel: bool
    #: complete_all(&rng->dying) (device removal, suspend) ends the sleep early, as
    #: upstream requires of sleeps in hwrng drivers: it waits on rng->dying
    #: (wait_for_completion_interruptible_timeout); declared apart from the timer
    #: it sleeps on (schedule_timeout_interruptible() is on the wheel, not on dying)
    cancellable: bool = False
    #: an hrtimer sleep: the index of the argument (microseconds) at which its
    #: hrtimer fires when nothing else runs on the poller's CPU (usleep_range's MAX)
    hrtimer_arg: int | None = None


WAIT_KIND = MappingProxyType({
    "cpu_relax": WaitKind(arity=0, sleeps=False, on_timer_wheel=False),
    "hwrng_msleep": WaitKind(arity=1, sleeps=True, on_timer_wheel=True, cancellable=True),
    "hwrng_yield": WaitKind(arity=0, sleeps=True, on_timer_wheel=True, cancellable=True),
    "usleep_range": WaitKind(arity=2, sleeps=True, on_timer_wheel=False, hrtimer_arg=1),
})
WAIT_KINDS = tuple(WAIT_KIND)
#: the largest wait argument: the kernel's ``unsigned int msecs`` of
#: hwrng_msleep() (usleep_range's unsigned longs are held to the same bound)
WAIT_ARG_MAX = 2**32 - 1
WAIT_ALLOWED = (f"cpu_relax, hwrng_yield, hwrng_msleep(MS) with integer 0 <= MS <= {WAIT_ARG_MAX}, "
                f"usleep_range(MIN,MAX) with integers 0 <= MIN <= MAX <= {WAIT_ARG_MAX} "
                "(microseconds; ASCII digits)")

# ASCII digits only (\d would take other scripts' digits, which int() reads)
_INT = r"\s*(-?[0-9]{1,20})\s*"   # (int() of a longer string is refused, or slow)
_RE_NOARG = re.compile(r"^\s*(cpu_relax|hwrng_yield)\s*(\(\s*\))?\s*$")
_RE_MSLEEP = re.compile(r"^\s*hwrng_msleep\s*\(" + _INT + r"\)\s*$")
_RE_USLEEP = re.compile(r"^\s*usleep_range\s*\(" + _INT + "," + _INT + r"\)\s*$")


@dataclass(frozen=True)
class WaitStrategy:
    """A parsed ``<wait>``: ``kind`` in :data:`WAIT_KINDS` and its integer arguments."""

    kind: str
    args: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        a = self.args
        ok = (self.kind in WAIT_KIND and isinstance(a, tuple) and len(a) == WAIT_KIND[self.kind].arity
              and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= WAIT_ARG_MAX for x in a)
              and (self.kind != "usleep_range" or a[0] <= a[1]))
        if not ok:
            raise ConfigError("wait", f"{self.kind}{a!r}", WAIT_ALLOWED)

    def __str__(self) -> str:
        if self.kind == "hwrng_msleep":
            return f"hwrng_msleep({self.args[0]})"
        if self.kind == "usleep_range":
            return f"usleep_range({self.args[0]}, {self.args[1]})"
        return self.kind

    @property
    def sleeps(self) -> bool:
        """It sleeps (WaitKind.sleeps); False: it spins."""
        return WAIT_KIND[self.kind].sleeps

    @property
    def on_timer_wheel(self) -> bool:
        """It sleeps in schedule_timeout() (a timer-wheel timer, woken at a tick),
        not on an hrtimer (usleep_range) or not at all (cpu_relax)."""
        return WAIT_KIND[self.kind].on_timer_wheel

    @property
    def hrtimer_ns(self) -> int | None:
        """An hrtimer sleep's length when nothing else runs on the poller's CPU
        (usleep_range(MIN, MAX): MAX); None for the other kinds."""
        i = WAIT_KIND[self.kind].hrtimer_arg
        return None if i is None else self.args[i] * NSEC_PER_USEC

    def timeout_jiffies(self, hz: int) -> int:
        """The timeout (jiffies) a timer-wheel wait passes to
        ``wait_for_completion_interruptible_timeout()``: 1 for hwrng_yield(),
        ``msecs_to_jiffies(MS) + 1`` for hwrng_msleep(MS)."""
        if self.kind == "hwrng_yield":
            return 1
        if self.kind == "hwrng_msleep":
            return msecs_to_jiffies(self.args[0], hz) + 1
        raise ValueError(f"{self} does not sleep on the timer wheel")

    @property
    def cancellable(self) -> bool:
        """Whether ``complete_all(&rng->dying)`` (device removal, suspend) ends the
        wait early (WaitKind.cancellable)."""
        return WAIT_KIND[self.kind].cancellable


def parse_wait(s: str | WaitStrategy, field: str = "wait") -> WaitStrategy:
    """Parse a kernel-style wait strategy; :class:`ConfigError` naming ``field`` if malformed.

    >>> str(parse_wait("hwrng_msleep(1000)")), str(parse_wait("usleep_range(100,200)"))
    ('hwrng_msleep(1000)', 'usleep_range(100, 200)')
    """
    if isinstance(s, WaitStrategy):
        return s  # validated when it was built
    if not isinstance(s, str):
        raise ConfigError(field, s, WAIT_ALLOWED)
    m = _RE_NOARG.match(s)
    if m:
        return WaitStrategy(m.group(1))
    m = _RE_MSLEEP.match(s) or _RE_USLEEP.match(s)
    if m:
        kind = "hwrng_msleep" if m.re is _RE_MSLEEP else "usleep_range"
        try:
            return WaitStrategy(kind, tuple(int(g) for g in m.groups()))
        except ConfigError:
            raise ConfigError(field, s, WAIT_ALLOWED) from None  # negative, or MIN > MAX
    raise ConfigError(field, s, WAIT_ALLOWED)


# --------------------------------------------------------------------------
# the device
# --------------------------------------------------------------------------

class Bcm2835Rng:
    """``struct bcm2835_rng_priv`` + ``struct hwrng``: the generator and its FIFO.

    All state is arithmetic in time: ``_t_ref``/``_level_ref`` are the time of
    the last read and the FIFO level it left; ``produced(t)`` is the number of
    words the generator has made by ``t`` (lost ones included).

    ``learned``: the fast-forward's memory (kenv.fastforward.hwrng) that the
    simulation running this rng owns, or None to simulate every poll (the
    same figures, slower).
    """

    def __init__(self, k: "Kernel", params: Bcm2835Params, wait: str | WaitStrategy = "hwrng_yield",
                 logs: bool = True, learned: HwrngLearned | None = None):
        self.k = k
        self.params = params
        self.wait = parse_wait(wait)
        self.name = "bcm2835-rng"
        self.quality = 0                 # set by hwrng_init() to default_quality
        self.dying = completion()        # rng->dying: completed by hwrng_unregister()
        self.enabled_ns: int | None = None
        self.t_start: int | None = None  # when warm-up (and any silent period) ends
        self._t_ref = 0
        self._level_ref = 0
        self.consumed_words = 0
        # per-comm statistics (the experiment and the env read them)
        self.spin_ns: dict[str, int] = {}
        self.wait_calls: dict[str, int] = {}
        #: tasks spinning right now -> their sum_exec_runtime when the spin began
        self.spinning: dict[Task, int] = {}
        #: (comm, time the wait began, time it returned) for every sleeping wait
        #: (None: not kept -- an environment's episodes do not need them)
        self.wait_log: list[tuple[str, int, int]] | None = [] if logs else None
        #: (time, words read, comm) for every successful bcm2835_rng_read (None: not kept)
        self.read_log: list[tuple[int, int, str]] | None = [] if logs else None
        #: if set, a cpu_relax() spin stops at this time to look at ``wait`` again
        #: (the spin itself is one interval; an environment changes ``wait`` per step)
        self.recheck_at: int | None = None
        #: Until this time nothing outside the simulated kernel changes ``wait``
        #: or looks at the rng, and the run goes on: the end of the current step
        #: of whoever drives the simulation, as far as it is known (an
        #: environment sets it and may move it later).  The fast-forwards
        #: (kenv.fastforward.hwrng) end before it; None: nothing is skipped.
        self.quiet_until: int | None = None
        #: the hwrng core it is registered with (set by hwrng_register)
        self.core: HwrngCore | None = None
        #: the fast-forward of idle polls (None: every poll simulated)
        self.ff: HwrngFastForward | None = (HwrngFastForward(self, learned)
                                            if learned is not None and HwrngFastForward.covers(k) else None)

    def set_wait(self, wait: str | WaitStrategy) -> None:
        """Switch ``<wait>`` the way unbinding and rebinding the driver would
        (an environment does this between steps).  ``hwrng_unregister()``
        completes ``rng->dying``: a task asleep in ``hwrng_msleep()`` or
        ``hwrng_yield()`` wakes at once -- which is why upstream wants hwrng
        sleeps cancellable -- and goes round the read loop again with the new
        wait; a ``usleep_range()`` sleep is not cancellable and runs out; a
        ``cpu_relax()`` spin looks at ``wait`` again at ``recheck_at``.  The
        new instance starts with a fresh ``dying``."""
        wait = parse_wait(wait)
        if wait is self.wait or wait == self.wait:
            return
        self.wait = wait
        if self.ff is not None:
            self.ff.forget()
        complete_all(self.k, self.dying)
        self.dying = completion()

    # ---------------------------------------------------------- the generator
    def bcm2835_rng_init(self) -> None:
        """bcm2835_rng_init(): ``RNG_STATUS = RNG_WARMUP_COUNT; RNG_CTRL = RNG_RBGEN``."""
        now = self.k.now
        self.enabled_ns = now
        start = now + self.params.warmup_ns
        if self.params.silent_until_ns is not None:
            start = max(start, self.params.silent_until_ns)
        self.t_start = start
        self._t_ref = now
        self._level_ref = 0

    def produced(self, t: int) -> int:
        """Words the generator has produced by time ``t`` (those lost to a full FIFO included)."""
        if self.t_start is None or t <= self.t_start:
            return 0
        return (t - self.t_start) * self.params.word_rate_hz // NSEC_PER_SEC

    def words_available(self, t: int | None = None) -> int:
        """``RNG_STATUS >> 24`` at time ``t`` (default now)."""
        if t is None:
            t = self.k.now
        new = self.produced(t) - self.produced(self._t_ref)
        return min(self.params.fifo_words, self._level_ref + new)

    def next_word_time(self, t: int | None = None) -> int:
        """The time the generator's next word (after ``t``) enters the FIFO."""
        if t is None:
            t = self.k.now
        if self.t_start is None:
            raise RuntimeError("bcm2835 rng read before bcm2835_rng_init()")
        return self.word_time(self.produced(t) + 1)

    def word_time(self, n: int) -> int:
        """The time the generator's ``n``-th word (1-based) enters the FIFO
        (the generator must be running: ``t_start`` set)."""
        return self.t_start + -(-n * NSEC_PER_SEC // self.params.word_rate_hz)

    def _consume(self, n: int) -> None:
        now = self.k.now
        avail = self.words_available(now)
        if n > avail:
            raise RuntimeError(f"read {n} words with {avail} in the FIFO")
        self.words_read(n, now, avail - n)

    def words_read(self, n: int, last_read_ns: int, level_left: int) -> None:
        """``n`` words were read from ``RNG_DATA``, the last of them at
        ``last_read_ns``, leaving ``level_left`` words in the FIFO (one read
        of the driver, or the reads of a stretch a fast-forward computed)."""
        self._level_ref = level_left
        self._t_ref = last_read_ns
        self.consumed_words += n
        if self.consumed_words > self.produced(last_read_ns):  # pragma: no cover - by construction
            raise RuntimeError("bcm2835 rng delivered more words than it generated")

    @property
    def last_read_ns(self) -> int:
        """When words were last read from the FIFO (or the generator enabled)."""
        return self._t_ref

    @property
    def level_after_last_read(self) -> int:
        """The FIFO level that read left (``RNG_STATUS >> 24`` then, less the words read)."""
        return self._level_ref

    def spin_ns_now(self) -> dict[str, int]:
        """CPU time spent spinning per comm, including spins still in progress."""
        out = dict(self.spin_ns)
        for task in self.spinning:
            out[task.comm] = out.get(task.comm, 0) + self._spun_so_far(task)
        return out

    def spin_ns_total(self) -> int:
        """The sum of :meth:`spin_ns_now` over every comm."""
        total = sum(self.spin_ns.values())
        for task in self.spinning:
            total += self._spun_so_far(task)
        return total

    def _spun_so_far(self, task: Task) -> int:
        """CPU time charged to ``task`` since its spin in progress began, plus
        the running chunk's share."""
        return task.sum_exec_runtime - self.spinning[task] + self.k._ran_so_far(task)

    @property
    def generated_bytes(self) -> int:
        return 4 * self.produced(self.k.now)

    @property
    def delivered_bytes(self) -> int:
        return 4 * self.consumed_words


# --------------------------------------------------------------------------
# the hwrng core's sleeps
# --------------------------------------------------------------------------

def hwrng_msleep(task: Task, rng: Bcm2835Rng, msecs: int) -> TaskBody:
    """hwrng_msleep(): ``wait_for_completion_interruptible_timeout(&rng->dying,
    msecs_to_jiffies(msecs) + 1)``; a sleep that ``hwrng_unregister`` can cut short."""
    timeout = msecs_to_jiffies(msecs, task.k.HZ) + 1
    return (yield from wait_for_completion_interruptible_timeout(task, rng.dying, timeout))


def hwrng_yield(task: Task, rng: Bcm2835Rng) -> TaskBody:
    """hwrng_yield() (the seed): ``wait_for_completion_interruptible_timeout(&rng->dying, 1)``.

    ``expires = jiffies + 1`` on the level-0 wheel fires at the next-next
    tick: 1..2 jiffies, exactly 2 when called right after a tick wakeup.
    """
    return (yield from wait_for_completion_interruptible_timeout(task, rng.dying, 1))


def _wait(task: Task, rng: Bcm2835Rng) -> TaskBody:
    """One ``<wait>`` of the ``bcm2835_rng_read`` loop with the FIFO empty."""
    w = rng.wait
    comm = task.comm
    rng.wait_calls[comm] = rng.wait_calls.get(comm, 0) + 1
    k = task.k
    if w.kind == "cpu_relax":
        # while ((rng_readl(RNG_STATUS) >> 24) == 0) cpu_relax();  -- one spin
        # interval to the moment the next word lands, not one event per iteration.
        rng.spinning[task] = task.sum_exec_runtime
        until = rng.next_word_time(k.now)
        if rng.recheck_at is not None and k.now < rng.recheck_at < until:
            until = rng.recheck_at  # re-read rng.wait there (an env changes it per step)
        got = yield RunUntil(until)
        del rng.spinning[task]
        rng.spin_ns[comm] = rng.spin_ns.get(comm, 0) + (got or 0)
        return
    t0 = k.now
    if rng.ff is not None and (yield from rng.ff.skip_polls(task)):
        return  # slept across idle polls; wait_log and wait_calls are up to date
    if w.kind == "hwrng_yield":
        yield from hwrng_yield(task, rng)
    elif w.kind == "hwrng_msleep":
        yield from hwrng_msleep(task, rng, w.args[0])
    else:
        yield from usleep_range(task, w.args[0], w.args[1])
    if rng.wait_log is not None:
        rng.wait_log.append((comm, t0, k.now))


# --------------------------------------------------------------------------
# the driver
# --------------------------------------------------------------------------

def bcm2835_rng_read(task: Task, rng: Bcm2835Rng, max: int, wait: bool) -> TaskBody:
    """bcm2835_rng_read(): returns the bytes read (a multiple of 4, <= ``max``).

    ::

        while ((rng_readl(priv, RNG_STATUS) >> 24) == 0) {
            if (!wait) return 0;
            <wait>;
        }
        num_words = rng_readl(priv, RNG_STATUS) >> 24;
        if (num_words > max_words) num_words = max_words;
        for (count = 0; count < num_words; count++)
            ((u32 *)buf)[count] = rng_readl(priv, RNG_DATA);
        return num_words * sizeof(u32);
    """
    readl = rng.params.rng_readl_ns
    max_words = max // 4
    ff = rng.ff
    while True:
        yield Run(readl)                      # rng_readl(RNG_STATUS)
        avail = rng.words_available()
        if avail != 0:
            break
        if ff is not None:
            ff.status_read(task, 0, 0)
        if not wait:
            return 0
        yield from _wait(task, rng)
    # Second RNG_STATUS read and the RNG_DATA reads, as one stretch of CPU
    # time; the count is sampled as the second status read starts.
    num_words = min(avail, max_words)
    if ff is not None:
        ff.status_read(task, avail, num_words)
    rng._consume(num_words)
    if rng.read_log is not None:
        rng.read_log.append((task.k.now, num_words, task.comm))
    yield Run(readl * (1 + num_words))
    return 4 * num_words


# --------------------------------------------------------------------------
# the hwrng core
# --------------------------------------------------------------------------

@dataclass
class HwrngCore:
    """The state of drivers/char/hw_random/core.c for one registered rng.

    ``data_avail`` is the core's global count of bytes left in ``rng_buffer``
    by a reader that asked for less than a full buffer; the next reader of
    /dev/hwrng gets them first.
    """

    k: "Kernel"
    rng: Bcm2835Rng
    pool: InputPool
    buffer_size: int
    reading_mutex: mutex = field(default_factory=lambda: mutex("reading_mutex"))
    data_avail: int = 0
    hwrng_fill: Task | None = None
    kthread_should_stop: bool = False
    #: bytes copied to user space, by reader comm
    bytes_to_user: dict[str, int] = field(default_factory=dict)
    #: bytes handed to add_hwgenerator_randomness() by the hwrng kthread
    bytes_to_pool: int = 0
    bits_credited: int = 0
    #: read(2) calls of /dev/hwrng that returned, and the bytes they returned, by comm
    reads: dict[str, int] = field(default_factory=dict)
    read_bytes: dict[str, int] = field(default_factory=dict)
    #: the rng_dev_read() in progress of each reader (what it keeps on its stack)
    reading: dict[Task, "ReadCall"] = field(default_factory=dict)
    #: set by whoever drives the simulation when its steps end at a read(2)
    #: completion (HwrngWait-v2: after this many), or when what a reader does
    #: after its read depends on it (a phased reader about to park): a
    #: fast-forward must not skip one
    read_budget: int | None = None
    #: (comm, n): when comm's read(2) count reaches n, end the engine's run in
    #: progress (Engine.request_stop) -- the step's end, set with read_budget
    stop_at_read: tuple[str, int] | None = None

    def reads_returned(self, comm: str, n: int, nbytes: int) -> None:
        """``n`` read(2) calls of ``comm`` returned, ``nbytes`` in all (and the
        run stops if that makes ``stop_at_read``)."""
        reads = self.reads[comm] = self.reads.get(comm, 0) + n
        self.read_bytes[comm] = self.read_bytes.get(comm, 0) + nbytes
        stop = self.stop_at_read
        if stop is not None and stop[0] == comm and reads >= stop[1]:
            self.k.engine.request_stop()

    @property
    def delivered_bytes(self) -> int:
        """Everything that left the FIFO: to users, to the pool, or waiting in rng_buffer."""
        return sum(self.bytes_to_user.values()) + self.bytes_to_pool + self.data_avail


class ReadCall:
    """One ``read(2)`` of /dev/hwrng in progress: ``size`` still wanted and
    ``ret`` copied so far, the two locals of ``rng_dev_read()``.  They live
    here, in :attr:`HwrngCore.reading`, so that a fast-forward can move a
    reader across whole wait cycles (kenv.fastforward.hwrng)."""

    __slots__ = ("size", "ret")

    def __init__(self, size: int):
        self.size = size
        self.ret = 0


def hwrng_register(k: "Kernel", rng: Bcm2835Rng, pool: InputPool, smp_cache_bytes: int,
                   kthread_cpus=None) -> HwrngCore:
    """hwrng_register() -> hwrng_init(): init the rng, set its quality, start "hwrng".

    ``hwrng_init()`` calls ``rng->init`` (:meth:`Bcm2835Rng.bcm2835_rng_init`),
    sets ``quality = default_quality`` when the driver gives none (bcm2835
    does not), and ``hwrng_manage_rngd()`` starts ``hwrng_fillfn`` since the
    quality is non-zero.
    """
    rng.bcm2835_rng_init()
    if not rng.quality:
        rng.quality = HWRNG_DEFAULT_QUALITY
    core = HwrngCore(k, rng, pool, rng_buffer_size(smp_cache_bytes))
    rng.core = core     # current_rng's core state (the fast-forward reads it)
    if rng.quality:
        # kthread_cpus: the kthread's affinity (``taskset``); None = any CPU
        core.hwrng_fill = k.kthread_run(lambda task: hwrng_fillfn(task, core), "hwrng",
                                        cpus_allowed=kthread_cpus)
    return core


def bcm2835_rng_probe(k: "Kernel", params: Bcm2835Params, wait: str | WaitStrategy,
                      pool: InputPool, smp_cache_bytes: int, kthread_cpus=None,
                      logs: bool = True, learned: HwrngLearned | None = None) -> HwrngCore:
    """bcm2835_rng_probe(): map the block and ``devm_hwrng_register()`` it
    (``logs``: keep the rng's wait_log and read_log; ``learned``: the
    fast-forward's memory, None to simulate every poll)."""
    return hwrng_register(k, Bcm2835Rng(k, params, wait, logs, learned), pool, smp_cache_bytes,
                          kthread_cpus)


def rng_get_data(task: Task, core: HwrngCore, size: int, wait: bool) -> TaskBody:
    """rng_get_data(): ``BUG_ON(!mutex_is_locked(&reading_mutex))``, then ``rng->read``."""
    if not core.reading_mutex.is_locked():
        task.k.BUG("rng_get_data: reading_mutex not held", task.cpu)
    n = yield from bcm2835_rng_read(task, core.rng, size, wait)
    if n > size:  # WARN_ON_ONCE(err > 0 && err > size)
        n = size
    return n


def rng_dev_read(task: Task, core: HwrngCore, size: int, nonblock: bool = False) -> TaskBody:
    """rng_dev_read(): what read(2) on /dev/hwrng does; returns the bytes copied.

    ::

        while (size) {
            mutex_lock_interruptible(&reading_mutex);
            if (!data_avail) {
                bytes_read = rng_get_data(rng, rng_buffer, rng_buffer_size(),
                                          !(filp->f_flags & O_NONBLOCK));
                ...  /* 0 with O_NONBLOCK: -EAGAIN */
                data_avail = bytes_read;
            }
            len = min(data_avail, size); data_avail -= len;
            memcpy(buffer, rng_buffer + data_avail, len);
            mutex_unlock(&reading_mutex);
            copy_to_user(buf + ret, buffer, len); size -= len; ret += len;
            if (need_resched())
                schedule_timeout_interruptible(1);
        }
    """
    k = task.k
    lock = core.reading_mutex
    call = core.reading[task] = ReadCall(size)   # size, ret
    ff = core.rng.ff
    while call.size > 0:
        if ff is not None and not core.data_avail and (yield from ff.skip_words(task, core, call)):
            continue   # (simulator: words spun through at once, kenv.fastforward.hwrng)
        yield from mutex_lock(task, lock)
        if not core.data_avail:
            bytes_read = yield from rng_get_data(task, core, core.buffer_size, not nonblock)
            if bytes_read == 0 and nonblock:
                mutex_unlock(task, lock)
                break                 # (-EAGAIN if nothing was read)
            core.data_avail = bytes_read
        length = min(core.data_avail, call.size)
        core.data_avail -= length
        if length:  # memcpy(buffer, rng_buffer + data_avail, len): the bytes are the reader's
            core.bytes_to_user[task.comm] = core.bytes_to_user.get(task.comm, 0) + length
        mutex_unlock(task, lock)
        if length:
            yield Run(core.rng.params.copy_chunk_ns)   # copy_to_user() and the loop
            call.size -= length
            call.ret += length
        if k.cpus[task.cpu].need_resched:
            yield from schedule_timeout_interruptible(task, 1)
    del core.reading[task]
    core.reads_returned(task.comm, 1, call.ret)
    return call.ret


def hwrng_fillfn(task: Task, core: HwrngCore) -> TaskBody:
    """hwrng_fillfn(), the "hwrng" kthread (6.x)::

        while (!kthread_should_stop()) {
            mutex_lock(&reading_mutex);
            rc = rng_get_data(rng, rng_fillbuf, rng_buffer_size(), 1);
            quality = rng->quality;
            mutex_unlock(&reading_mutex);
            if (rc <= 0) { hwrng_msleep(rng, 10000); continue; }
            entropy = rc * quality * 8 + entropy_credit;
            if ((entropy >> 10) == 0) entropy_credit = entropy;
            add_hwgenerator_randomness(rng_fillbuf, rc, entropy >> 10, true);
        }

    ``add_hwgenerator_randomness`` sleeps ``crng_reseed_interval()`` once the
    crng is READY (60 s in steady state, shorter early in boot).
    """
    entropy_credit = 0
    lock = core.reading_mutex
    rng = core.rng
    while not core.kthread_should_stop:
        yield from mutex_lock(task, lock)
        rc = yield from rng_get_data(task, core, core.buffer_size, True)
        quality = rng.quality
        if rc > 0:
            core.bytes_to_pool += rc          # now in rng_fillbuf
        mutex_unlock(task, lock)
        if rc <= 0:
            yield from hwrng_msleep(task, rng, HWRNG_FILLFN_ERROR_SLEEP_MS)
            continue
        entropy = rc * quality * 8 + entropy_credit
        if (entropy >> 10) == 0:
            entropy_credit = entropy
        core.bits_credited += entropy >> 10
        yield from add_hwgenerator_randomness(task, core.pool, rc, entropy >> 10)


__all__ = [
    "Bcm2835Params", "Bcm2835Rng", "HWRNG_DEFAULT_QUALITY", "HwrngCore", "RNG_WARMUP_COUNT", "ReadCall",
    "WAIT_ALLOWED", "WAIT_KINDS", "WaitStrategy", "bcm2835_rng_probe", "bcm2835_rng_read",
    "hwrng_fillfn", "hwrng_msleep", "hwrng_register", "hwrng_yield", "mutex", "mutex_lock",
    "mutex_unlock", "parse_wait", "rng_buffer_size", "rng_dev_read", "rng_get_data",
]
