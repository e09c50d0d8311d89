"""Seed 000: qperf ``tcp_lat`` over IPoIB while random.c mixes its fast pools.

    kenv experiment qperf-tcp-lat --platform x86-ib40g --deferral workqueue \\
        [--sizes 4K:1024K] [--time 60] [--instances 1] \\
        [--preempt none|voluntary|full|rt] [--threshold 1024|64] [--no-irq-threads]

Two hosts of the platform (the X7 client under ``numactl -m0 -N0`` and the
server) run the same kernel; every IPoIB interrupt goes through
add_interrupt_randomness() on the CPU that takes it, and the chosen deferral
runs mix_interrupt_randomness():

* ``workqueue``: queue_work_on(cpu, system_highpri_wq) -- a nice -20 kworker
  (58340f8e952b, the state Sherry Yang measured);
* ``schedule_work``: the normal-priority system_wq (nice 0 kworker);
* ``timer``: add_timer_on() of an expired per-CPU timer, run from
  TIMER_SOFTIRQ at the next tick (748bc4dd9e66, the patch);
* ``hardirq``: the original in-IRQ mix under input_pool.lock -- a "sleeping
  function called from invalid context" BUG on PREEMPT_RT;
* ``none``: no mixing (queue_work_on() commented out).

On ``--preempt rt`` the kernels run PREEMPT_RT's forced interrupt threads
(kenv.kernel.irq): the NIC's handler and NET_RX run in ``irq/N-mlx4-ib0`` at
SCHED_FIFO 50 and the mix timer expires in ``ksoftirqd/N`` (5.15-rt has no
``ktimers``), a wakeup and context switches each on qperf's CPU; the qperf
fast-forward skips only steady round trips there.
``--no-irq-threads`` runs rt as before (handlers and softirqs stealing time,
as on ``full``), for comparison.  No published RT figure exists for this
patch: nothing here is fitted to one.

qperf's ping-pong runs for ``--time`` seconds per size (4K, 8K, ... 1024K);
latency = elapsed / messages received on both sides (RTT/2).  The run also
runs ``none`` on the same seed to report the regression.  The machines start
with an empty input pool (as at boot), so the crng EARLY/READY times are
those of the interrupt entropy alone.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..drivers.random import (
    FAST_POOL_MIX_THRESHOLD, check_deferral, check_threshold,
)
from ..errors import ConfigError
from ..kernel.core import check_preempt_model
from ..platforms import get_platform
from ..schema import check_choice, check_int, cli_integer
from ..workloads.qperf import (
    QPERF_MODES, QperfLearned, QperfTcpLat, format_size, irq_randomness_factory, parse_sizes,
)
from . import ReproRow

NAME = "qperf-tcp-lat"
HELP = "seed 000: qperf tcp_lat over IPoIB with the fast-pool mix deferred (workqueue, timer, ...)"
SEED_LABEL = "000 random: use expired per-cpu timer rather than wq for mixing fast pool"
DEFAULT_PLATFORM = "x86-ib40g"
DEFAULT_SIZES = "4K:1024K"
#: qperf --time of the seed's run
SEED_TIME_S = 60.0
MAX_TIME_S = 3600.0


@dataclass
class QperfTcpLatResult:
    """What one run printed, plus the random.c side of it."""

    platform: str
    deferral: str
    preempt: str
    hz: int
    threshold: int
    time_s: float
    instances: int
    kernel_version: str
    sizes: list[dict]
    mean_latency_us: float
    baseline_mean_latency_us: float | None
    regression_vs_none: float | None
    mixes_per_s_per_cpu: float
    interrupts_per_s_per_cpu: float
    mixes: int
    bits_credited: int
    crng_early_s: float | None
    crng_ready_s: float | None
    bugs: list[str]
    bug_count: int
    server: dict = field(default_factory=dict)
    mode: str = "aggregated"
    irq_threads: bool = False
    round_trips: int = 0
    detailed_round_trips: int = 0
    events_run: int = 0
    wall_s: float = 0.0

    def to_dict(self) -> dict:
        return {
            "experiment": NAME, "platform": self.platform, "deferral": self.deferral,
            "preempt": self.preempt, "hz": self.hz, "threshold": self.threshold,
            "time_s": self.time_s, "instances": self.instances,
            "kernel_version": self.kernel_version, "sizes": self.sizes,
            "mean_latency_us": self.mean_latency_us,
            "baseline_mean_latency_us": self.baseline_mean_latency_us,
            "regression_vs_none": self.regression_vs_none,
            "mixes_per_s_per_cpu": self.mixes_per_s_per_cpu,
            "interrupts_per_s_per_cpu": self.interrupts_per_s_per_cpu,
            "mixes": self.mixes, "bits_credited": self.bits_credited,
            "crng_early_s": self.crng_early_s, "crng_ready_s": self.crng_ready_s,
            "bugs": self.bugs, "bug_count": self.bug_count, "server": self.server,
            "mode": self.mode, "irq_threads": self.irq_threads, "round_trips": self.round_trips,
            "detailed_round_trips": self.detailed_round_trips, "events_run": self.events_run,
            "wall_s": self.wall_s,
        }

    def format_text(self) -> str:
        inst = f"{self.instances} instance" + ("s" if self.instances > 1 else "")
        lines = [
            f"qperf tcp_lat on {self.platform} (linux {self.kernel_version}, HZ={self.hz}, "
            f"preempt {self.preempt}{', irq threads' if self.irq_threads else ''}): "
            f"deferral {self.deferral}, threshold {self.threshold}, "
            f"--time {self.time_s:g} s per size, {inst}",
            "tcp_lat:",
        ]
        for s in self.sizes:
            reg = s.get("regression_vs_none")
            r = f"   ({reg:+.1%} vs none)" if reg is not None else ""
            lines.append(f"    latency   =  {s['latency_us']:8.2f} us    msg_size  =  "
                         f"{format_size(s['msg_size']):>8}{r}")
        lines.append(f"mean latency over {len(self.sizes)} sizes: {self.mean_latency_us:.2f} us")
        if self.regression_vs_none is not None:
            lines.append(f"  none (no mixing): {self.baseline_mean_latency_us:.2f} us -> "
                         f"regression vs none {self.regression_vs_none:+.2%}")
        lines.append(f"fast pool: {self.mixes_per_s_per_cpu:.1f} mixes/s per CPU "
                     f"({self.interrupts_per_s_per_cpu:,.0f} interrupts/s on the client's IPoIB CPU)")
        early = f"at {self.crng_early_s:.4f} s" if self.crng_early_s is not None else "not reached"
        ready = f"at {self.crng_ready_s:.4f} s" if self.crng_ready_s is not None else "not reached"
        lines.append(f"bits credited (client): {self.bits_credited}; crng EARLY {early}, "
                     f"READY (crng init done) {ready}")
        if self.bugs:
            lines.append(f"kernel BUGs: {self.bug_count} (rate-limited splats: {len(self.bugs)})")
            lines.extend(f"  {b}" for b in self.bugs[:3])
        else:
            lines.append("kernel BUGs: none")
        return "\n".join(lines)


# ------------------------------------------------------------------- checks

def check_args(platform: str, deferral: str, sizes: str, time_s, instances, preempt,
               threshold) -> tuple:
    """Validate every input before anything runs; ConfigError names the bad one."""
    plat = get_platform(platform)
    if plat.nic is None or "qperf_host" not in plat.extra:
        raise ConfigError("platform", platform, "a platform with an IPoIB NIC: x86-ib40g")
    check_deferral(deferral)
    size_list = parse_sizes(sizes)
    try:
        t = float(time_s)
    except (TypeError, ValueError):
        raise ConfigError("time", time_s, f"seconds, > 0 and <= {MAX_TIME_S:g}") from None
    if not math.isfinite(t) or t <= 0 or t > MAX_TIME_S:
        raise ConfigError("time", time_s, f"seconds, > 0 and <= {MAX_TIME_S:g}")
    if int(t * 1e9) < 1_000_000:
        raise ConfigError("time", time_s, "at least 0.001 s (one round trip needs tens of us)")
    max_inst = int(plat.extra.get("cores_per_socket", plat.nr_cpus))
    check_int(int(instances) if isinstance(instances, np.integer) else instances, "instances", 1, max_inst,
              f"an integer 1..{max_inst} (one per core of node 0)")
    pre = check_preempt_model(preempt if preempt is not None else plat.preempt)
    check_threshold(threshold)
    return plat, size_list, t, pre


# --------------------------------------------------------------------- run

def _simulate(plat, deferral: str, sizes: list[int], time_s: float, instances: int,
              preempt: str, threshold: int, seed: int, mode: str, learned: QperfLearned | None,
              irq_threads: bool = False) -> dict:
    rng = np.random.default_rng(seed)
    wl = QperfTcpLat(plat, random_factory=irq_randomness_factory(plat, deferral=deferral, threshold=threshold),
                     preempt=preempt, rng=rng, instances=instances, mode=mode, learned=learned,
                     irq_threads=irq_threads)
    per_size = []
    for s in sizes:
        stats = wl.run_size(s, int(time_s * 1e9))
        per_size.append(stats)
    return {"wl": wl, "per_size": per_size}


def run_qperf_tcp_lat(platform: str = DEFAULT_PLATFORM, deferral: str = "timer",
                      sizes: str = DEFAULT_SIZES, time_s: float = SEED_TIME_S,
                      instances: int = 1, preempt: str | None = None,
                      threshold: int = FAST_POOL_MIX_THRESHOLD, seed: int = 0,
                      mode: str = "aggregated", baseline: bool = True,
                      irq_threads: bool = True) -> QperfTcpLatResult:
    """Run qperf ``tcp_lat`` for each size with the fast-pool mix deferred by ``deferral``.

    Arguments mirror the CLI: ``platform`` (x86-ib40g), ``deferral``
    (workqueue, schedule_work, timer, hardirq, none), ``sizes`` (qperf's
    ``START:END`` doubling, e.g. ``"4K:1024K"``, or one size), ``time_s``
    (qperf ``--time``, per size), ``instances`` (client/server pairs, one per
    CPU of node 0), ``preempt`` (default: the platform's), ``threshold``
    (interrupts per mix: 1024, or 64 before 534d2eaf1970), ``seed`` (the
    numpy Generator; only the tick phase at which each size starts is
    random).  ``mode="exact"`` simulates every round trip instead of
    fast-forwarding the steady ones (same figures, much slower); the
    fast-forward's memory (:class:`~kenv.fastforward.qperf.QperfLearned`) is this
    call's own, shared by the run and its baseline.  ``baseline`` also runs ``none`` with the same seed for
    ``regression_vs_none`` (a fraction: 0.10 = 10% worse).  ``irq_threads``:
    on ``rt``, simulate the forced interrupt threads (kenv.kernel.irq; the
    default); no effect on the other models.
    """
    check_choice(mode, "mode", QPERF_MODES)
    plat, size_list, t, pre = check_args(platform, deferral, sizes, time_s, instances, preempt,
                                         threshold)
    w0 = time.perf_counter()
    learned = QperfLearned() if mode == "aggregated" else None
    threads = bool(irq_threads) and pre == "rt"
    run = _simulate(plat, deferral, size_list, t, instances, pre, threshold, seed, mode, learned, threads)
    base = None
    if baseline and deferral != "none":
        base = _simulate(plat, "none", size_list, t, instances, pre, threshold, seed, mode, learned, threads)
    wall = time.perf_counter() - w0

    wl: QperfTcpLat = run["wl"]
    lat = [float(np.mean([st.latency_ns for st in stats])) / 1e3 for stats in run["per_size"]]
    base_lat = None
    if base is not None:
        base_lat = [float(np.mean([st.latency_ns for st in stats])) / 1e3 for stats in base["per_size"]]
    elif deferral == "none":
        base_lat = lat
    sizes_out = []
    for i, (s, stats) in enumerate(zip(size_list, run["per_size"])):
        d = {"msg_size": s, "latency_us": lat[i],
             "round_trips": int(sum(st.round_trips for st in stats)),
             "mixes_per_s": float(np.mean([st.mixes_client for st in stats])) / t,
             "interrupts_per_s": float(np.mean([st.irqs_client for st in stats])) / t}
        if base_lat is not None:
            d["regression_vs_none"] = lat[i] / base_lat[i] - 1.0
        sizes_out.append(d)
    mean = float(np.mean(lat))
    base_mean = float(np.mean(base_lat)) if base_lat is not None else None
    client, server = wl.hosts
    cpus = [p.cpu for p in wl.pairs]
    total_s = t * len(size_list)

    def host_summary(h):
        pools = [h.random.fast_pool(c) for c in cpus]
        ip = h.random.input_pool
        return {
            "mixes": sum(p.mixes for p in pools),
            "mixes_per_s_per_cpu": float(np.mean([p.mixes for p in pools])) / total_s,
            "interrupts_per_s_per_cpu": float(np.mean([p.irqs for p in pools])) / total_s,
            "bits_credited": ip.credited_by.get("interrupts", 0),
            "crng_early_s": ip.early_ns / 1e9 if ip.early_ns is not None else None,
            "crng_ready_s": ip.ready_ns / 1e9 if ip.ready_ns is not None else None,
            "bugs": list(h.k.bugs),
            "bug_count": h.random.bug_count,
        }

    cs = host_summary(client)
    ss = host_summary(server)
    return QperfTcpLatResult(
        platform=plat.name, deferral=deferral, preempt=pre, hz=plat.hz, threshold=threshold,
        time_s=t, instances=instances, kernel_version=plat.kernel_version, sizes=sizes_out,
        mean_latency_us=mean, baseline_mean_latency_us=base_mean,
        regression_vs_none=(mean / base_mean - 1.0) if base_mean else None,
        mixes_per_s_per_cpu=cs["mixes_per_s_per_cpu"],
        interrupts_per_s_per_cpu=cs["interrupts_per_s_per_cpu"], mixes=cs["mixes"],
        bits_credited=cs["bits_credited"], crng_early_s=cs["crng_early_s"],
        crng_ready_s=cs["crng_ready_s"], bugs=cs["bugs"] + ss["bugs"],
        bug_count=cs["bug_count"] + ss["bug_count"],
        server={k: v for k, v in ss.items() if k != "bugs"}, mode=mode, irq_threads=threads,
        round_trips=int(sum(d["round_trips"] for d in sizes_out)),
        detailed_round_trips=int(sum(p.detailed for p in wl.pairs)),
        events_run=wl.engine.events_run, wall_s=wall,
    )


# --------------------------------------------------------------------- CLI

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--platform", default=DEFAULT_PLATFORM, help="machine (default x86-ib40g)")
    parser.add_argument("--deferral", default="timer",
                        help="where mix_interrupt_randomness() runs: workqueue, schedule_work, "
                             "timer, hardirq, none (default timer, the patch)")
    parser.add_argument("--sizes", default=DEFAULT_SIZES,
                        help="message sizes as qperf's msg_size:START:END:*2 (default 4K:1024K)")
    parser.add_argument("--time", default=SEED_TIME_S, type=str,
                        help="qperf --time: seconds per size (default 60)")
    parser.add_argument("--instances", default=1, type=cli_integer,
                        help="qperf client/server pairs, one per CPU of node 0 (default 1)")
    parser.add_argument("--preempt", default=None,
                        help="none, voluntary, full or rt (default: the platform's, voluntary)")
    parser.add_argument("--threshold", default=FAST_POOL_MIX_THRESHOLD, type=cli_integer,
                        help="interrupts per mix: 1024, or 64 (before 534d2eaf1970) (default 1024)")
    parser.add_argument("--no-irq-threads", dest="irq_threads", action="store_false",
                        help="on --preempt rt, run handlers and softirqs as on full (no irq/N, "
                             "ksoftirqd threads): the model before the threads, for comparison")
    parser.add_argument("--no-fast-forward", dest="fast_forward", action="store_false",
                        help="simulate every round trip (mode exact: the same figures, much slower)")


def run_from_args(args: argparse.Namespace) -> QperfTcpLatResult:
    if not getattr(args, "irq_threads", True) and args.preempt != "rt":
        # the threads are PREEMPT_RT's: on other models the flag would change nothing
        raise ConfigError("--no-irq-threads", f"with --preempt {args.preempt or 'platform'}",
                          "only with --preempt rt (the interrupt threads are PREEMPT_RT's)")
    return run_qperf_tcp_lat(platform=args.platform, deferral=args.deferral, sizes=args.sizes,
                             time_s=args.time, instances=args.instances, preempt=args.preempt,
                             threshold=args.threshold, seed=args.seed,
                             mode="aggregated" if args.fast_forward else "exact",
                             irq_threads=getattr(args, "irq_threads", True))


# ---------------------------------------------------------- reproduction

#: --time used by ``kenv reproduce``: the seed ran 60 s per size; the mean
#: latencies converge within a few seconds (a mix every ~10-40 ms per CPU),
#: so 20 s per size keeps the three runs (workqueue, timer, none) short
#: (measured: the workqueue-vs-timer figure is 9.935% at 2 s, 9.937% at 10 s,
#: 9.940% at 60 s per size).
REPRO_TIME_S = 20.0


def reproduce_rows(seed: int = 0, fast_forward: bool = True) -> list[ReproRow]:
    """Seed 000: mean tcp_lat over 4K..1024K, workqueue vs timer (~10%), and
    timer vs none (the patch removed the regression)."""
    kw = dict(time_s=REPRO_TIME_S, seed=seed, baseline=False, mode="aggregated" if fast_forward else "exact")
    wq = run_qperf_tcp_lat(deferral="workqueue", **kw)
    tm = run_qperf_tcp_lat(deferral="timer", **kw)
    none = run_qperf_tcp_lat(deferral="none", **kw)
    rows = [
        ReproRow(SEED_LABEL, "qperf tcp_lat mean 4K..1024K: workqueue vs timer", "fraction",
                 0.10, wq.mean_latency_us / tm.mean_latency_us - 1.0, low=0.07, high=0.13,
                 note=(f"fitted: x86-ib40g resume_refill_ns; --time {REPRO_TIME_S:g} s per size "
                       "(seed: 60 s)")),
        ReproRow(SEED_LABEL, "qperf tcp_lat mean 4K..1024K: timer vs none", "fraction",
                 0.0, tm.mean_latency_us / none.mean_latency_us - 1.0, low=-0.02, high=0.02,
                 note="not fitted: the timer path has no task switch (review: removing "
                      "queue_work_on removed the regression)"),
    ]
    return rows


__all__ = [
    "DEFAULT_PLATFORM", "HELP", "NAME", "QperfTcpLatResult", "REPRO_TIME_S", "add_arguments",
    "check_args", "reproduce_rows", "run_from_args", "run_qperf_tcp_lat",
]
