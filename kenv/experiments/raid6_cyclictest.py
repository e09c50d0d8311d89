"""raid6-cyclictest: ``modprobe raid6_pq`` while ``cyclictest -S -p 95 -d 0 -i 1000 -m`` runs (seed 004).

One SCHED_FIFO-95 cyclictest thread per CPU measures wakeup latency while
``modprobe raid6_pq`` benchmarks the raid6 algorithms (raid6_choose_gen()).
The benchmark mode is the decision under study:

  preempt_disable   upstream before the seed's patch: each window non-preemptible
  migrate_disable   the seed's patch: windows preemptible on full/rt, task stays on its CPU
  cond_resched      preempt_disable() per window, cond_resched() between windows
  no_benchmark      CONFIG_RAID6_PQ_BENCHMARK=n: first valid algorithm by rank

With ``--load`` a CPU-bound SCHED_NORMAL task is pinned to the CPU that
modprobe starts on; a preemptible window then shares the CPU and its ``perf``
is wrong.  A steady load (``--load`` / ``--load continuous``) halves every
window alike, so the printed MB/s are wrong but the ranking holds; a load
whose share varies from window to window (``--load BUSY_MS/PERIOD_MS``, a
periodic job) can change the chosen algorithm -- the reviewers' objection.
With load balancing on (the default), modprobe, which is not pinned, waits
behind the load and is pulled to an idle CPU once it is cache-cold
(usually while it is still in user space, before its first window), so on
an otherwise idle machine the load no longer shares its windows;
``--no-load-balance`` shows the objection on one CPU.

The kernel balances load (:mod:`kenv.kernel.balance`), as the real machine
does: modprobe is not pinned, so while it waits (preempted by a cyclictest
thread, or sharing its CPU with the load) an idle CPU may pull it, and its
later windows run there.  Each window's CPU is in the output (``cpu`` of
``windows`` in --json, a ``raid6_bench_window`` event in the trace);
``--no-load-balance`` runs the kernel without it (tasks move only at wakeup).

Under full and rt, modprobe's preempt-disabled windows land on several
CPUs, as in the seed's tables: while a window runs, the cyclictest thread of
its CPU waits behind it, the idle CPUs' periodic balances fail on the running
task, and after ``nr_balance_failed > cache_nice_tries + 2`` one of them
pushes it through the CPU stopper (``need_active_balance()``,
``active_load_balance_cpu_stop()`` in kernel/sched/fair.c,
``stop_one_cpu_nowait()`` in kernel/stop_machine.c), which runs at the
``preempt_enable()`` ending the window (:mod:`kenv.kernel.balance`).  On
voluntary modprobe reaches no ``__schedule()`` before it exits, and
``migrate_disable()`` refuses the push.  ``--no-active-balance`` turns the
push off (every window then stays on modprobe's first CPU).

Prints the cyclictest table, the simulated dmesg, the chosen vs the truly
fastest algorithm and the module load time.

Python: ``run_raid6_cyclictest(platform="x86-avx512-32", preempt="voluntary",
mode="preempt_disable", hz=None, kernel=None, load=False, seed=0,
load_balance=True)``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import numpy as np

from ..drivers.raid6 import (
    BENCH_MODES, KERNEL_VERSIONS, Raid6Selection, check_bench_mode, check_kernel_version, gen_mb_s,
    raid6_behaviour,
)
from ..errors import ConfigError
from ..kernel.core import PREEMPT_MODELS, Kernel, check_preempt_model
from ..kernel.jiffies import ALLOWED_HZ, check_hz
from ..platforms import get_platform
from ..schema import cli_integer
from ..sim.engine import NSEC_PER_MSEC, Engine
from ..workloads.cyclictest import Cyclictest, CyclictestStat
from ..workloads.load import LoadSpec, parse_load, start_load
from ..workloads.modprobe import Modprobe
from . import ReproRow

NAME = "raid6-cyclictest"
HELP = "modprobe raid6_pq under cyclictest: latency vs raid6 benchmark mode (seed 004)"
SEED_LABEL = "004 lib/raid6: migrate instead of preempt"

#: cyclictest runs this long before modprobe starts and after it exits
SETTLE_NS = 10 * NSEC_PER_MSEC
TAIL_NS = 10 * NSEC_PER_MSEC


@dataclass
class Raid6CyclictestResult:
    platform: str
    preempt: str
    hz: int
    mode: str
    kernel: str
    load: LoadSpec | None
    seed: int
    threads: list[CyclictestStat]
    sel: Raid6Selection
    bench_cpu: int
    chosen_gen_mb_s: float
    best: str
    best_gen_mb_s: float
    chosen_measured_mb_s: int | None
    load_ns: int
    events: int
    load_balance: bool = True
    active_balance: bool = True
    load_cpu: int | None = None   # where --load's task is pinned (modprobe's CPU at its start)
    cyclictest_text: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def chosen(self) -> str | None:
        return self.sel.chosen

    @property
    def max_ns(self) -> int:
        return max(t.max_ns for t in self.threads)

    @property
    def max_us(self) -> int:
        return max(t.max_us for t in self.threads)

    @property
    def throughput_loss(self) -> float:
        """1 - (true speed of the chosen algorithm) / (true speed of the fastest)."""
        return 1.0 - self.chosen_gen_mb_s / self.best_gen_mb_s

    @property
    def load_s(self) -> float:
        return self.load_ns / 1e9

    def to_dict(self) -> dict:
        sel = self.sel
        return {
            "platform": self.platform, "preempt": self.preempt, "hz": self.hz, "mode": self.mode,
            "kernel": self.kernel, "load": str(self.load) if self.load else None, "seed": self.seed,
            "threads": [{"cpu": t.cpu, "tid": t.tid, "min_us": t.min_us, "avg_us": t.avg_us,
                         "max_us": t.max_us, "max_ns": t.max_ns, "cycles": t.cycles}
                        for t in sorted(self.threads, key=lambda s: s.thread)],
            "max_us": self.max_us,
            "max_ns": self.max_ns,
            "dmesg": sel.dmesg_lines(),
            "chosen": sel.chosen,
            "best": self.best,
            "chosen_gen_mb_s": self.chosen_gen_mb_s,
            "best_gen_mb_s": self.best_gen_mb_s,
            "chosen_measured_gen_mb_s": self.chosen_measured_mb_s,
            "throughput_loss": self.throughput_loss,
            "recovery": sel.recov,
            "bench_cpu": self.bench_cpu,
            "load_s": self.load_s,
            "bench_s": (sel.end_ns - sel.start_ns) / 1e9,
            "windows": [{"algo": w.algo, "kind": w.kind, "perf": w.perf, "mb_s": w.mb_s,
                         "ideal_perf": w.ideal_perf, "lost_fraction": w.lost_fraction,
                         "start_s": w.start_ns / 1e9, "end_s": w.end_ns / 1e9, "cpu": w.cpu}
                        for w in sel.windows],
            "window_cpus": self.window_cpus(),
            "load_balance": self.load_balance,
            "active_balance": self.active_balance,
            "load_cpu": self.load_cpu,
            "events": self.events,
        }

    def window_cpus(self) -> dict[str, int]:
        """How many benchmark windows ran on each CPU (keys: CPU numbers as strings)."""
        out: dict[str, int] = {}
        for w in self.sel.windows:
            if w.cpu >= 0:
                out[str(w.cpu)] = out.get(str(w.cpu), 0) + 1
        return out

    def format_text(self) -> str:
        sel = self.sel
        out = [f"# cyclictest -S -p 95 -d 0 -i 1000 -m   (platform {self.platform}, "
               f"preempt={self.preempt}, HZ={self.hz}, kernel {self.kernel}, mode {self.mode}"
               f"{f', background load ({self.load}) on CPU {self.load_cpu}' if self.load else ''}, "
               f"seed {self.seed})",
               self.cyclictest_text, "", "# dmesg"]
        out += sel.dmesg_lines()
        out.append("")
        out.append(f"modprobe raid6_pq on CPU {self.bench_cpu}: {self.load_s * 1e3:.1f} ms "
                   f"(raid6_select_algo {(sel.end_ns - sel.start_ns) / 1e6:.1f} ms, "
                   f"{len(sel.windows)} benchmark windows)")
        spread = ", ".join(f"CPU {c}: {n}" for c, n in self.window_cpus().items())
        out.append(f"benchmark windows per CPU: {spread or 'none'}"
                   + ("" if self.load_balance else " (load balancing off)"))
        out.append(f"worst cyclictest latency: {self.max_us} us "
                   f"(thread on CPU {max(self.threads, key=lambda t: t.max_ns).cpu})")
        out.append(f"chosen: {sel.chosen} ({self.chosen_gen_mb_s:.0f} MB/s true"
                   + (f", {self.chosen_measured_mb_s} MB/s measured" if self.chosen_measured_mb_s
                      is not None else "")
                   + f"); fastest: {self.best} ({self.best_gen_mb_s:.0f} MB/s); "
                   f"throughput lost: {self.throughput_loss:.1%}")
        out += self.notes
        return "\n".join(out)


def resolve_config(platform: str, preempt: str, mode: str, hz: int | None, kernel: str | None):
    plat = get_platform(platform)
    if plat.raid6 is None or plat.cyclictest is None or "modprobe" not in plat.extra:
        raise ConfigError("platform", platform,
                          "a platform with raid6, cyclictest and modprobe parameters "
                          "(x86-avx512-32, x86-avx2)")
    check_preempt_model(preempt)
    check_bench_mode(mode)
    if hz is None:
        hz = plat.extra.get("hz_by_preempt", {}).get(preempt, plat.hz)
    check_hz(hz)
    # The platform's kernel runs the raid6_choose_gen() of its era; an
    # explicit --kernel must name one of the two behaviours.
    kernel = raid6_behaviour(plat.kernel_version) if kernel is None else str(kernel)
    check_kernel_version(kernel)
    return plat, hz, kernel


def run_raid6_cyclictest(platform: str = "x86-avx512-32", preempt: str = "voluntary",
                         mode: str = "preempt_disable", hz: int | None = None,
                         kernel: str | None = None, load: bool | str | None = False,
                         seed: int = 0, load_balance: bool = True,
                         active_balance: bool = True) -> Raid6CyclictestResult:
    """Run ``modprobe raid6_pq`` under cyclictest on a simulated machine.

    ``platform``: a platform with raid6 parameters (``x86-avx512-32``,
    ``x86-avx2``).  ``preempt``: none | voluntary | full | rt.  ``mode``:
    preempt_disable | migrate_disable | cond_resched | no_benchmark.
    ``hz``: CONFIG_HZ (100, 250, 300, 1000; default: the platform's HZ for
    that preemption model).  ``kernel``: "5.16" or "5.17" raid6_choose_gen()
    (default: the platform's).  ``load``: pin a CPU-bound task to modprobe's
    CPU: ``True``/``"continuous"`` (a busy loop) or ``"BUSY_MS/PERIOD_MS"``
    (a periodic job).
    ``seed``: seeds the rng (cyclictest phase, interrupt jitter, the CPU the
    shell runs modprobe from).  ``load_balance``: CFS load balancing in the
    kernel (kenv.kernel.balance; on, as on the real machine).
    ``active_balance``: with it, the idle CPUs' failed periodic balances push
    the running modprobe through the CPU stopper (kenv.kernel.balance; on, as
    on the real machine; no env id uses it).  Raises
    ConfigError on bad input.
    """
    plat, hz, kernel = resolve_config(platform, preempt, mode, hz, kernel)
    load = parse_load(load)
    rng = np.random.default_rng(seed)
    k = Kernel(Engine(), nr_cpus=plat.nr_cpus, hz=hz, preempt=preempt, costs=plat.sched,
               rng=rng, name=plat.name, load_balance=bool(load_balance),
               active_balance=bool(load_balance and active_balance),
               kernel_version=plat.kernel_version)
    # Where cyclictest starts relative to the tick, and which CPU the shell
    # that runs modprobe last ran on: drawn from the seed.
    t0 = int(rng.integers(0, k.TICK_NSEC))
    parent_cpu = int(rng.integers(0, plat.nr_cpus))
    ct = Cyclictest(k, plat.cyclictest, interval_us=1000, priority=95)
    ct.start(t0)
    t_launch = t0 + len(ct.cpus) * plat.cyclictest.thread_spawn_ns + SETTLE_NS
    mp = Modprobe(k, plat.extra["modprobe"], plat.raid6, kernel_version=kernel, mode=mode)
    hog = []

    def launch() -> None:
        task = mp.start(parent_cpu)
        if load:
            hog.append(start_load(k, task.cpu, load))

    k.engine.at(t_launch, launch)
    k.run(stop=lambda: mp.done)
    if not mp.done:  # pragma: no cover - the engine ran dry
        raise RuntimeError("modprobe raid6_pq did not finish")
    k.run(until=k.now + TAIL_NS)

    sel = mp.sel
    fastest = plat.raid6.fastest()
    chosen = plat.raid6.by_name(sel.chosen)
    measured = None
    if sel.chosen is not None and mode != "no_benchmark":
        measured = gen_mb_s(sel.bestgenperf, hz)
    notes = []
    if kernel == "5.17" and mode != "no_benchmark":
        notes.append("v5.17: xor() benchmarked only for the chosen algorithm; "
                     "SSE2 skipped once AVX2/AVX-512 is best")
    return Raid6CyclictestResult(
        platform=plat.name, preempt=preempt, hz=hz, mode=mode, kernel=kernel, load=load,
        seed=seed, threads=list(ct.stats), sel=sel, bench_cpu=sel.cpu,
        chosen_gen_mb_s=chosen.gen_mb_s, best=fastest.name, best_gen_mb_s=fastest.gen_mb_s,
        chosen_measured_mb_s=measured, load_ns=mp.load_ns, events=k.engine.events_run,
        load_balance=bool(load_balance), active_balance=bool(load_balance and active_balance),
        load_cpu=hog[0].cpu if hog else None,
        cyclictest_text=ct.format_text(), notes=notes)


# ------------------------------------------------------------------ CLI glue

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--platform", default="x86-avx512-32",
                   help="machine (default x86-avx512-32; also x86-avx2)")
    p.add_argument("--preempt", default="voluntary", choices=PREEMPT_MODELS,
                   help="preemption model (CONFIG_PREEMPT_*)")
    p.add_argument("--mode", default="preempt_disable", choices=BENCH_MODES,
                   help="what wraps each benchmark window (the decision under study)")
    p.add_argument("--hz", type=cli_integer, default=None,
                   help=f"CONFIG_HZ, one of {', '.join(map(str, ALLOWED_HZ))} "
                        "(default: the platform's for that preemption model)")
    p.add_argument("--kernel", default=None, choices=KERNEL_VERSIONS,
                   help="raid6_choose_gen() of this kernel (default: the platform's)")
    p.add_argument("--load", nargs="?", const="continuous", default=None, metavar="SPEC",
                   help="pin a CPU-bound SCHED_NORMAL task to modprobe's CPU: 'continuous' "
                        "(the default with a bare --load) or BUSY_MS/PERIOD_MS (a periodic job)")
    p.add_argument("--no-load-balance", dest="load_balance", action="store_false",
                   help="run the kernel without CFS load balancing (tasks move between CPUs only "
                        "when they wake up)")
    p.add_argument("--no-active-balance", dest="active_balance", action="store_false",
                   help="balance load without active balancing (no push of a running task "
                        "through the CPU stopper)")


def run_from_args(args: argparse.Namespace) -> Raid6CyclictestResult:
    return run_raid6_cyclictest(platform=args.platform, preempt=args.preempt, mode=args.mode,
                                hz=args.hz, kernel=args.kernel, load=args.load, seed=args.seed,
                                load_balance=getattr(args, "load_balance", True),
                                active_balance=getattr(args, "active_balance", True))


# ------------------------------------------------------------------ reproduce

def reproduce_rows(seed: int = 0, fast_forward: bool = True) -> list[ReproRow]:
    """The seed's figures: worst cyclictest latency during ``modprobe raid6_pq``.

    Published (seed 004): "greater than 1.2s when CONFIG_PREEMPT_VOLUNTARY=y,
    greater than 67ms when CONFIG_PREEMPT=y, and greater than 16ms when
    CONFIG_PREEMPT_RT=y" (lower bounds; bands are ours), and "beneficial for
    CONFIG_PREEMPT=y and CONFIG_PREEMPT_RT=y, but no effect for
    CONFIG_PREEMPT_VOLUNTARY=y" for migrate_disable (qualitative).
    ``fast_forward`` changes nothing (no fast-forward here; the argument
    every experiment's ``reproduce_rows`` takes).
    """
    label = SEED_LABEL
    rows = []
    base = {}
    for preempt, unit, scale, pub, lo, hi in (
            ("voluntary", "s", 1e9, 1.2, 1.16, 1.30),
            ("full", "ms", 1e6, 67.0, 64.0, 69.0),
            ("rt", "ms", 1e6, 16.0, 16.0, 17.5)):
        r = run_raid6_cyclictest(preempt=preempt, mode="preempt_disable", seed=seed)
        base[preempt] = r
        rows.append(ReproRow(label, f"cyclictest Max, {preempt} HZ={r.hz}, preempt_disable",
                             unit, pub, r.max_ns / scale, lo, hi,
                             note="published as a lower bound ('greater than')"))
    for preempt in ("voluntary", "full", "rt"):
        r = run_raid6_cyclictest(preempt=preempt, mode="migrate_disable", seed=seed)
        ratio = r.max_ns / base[preempt].max_ns
        if preempt == "voluntary":
            rows.append(ReproRow(label, "Max(migrate_disable)/Max(preempt_disable), voluntary",
                                 "ratio", 1.0, ratio, 0.95, 1.05,
                                 note="published: 'no effect for CONFIG_PREEMPT_VOLUNTARY'"))
        else:
            rows.append(ReproRow(label, f"migrate_disable beneficial on {preempt} (1 = yes)",
                                 "bool", 1.0, float(ratio < 0.01), 1.0, 1.0,
                                 note=f"published: 'beneficial' (qualitative); "
                                      f"Max {base[preempt].max_ns / 1e6:.1f} ms -> "
                                      f"{r.max_ns / 1e3:.0f} us"))
    return rows


__all__ = ["NAME", "HELP", "Raid6CyclictestResult", "add_arguments", "reproduce_rows",
           "run_from_args", "run_raid6_cyclictest"]
