"""The bcm2835 rng, its hwrng kthread and a /dev/hwrng reader on a simulated kernel."""

from __future__ import annotations

import math

from ..drivers.hwrng import HwrngCore, WaitStrategy, bcm2835_rng_probe, parse_wait, rng_dev_read
from ..fastforward.hwrng import HwrngLearned
from ..drivers.random import InputPool
from ..schema import check_int
from ..kernel.core import BLOCK, Kernel, Task
from ..sim.engine import NSEC_PER_SEC
from .common import NO_VALUE, Decision
from .phases import READER, PhaseSchedule


def _wait_name(a: str, field: str) -> str:
    """The canonical spelling of a wait ("usleep_range(100, 200)", "cpu_relax" for "cpu_relax()")."""
    return str(parse_wait(a, field))


#: the ``<wait>`` of bcm2835_rng_read() when the FIFO is empty: any kernel-style
#: wait string (``cpu_relax``, ``hwrng_yield``, ``hwrng_msleep(MS)``,
#: ``usleep_range(MIN,MAX)``); <= 6.0 spun, 6.1 slept a second, the patch yields
WAIT = Decision(default=("cpu_relax", "hwrng_msleep(1000)", "hwrng_yield"), extended=(),
                original="cpu_relax", pre_patch="hwrng_msleep(1000)", patched="hwrng_yield",
                spell=_wait_name, parse=parse_wait)
#: the reader of /dev/hwrng (an rngd-like loop of read(2) calls)
READER_COMM = "rngd"


class HwrngSubsystem:
    """The bcm2835 rng on a simulated kernel: probe at ``probe_ns``, the
    ``hwrng`` kthread crediting ``pool``, and an rngd-like reader of
    /dev/hwrng reading ``bs`` bytes at a time.  Used by HwrngWait-v2 and
    Kernel-v3: ``begin_step(wait, limit_ns)``, run the kernel, ``end_step()``."""

    def __init__(self, k: Kernel, pool: InputPool, params, *, smp_cache_bytes: int, bs: int,
                 reader_cpus=None, kthread_cpus=None, reads_per_step: int | None = None,
                 logs: bool = False, learned: HwrngLearned | None = None,
                 schedule: PhaseSchedule | None = None):
        # (read(fd, buf, 0) in a loop never sleeps: a hang)
        check_int(bs, "reader_bs", 1, allowed="an integer number of bytes >= 1")
        self.k, self.pool, self.params = k, pool, params
        self.smp_cache_bytes = smp_cache_bytes
        self.bs = bs
        self.reader_cpus = tuple(range(k.nr_cpus)) if reader_cpus is None else tuple(reader_cpus)
        self.kthread_cpus = kthread_cpus
        self.logs = logs    # keep the rng's wait_log and read_log (tests)
        self.learned = learned   # the fast-forward's memory (None: every poll simulated)
        self.core: HwrngCore | None = None
        self.wait = parse_wait("hwrng_yield")
        #: the step ends after this many of the reader's reads (None: at its time;
        #: HwrngWait-v2: with the first) -- the fast-forwards must not skip past it
        self.reads_per_step = reads_per_step
        self._reads0 = 0
        self.max_bytes_per_s = 4.0 * params.word_rate_hz
        self._log_max_bps = math.log10(1.0 + self.max_bytes_per_s)   # the throughput's scale
        self.last = [0.0, 0.0]
        self._boot_until: int | None = None
        #: the reader's phases (kenv.subsystems.phases; None: a reader throughout)
        self.schedule = schedule
        #: the step in progress (0 from boot through the first step)
        self.step_no = 0
        self._stepped = False
        #: the reader's task, and whether it sleeps because its phase is idle
        self._reader_task: Task | None = None
        self._reader_parked = False
        k.engine.at(params.probe_ns, self._probe)

    def boot(self, until: int) -> None:
        """Run the kernel to ``until`` (boot: nobody looks at the rng before then)."""
        self._boot_until = until
        if self.core is not None:
            self.core.rng.quiet_until = until
        self.k.run(until=until)
        self._boot_until = None
        if self.core is not None:
            self.core.rng.quiet_until = None

    def _probe(self) -> None:
        self.core = bcm2835_rng_probe(self.k, self.params, self.wait, self.pool, self.smp_cache_bytes,
                                      kthread_cpus=self.kthread_cpus, logs=self.logs,
                                      learned=self.learned)
        self.core.rng.quiet_until = self._boot_until
        self.core.read_budget = self.reads_per_step
        if self._boot_until is None:     # probed inside a step: its read counts
            self._stop_at_reads()
        # A user reader (rngd-like: read(fd, buf, bs) in a loop) opens /dev/hwrng.
        self.k.kthread_run(self._reader, READER_COMM, cpus_allowed=self.reader_cpus)

    def _reader(self, task: Task):
        core, bs = self.core, self.bs
        self._reader_task = task
        while True:
            if self.schedule is not None and not self._reader_wanted():
                # rngd asleep in poll() (an idle phase): woken by begin_step
                self._reader_parked = True
                yield BLOCK
                self._reader_parked = False
                continue
            ff = core.rng.ff
            if ff is not None:
                left = None if self.reads_per_step is None else self.reads_per_step - self._reads()
                if left != 0:
                    # a cpu_relax() driver: whole reads at once (kenv.fastforward.hwrng)
                    if (yield from ff.skip_reads(task, core, bs, left)):
                        continue
            yield from rng_dev_read(task, core, bs)

    def _reader_wanted(self) -> bool:
        """Whether the reader starts another read(2) now: the step's phase, or
        the next step's once the step's last read has returned (the next read
        begins in the same event as the step ends, HwrngWait-v2)."""
        i = self.step_no
        if self.reads_per_step is not None and self._stepped and self._reads() >= self.reads_per_step:
            i += 1
        return self.schedule.phase(i) == READER

    def _reads(self) -> int:
        """The reader's read(2)s returned in this step."""
        return (self.core.reads.get(READER_COMM, 0) if self.core is not None else 0) - self._reads0

    @property
    def reader_bytes(self) -> int:
        """Bytes the reader's read(2)s have returned."""
        return self.core.read_bytes.get(READER_COMM, 0) if self.core is not None else 0

    def _spin_ns(self) -> int:
        return self.core.rng.spin_ns_total() if self.core is not None else 0

    def begin_step(self, wait: WaitStrategy, limit_ns: int) -> None:
        self.wait = wait
        if self._stepped:
            self.step_no += 1
        self._stepped = True
        if self.core is not None:
            self.core.rng.set_wait(wait)
            # a cpu_relax() spin looks at the strategy again at the step's end
            self.core.rng.recheck_at = limit_ns
            # nothing looks at the rng before the step ends
            self.core.rng.quiet_until = limit_ns
        self._reads0 = self.core.reads.get(READER_COMM, 0) if self.core is not None else 0
        self._stop_at_reads()
        if self.schedule is not None and self.core is not None and self.reads_per_step is None:
            # In an idle phase the reader parks once the read(2) in progress
            # returns, so that read's completion must be simulated: a
            # fast-forward that took it would go on as if the reader read on
            self.core.read_budget = None if self._reader_wanted() else 1
        if self._reader_parked and self._reader_wanted():
            self.k.wake_up_process(self._reader_task)   # rngd's poll() returns
        self._t0, self._b0, self._spin0 = self.k.now, self.reader_bytes, self._spin_ns()

    def _stop_at_reads(self) -> None:
        """With reads_per_step, the engine's run stops as the step's last read(2) returns."""
        if self.core is not None and self.reads_per_step is not None:
            self.core.stop_at_read = (READER_COMM, self._reads0 + self.reads_per_step)

    def end_step(self) -> dict:
        if self.core is not None:
            self.core.rng.set_wait(self.wait)  # no-op unless probed during this step
        dt = max(1, self.k.now - self._t0)
        nbytes = self.reader_bytes - self._b0
        spin = self._spin_ns() - self._spin0
        bps = nbytes * NSEC_PER_SEC / dt
        thr = math.log10(1.0 + bps) / self._log_max_bps
        self.last = [min(1.0, thr), min(1.0, spin / dt)]
        return {"throughput": thr, "spin": spin / dt,
                "raw": {"hwrng_bytes": nbytes, "hwrng_bytes_per_s": bps, "spin_cpu_s": spin / NSEC_PER_SEC}}

    #: the step-only info entries before the first step (reset's info)
    RAW_AT_RESET = {"hwrng_bytes": 0, "hwrng_bytes_per_s": NO_VALUE, "spin_cpu_s": 0.0}

    def state_observation(self) -> list[float]:
        """What a driver could read at the step's end (kenv.envs.observation.HWRNG_STATE):
        ``RNG_STATUS >> 24`` over the FIFO depth, readers
        in ``rng_dev_read()``, tasks asleep on ``reading_mutex`` (/ 2), and the
        time since words were last read from ``RNG_DATA`` (log10(1 + us) / 7:
        10 s -> 1).  All zero before the probe."""
        core = self.core
        if core is None:
            return [0.0, 0.0, 0.0, 0.0]
        rng, now = core.rng, self.k.now
        since_us = max(0, now - rng.last_read_ns) / 1e3
        return [rng.words_available(now) / rng.params.fifo_words, min(1.0, float(len(core.reading))),
                min(1.0, len(core.reading_mutex.wait_list) / 2), min(1.0, math.log10(1.0 + since_us) / 7.0)]

    def info(self) -> dict:
        out = {"wait": str(self.wait), "reader_bytes": self.reader_bytes}
        if self.schedule is not None:
            out["reader_phase"] = self.schedule.phase(self.step_no)
        return out


def pool_info(pool: InputPool) -> dict:
    """The input pool's info entries (``crng_ready_s``: -1.0, NO_VALUE, until the crng is READY)."""
    return {"crng_init": pool.crng_init, "bits_credited_total": pool.init_bits,
            "crng_ready_s": NO_VALUE if pool.ready_ns is None else pool.ready_ns / NSEC_PER_SEC}
