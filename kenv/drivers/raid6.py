"""lib/raid6/algos.c: raid6_select_algo(), raid6_choose_gen(), raid6_choose_recov().

When raid6_pq is loaded, ``raid6_choose_gen()`` benchmarks the syndrome
algorithms of ``raid6_algos[]`` and keeps the fastest.  Each benchmark is a
*window* of jiffies (v5.16, lib/raid6/algos.c)::

    preempt_disable();
    j0 = jiffies;
    while ((j1 = jiffies) == j0)                         /* spin to a tick edge */
            cpu_relax();
    while (time_before(jiffies, j1 + (1 << RAID6_TIME_JIFFIES_LG2))) {
            (*algo)->gen_syndrome(disks, PAGE_SIZE, *dptrs);
            perf++;
    }
    preempt_enable();
    pr_info("raid6: %-8s gen() %5ld MB/s\\n", (*algo)->name,
            (perf * HZ * (disks-2)) >> (20 - PAGE_SHIFT + RAID6_TIME_JIFFIES_LG2));

``disks = RAID6_TEST_DISKS = 8``: six data pages and P/Q, so one call
processes ``(disks - 2) * PAGE_SIZE`` = 24 KiB.  (Kernels before the
RAID6_TEST_DISKS change used 18 disks, 64 KiB per call and ``(perf*HZ) >> 8``;
the MB/s a window prints is the same either way.)  xor windows call
``xor_syndrome(disks, start = disks/2 - 1, stop = disks - 3, ...)`` and print
with one more right shift.

Kernel versions (both selectable):

* v5.16: ``prefer`` ranking (all x86 SIMD variants 1, int 0; NEON 0); for
  every benchmarked algorithm a gen window *and* an xor window.  With
  ``CONFIG_RAID6_PQ_BENCHMARK=n``: "raid6: skip pq benchmark and using
  algorithm %s".
* v5.17 (Dirk Mueller, 36dacddbf0bd and the xor change): ``priority``
  ranking (AVX2 / AVX-512 2, SSE2 1, int 0), gen windows only in the loop,
  one xor window for the chosen algorithm; "raid6: skipped pq benchmark and
  selected %s".

The *mode* (the action under study, seed 004) is what wraps each window:

* ``preempt_disable``: upstream (before the seed's patch);
* ``migrate_disable``: the seed's patch -- the task stays on its CPU but can
  be preempted inside a window (on full / rt);
* ``cond_resched``: preempt_disable() inside each window, ``cond_resched()``
  between windows (the reviewers' suggestion for voluntary);
* ``no_benchmark``: ``CONFIG_RAID6_PQ_BENCHMARK=n`` -- first valid algorithm
  by rank, no window.

How a window is simulated (mechanism, not a table): the task spins to the
next tick edge with one ``RunUntil`` and then spins to ``j1 + 16`` with a
second ``RunUntil``; the core returns the CPU time the task actually got.
Calls are made back to back, the loop test ``time_before(jiffies, end)``
before each; so ``perf`` = the calls started within that CPU time =
``ceil(cpu_ns / ns_per_call)``, and the last one straddles the end of the
window (its remainder is run after it).  Time lost to preemption or
interrupts inside a window is time without calls: ``perf`` drops, and if one
algorithm loses more than another the choice can go wrong -- the objection
the reviewers raised against the seed's patch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from ..errors import ConfigError
from ..schema import check_choice
from ..kernel.core import (
    Run, RunUntil, Task, TaskBody, cond_resched, migrate_disable, migrate_enable,
    preempt_disable, preempt_enable,
)

#: lib/raid6/algos.c (``#ifdef __KERNEL__``)
RAID6_TIME_JIFFIES_LG2 = 4
#: lib/raid6/algos.c since the test-disks change (v5.10..)
RAID6_TEST_DISKS = 8
PAGE_SHIFT = 12
PAGE_SIZE = 1 << PAGE_SHIFT

#: bytes of data one gen_syndrome(RAID6_TEST_DISKS, PAGE_SIZE) call processes
GEN_BYTES_PER_CALL = (RAID6_TEST_DISKS - 2) * PAGE_SIZE

BENCH_MODES = ("preempt_disable", "migrate_disable", "cond_resched", "no_benchmark")
KERNEL_VERSIONS = ("5.16", "5.17")


def check_bench_mode(mode: str) -> str:
    return check_choice(mode, "mode", BENCH_MODES)


def check_kernel_version(version: str) -> str:
    return check_choice(version, "kernel", KERNEL_VERSIONS)


def raid6_behaviour(version: str) -> str:
    """Which raid6_choose_gen() a kernel ``version`` ("6.7", "5.15.0") runs:
    "5.16" before v5.17, "5.17" from v5.17 on."""
    try:
        major, minor = (int(x) for x in str(version).split(".")[:2])
    except ValueError:
        raise ConfigError("kernel", version, "a version like 5.16 or 6.7") from None
    return "5.17" if (major, minor) >= (5, 17) else "5.16"


# --------------------------------------------------------------------------
# the algorithm tables (struct raid6_calls / struct raid6_recov_calls)
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class raid6_calls:
    """One entry of ``raid6_algos[]`` with the platform's speed for it.

    ``gen_ns``: CPU ns of one ``gen_syndrome(RAID6_TEST_DISKS, PAGE_SIZE)``
    call on this platform; ``xor_ns``: one ``xor_syndrome()`` call, None if
    the algorithm has none.  ``prefer`` is the v5.16 field, ``priority`` the
    v5.17 one; ``valid`` is what ``(*algo)->valid()`` returns on the CPU.
    """

    name: str
    gen_ns: float
    xor_ns: float | None
    prefer: int
    priority: int
    valid: bool = True

    def rank(self, kernel_version: str) -> int:
        """``prefer`` (v5.16) or ``priority`` (v5.17); ``kernel_version`` is
        one of KERNEL_VERSIONS."""
        return self.priority if kernel_version == "5.17" else self.prefer

    @property
    def gen_mb_s(self) -> float:
        """True gen_syndrome() throughput in the kernel's MB/s (2^20 bytes/s)."""
        return GEN_BYTES_PER_CALL * 1e9 / self.gen_ns / (1 << 20)


@dataclass(frozen=True)
class raid6_recov_calls:
    """One entry of ``raid6_recov_algos[]``: name, priority, valid()."""

    name: str
    priority: int
    valid: bool = True


@dataclass(frozen=True)
class Raid6Params:
    """A platform's raid6 tables and the costs around the benchmark.

    ``algos`` in ``raid6_algos[]`` order, ``recov_algos`` in
    ``raid6_recov_algos[]`` order.  ``select_setup_ns``: raid6_select_algo()
    before the benchmark (``__get_free_pages`` + filling the test disks from
    ``raid6_gfmul``).  ``printk_ns``: one pr_info() into the log buffer.
    """

    algos: tuple[raid6_calls, ...]
    recov_algos: tuple[raid6_recov_calls, ...]
    select_setup_ns: int = 20_000
    printk_ns: int = 2_000

    def fastest(self) -> raid6_calls:
        """The truly fastest valid gen_syndrome() of the table."""
        return min((a for a in self.algos if a.valid), key=lambda a: a.gen_ns)

    def by_name(self, name: str) -> raid6_calls:
        for a in self.algos:
            if a.name == name:
                return a
        raise KeyError(name)


#: ``raid6_algos[]`` on x86_64 (lib/raid6/algos.c, CONFIG_AS_AVX512=y), as
#: (name, prefer in v5.16, priority in v5.17).  v5.16: every SIMD variant
#: ``1 /* Has cache hints */``, int.uc ``0``; v5.17 (36dacddbf0bd): AVX2 and
#: AVX-512 ``.priority = 2``, SSE2 1, int 0.  int.uc names are
#: ``"int" NSTRING "x$#"`` = int64xN on 64-bit.
X86_64_RAID6_ALGOS = (
    ("avx512x4", 1, 2), ("avx512x2", 1, 2), ("avx512x1", 1, 2),
    ("avx2x4", 1, 2), ("avx2x2", 1, 2), ("avx2x1", 1, 2),
    ("sse2x4", 1, 1), ("sse2x2", 1, 1), ("sse2x1", 1, 1),
    ("int64x8", 0, 0), ("int64x4", 0, 0), ("int64x2", 0, 0), ("int64x1", 0, 0),
)
#: ``raid6_recov_algos[]`` on x86_64: recov_avx512.c ("avx512x2", 3),
#: recov_avx2.c ("avx2x2", 2), recov_ssse3.c ("ssse3x2", 1), recov.c ("intx1", 0).
X86_64_RAID6_RECOV = (("avx512x2", 3), ("avx2x2", 2), ("ssse3x2", 1), ("intx1", 0))
#: ``raid6_algos[]`` on arm64 (CONFIG_KERNEL_MODE_NEON): neon.c's
#: RAID6_NEON_WRAPPER gives prefer/priority 0, like int.uc.
ARM64_RAID6_ALGOS = (
    ("neonx8", 0, 0), ("neonx4", 0, 0), ("neonx2", 0, 0), ("neonx1", 0, 0),
    ("int64x8", 0, 0), ("int64x4", 0, 0), ("int64x2", 0, 0), ("int64x1", 0, 0),
)
#: ``raid6_recov_algos[]`` on arm64: recov_neon.c ("neon", 10), recov.c ("intx1", 0).
ARM64_RAID6_RECOV = (("neon", 10), ("intx1", 0))


def build_raid6_algos(layout: tuple, speeds: dict[str, tuple[float, float | None]],
                      invalid: tuple[str, ...] = ()) -> tuple[raid6_calls, ...]:
    """``raid6_algos[]`` of an architecture with a platform's per-call times.

    ``speeds[name] = (gen_ns, xor_ns)``; every name of ``layout`` must be
    there (an invalid algorithm's speed is never used, pass any number).
    """
    out = []
    for name, prefer, priority in layout:
        if name not in speeds:
            raise ConfigError("raid6 speeds", name, ", ".join(n for n, _, _ in layout))
        gen_ns, xor_ns = speeds[name]
        out.append(raid6_calls(name, gen_ns, xor_ns, prefer, priority, name not in invalid))
    return tuple(out)


def build_raid6_recov(layout: tuple, invalid: tuple[str, ...] = ()) -> tuple[raid6_recov_calls, ...]:
    return tuple(raid6_recov_calls(n, p, n not in invalid) for n, p in layout)


def gen_ns_for_mb_s(mb_s: float) -> float:
    """ns per gen_syndrome() call that a window reports as ``mb_s`` MB/s.

    Used by platform files to calibrate per-call times from dmesg figures.
    """
    return GEN_BYTES_PER_CALL * 1e9 / (mb_s * (1 << 20))


def xor_ns_for_mb_s(mb_s: float) -> float:
    """ns per xor_syndrome() call that an xor window reports as ``mb_s``
    (the xor line has one more right shift)."""
    return GEN_BYTES_PER_CALL * 1e9 / (2 * mb_s * (1 << 20))


def gen_mb_s(perf: int, hz: int) -> int:
    """The gen() MB/s of a window: ``(perf * HZ * (disks-2)) >> (20 - PAGE_SHIFT + LG2)``."""
    return (perf * hz * (RAID6_TEST_DISKS - 2)) >> (20 - PAGE_SHIFT + RAID6_TIME_JIFFIES_LG2)


def xor_mb_s(perf: int, hz: int) -> int:
    """The xor() MB/s of a window (one more right shift than gen())."""
    return (perf * hz * (RAID6_TEST_DISKS - 2)) >> (20 - PAGE_SHIFT + RAID6_TIME_JIFFIES_LG2 + 1)


# --------------------------------------------------------------------------
# what the benchmark did
# --------------------------------------------------------------------------

@dataclass
class Raid6Window:
    """One benchmark window: which call, perf, and the time it took."""

    algo: str
    kind: str          # "gen" or "xor"
    perf: int
    mb_s: int          # as printed
    start_ns: int      # before the spin to the tick edge
    edge_ns: int       # when the spin saw the new jiffy (j1)
    end_ns: int        # after the straddling call and preempt_enable
    cpu_ns: int        # CPU time obtained between j1 and j1 + 16
    ideal_perf: int    # perf had the task had the whole window
    #: the CPU the window ran on: preempt_disable() and migrate_disable()
    #: keep the task there from the window's start to its end (-1: not run)
    cpu: int = -1

    @property
    def lost_fraction(self) -> float:
        """Share of the window's calls lost to preemption / interrupts."""
        return 1.0 - self.perf / self.ideal_perf if self.ideal_perf else 0.0


@dataclass
class Raid6Selection:
    """The outcome of raid6_select_algo(): choice, windows and dmesg."""

    kernel_version: str
    mode: str
    hz: int
    chosen: str | None = None
    bestgenperf: int = 0
    bestxorperf: int = 0
    recov: str | None = None
    windows: list[Raid6Window] = field(default_factory=list)
    dmesg: list[tuple[int, str]] = field(default_factory=list)
    start_ns: int | None = None
    end_ns: int | None = None
    cpu: int | None = None
    #: called as each benchmark window ends (simulator: an environment's step ends there)
    on_window: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    def add_window(self, window: Raid6Window) -> None:
        self.windows.append(window)
        if self.on_window is not None:
            self.on_window()

    def dmesg_lines(self) -> list[str]:
        """Lines as ``dmesg`` prints them: ``[    1.234567] raid6: ...``."""
        return [f"[{t // 1_000_000_000:5d}.{t % 1_000_000_000 // 1000:06d}] {msg}"
                for t, msg in self.dmesg]


# --------------------------------------------------------------------------
# the kernel code
# --------------------------------------------------------------------------

def pr_info(task: Task, params: Raid6Params, sel: Raid6Selection, msg: str) -> TaskBody:
    sel.dmesg.append((task.k.now, msg))
    if params.printk_ns > 0:
        yield Run(params.printk_ns)


def raid6_bench_window(task: Task, mode: str, ns_per_call: float) -> TaskBody:
    """One window; returns ``(perf, cpu_ns, start_ns, edge_ns, ideal_perf)``.

    The spin and the calls are two ``RunUntil`` intervals, not an event per
    call: ``perf = ceil(cpu / ns_per_call)`` is exactly the number of calls
    started before ``jiffies`` reached ``j1 + 16`` (the loop tests before each
    call), the last one straddling the end.
    """
    k = task.k
    start = k.now
    if mode == "migrate_disable":
        migrate_disable(task)
    else:
        preempt_disable(task)
    # j0 = jiffies; while ((j1 = jiffies) == j0) cpu_relax();
    yield RunUntil(k.next_tick(k.now))
    edge = k.now
    j1 = k.jiffies
    t_end = k.tick_time(j1 + (1 << RAID6_TIME_JIFFIES_LG2))
    cpu = yield RunUntil(t_end)
    cpu = cpu or 0
    perf = math.ceil(cpu / ns_per_call) if cpu > 0 else 0
    straddle = math.ceil(perf * ns_per_call - cpu)
    if straddle > 0:
        yield Run(straddle)
    if mode == "migrate_disable":
        migrate_enable(task)
    else:
        yield from preempt_enable(task)
    ideal = math.ceil((t_end - edge) / ns_per_call)
    return perf, cpu, start, edge, ideal


def _window(task: Task, params: Raid6Params, sel: Raid6Selection, algo: raid6_calls,
            kind: str) -> TaskBody:
    ns = algo.gen_ns if kind == "gen" else algo.xor_ns
    if sel.mode == "no_benchmark":
        # The mode was changed to no_benchmark after the benchmark began (an
        # environment decides per window): this window is not measured, as if
        # CONFIG_RAID6_PQ_BENCHMARK=n for it; perf 0 never wins.
        now = task.k.now
        sel.add_window(Raid6Window(algo.name, kind, 0, 0, now, now, now, 0, 0))
        return 0
    on_cpu = task.cpu   # the window's CPU: raid6_bench_window() disables preemption or migration at once
    perf, cpu, start, edge, ideal = yield from raid6_bench_window(task, sel.mode, ns)
    mb = gen_mb_s(perf, sel.hz) if kind == "gen" else xor_mb_s(perf, sel.hz)
    if task.k.engine.recorder is not None:   # the window and its CPU, on the trace
        task.k.trace_instant(on_cpu, "raid6_bench_window", algo=algo.name, kind=kind, perf=perf,
                             on_cpu=on_cpu, start_ns=start)
    sel.add_window(Raid6Window(algo.name, kind, perf, mb, start, edge, task.k.now, cpu, ideal, on_cpu))
    if sel.mode == "cond_resched":
        yield from cond_resched(task)
    return perf


def raid6_choose_gen(task: Task, params: Raid6Params, sel: Raid6Selection) -> TaskBody:
    """raid6_choose_gen() of ``sel.kernel_version``; returns the chosen algorithm."""
    v517 = sel.kernel_version == "5.17"
    no_bench = sel.mode == "no_benchmark"
    best: raid6_calls | None = None
    first_valid: raid6_calls | None = None
    bestgenperf = 0
    bestxorperf = 0
    for algo in params.algos:
        if best is not None and algo.rank(sel.kernel_version) < best.rank(sel.kernel_version):
            continue
        if not algo.valid:
            continue
        if first_valid is None:
            first_valid = algo
        if no_bench:  # !IS_ENABLED(CONFIG_RAID6_PQ_BENCHMARK)
            best = algo
            break
        perf = yield from _window(task, params, sel, algo, "gen")
        if perf > bestgenperf:
            bestgenperf = perf
            best = algo
        yield from pr_info(task, params, sel,
                           f"raid6: {algo.name:<8} gen() {gen_mb_s(perf, sel.hz):5d} MB/s")
        if v517 or algo.xor_ns is None:
            continue
        perf = yield from _window(task, params, sel, algo, "xor")
        if best is algo:
            bestxorperf = perf
        yield from pr_info(task, params, sel,
                           f"raid6: {algo.name:<8} xor() {xor_mb_s(perf, sel.hz):5d} MB/s")

    if best is None and first_valid is not None:
        # Every window was skipped (no_benchmark chosen per window): fall back
        # to what the no-benchmark kernel picks, the first valid by rank.
        best = first_valid
        no_bench = True
    if best is None:
        yield from pr_info(task, params, sel, "raid6: Yikes!  No algorithm found!")
        return None
    sel.chosen = best.name
    if no_bench:
        msg = (f"raid6: skipped pq benchmark and selected {best.name}" if v517 else
               f"raid6: skip pq benchmark and using algorithm {best.name}")
        yield from pr_info(task, params, sel, msg)
        return best
    sel.bestgenperf = bestgenperf
    yield from pr_info(task, params, sel,
                       f"raid6: using algorithm {best.name} gen() {gen_mb_s(bestgenperf, sel.hz)} MB/s")
    if best.xor_ns is not None:
        if v517:
            bestxorperf = yield from _window(task, params, sel, best, "xor")
        sel.bestxorperf = bestxorperf
        yield from pr_info(task, params, sel,
                           f"raid6: .... xor() {xor_mb_s(bestxorperf, sel.hz)} MB/s, rmw enabled")
    return best


def raid6_choose_recov(task: Task, params: Raid6Params, sel: Raid6Selection) -> TaskBody:
    """raid6_choose_recov(): highest priority valid recovery algorithm, no benchmark."""
    best: raid6_recov_calls | None = None
    for algo in params.recov_algos:
        if best is None or algo.priority > best.priority:
            if algo.valid:
                best = algo
    if best is None:
        yield from pr_info(task, params, sel, "raid6: Yikes! No recovery algorithm found!")
        return None
    sel.recov = best.name
    yield from pr_info(task, params, sel, f"raid6: using {best.name} recovery algorithm")
    return best


def raid6_select_algo(task: Task, params: Raid6Params, sel: Raid6Selection) -> TaskBody:
    """raid6_select_algo(), the module's init function; runs in the loading task."""
    check_bench_mode(sel.mode)
    check_kernel_version(sel.kernel_version)
    sel.start_ns = task.k.now
    sel.cpu = task.cpu   # where the init function began (its windows may run elsewhere: Raid6Window.cpu)
    if params.select_setup_ns > 0:
        yield Run(params.select_setup_ns)
    gen = yield from raid6_choose_gen(task, params, sel)
    rec = yield from raid6_choose_recov(task, params, sel)
    sel.end_ns = task.k.now
    return 0 if gen is not None and rec is not None else -22  # -EINVAL


__all__ = [
    "ARM64_RAID6_ALGOS", "ARM64_RAID6_RECOV", "X86_64_RAID6_ALGOS", "X86_64_RAID6_RECOV",
    "build_raid6_algos", "build_raid6_recov", "BENCH_MODES", "GEN_BYTES_PER_CALL", "KERNEL_VERSIONS", "PAGE_SIZE", "RAID6_TEST_DISKS",
    "RAID6_TIME_JIFFIES_LG2", "Raid6Params", "Raid6Selection", "Raid6Window",
    "check_bench_mode", "check_kernel_version", "raid6_behaviour", "gen_mb_s", "gen_ns_for_mb_s", "pr_info",
    "raid6_bench_window", "raid6_calls", "raid6_choose_gen", "raid6_choose_recov",
    "raid6_recov_calls", "raid6_select_algo", "xor_mb_s", "xor_ns_for_mb_s",
]
