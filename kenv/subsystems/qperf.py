"""Two hosts running qperf tcp_lat, their NIC interrupts feeding random.c's fast pools."""

from __future__ import annotations

import dataclasses
import math
from types import MappingProxyType

import numpy as np

from ..drivers.random import IrqRandomness
from ..kernel.core import PREEMPT_MODELS
from ..kernel.jiffies import ALLOWED_HZ
from ..platforms import get_platform
from ..sim.engine import NSEC_PER_SEC, check_period
from ..workloads.qperf import (
    QperfLearned, QperfTcpLat, format_size, irq_randomness_factory, parse_size, steady_round_trip,
)
from .common import NO_VALUE, Decision, kernel_reports_info
from .phases import NEXT_SIZE, PAUSE, PhaseSchedule

#: where mix_interrupt_randomness() runs: in a high-priority kworker (before
#: the patch), from the next timer tick (the patch), a normal-priority
#: system-queue kworker, or in the hard IRQ (the original)
DEFERRAL = Decision(default=("workqueue", "timer"), extended=("schedule_work", "hardirq"),
                    original="hardirq", pre_patch="workqueue", patched="timer")

#: how many steps ahead a traffic schedule is looked at (QperfSubsystem._next_change)
LOOKAHEAD = 64

SIZES = ("4K", "8K", "16K", "32K", "64K", "128K", "256K", "512K", "1024K")

#: the scenario fields of a qperf machine (RandomMix-v2, and Kernel-v3 extends them)
QPERF_SCENARIO_FIELDS = MappingProxyType({
    "platform": ("x86-ib40g",),
    "preempt": ("platform",) + PREEMPT_MODELS,
    "hz": ("platform",) + ALLOWED_HZ,
    "msg_size": SIZES,
    "threshold": (1024, 64),
    "step_ms": (5, 10, 20, 50, 100),
})


class QperfSubsystem:
    """Two booted hosts of ``plat`` and one qperf tcp_lat client/server pair at
    one message size; the hosts' NIC interrupts feed their fast pools.  Owns
    the engine: ``step(deferral)`` runs the next ``step_ns`` of the ping-pong,
    which goes on across steps (and whatever else lives on the client host's
    kernel).  Used by RandomMix-v2 and Kernel-v3."""

    def __init__(self, plat, *, preempt: str, rng: np.random.Generator, msg_size: str,
                 threshold: int, step_ns: int, learned: QperfLearned | None = None,
                 load_balance: bool = False, irq_threads: bool = False,
                 schedule: PhaseSchedule | None = None):
        self.plat = plat
        self.size = parse_size(str(msg_size))
        self.msg_size_label = format_size(self.size)
        self.threshold = threshold
        self.step_ns = check_period(step_ns, "step")   # (a zero step would freeze simulated time)
        self.wl = QperfTcpLat(plat, random_factory=irq_randomness_factory(plat, threshold=threshold),
                              preempt=preempt, rng=rng, instances=1,
                              mode="exact" if learned is None else "aggregated", learned=learned,
                              load_balance=load_balance, irq_threads=irq_threads)
        self.randoms: list[IrqRandomness] = [h.random for h in self.wl.hosts]
        # the client's and the server's kernel and input pool (QperfTcpLat has
        # these two hosts): the per-step sums below name them, no loop
        client, server = self.wl.hosts
        self.kernels = (client.k, server.k)
        self._pools = (client.random.input_pool, server.random.input_pool)
        self.client_kernel = client.k
        self.client_pool = client.random.input_pool
        # the undisturbed round trip of this size: the latency reference
        self.clean_rtt_ns = steady_round_trip(plat, preempt=preempt, size=self.size, learned=learned,
                                              irq_threads=irq_threads)
        self.last = 0.0
        #: the traffic's phases (kenv.subsystems.phases; None: msg_size throughout)
        self.schedule = schedule
        self.step_no = 0
        self._preempt, self._learned, self._irq_threads = preempt, learned, irq_threads
        self._clean = {self.size: self.clean_rtt_ns}   # the latency reference of each size
        #: the last step's round trips and fast-pool mixes (state_observation)
        self.last_round_trips = self.last_mixes = 0

    def config_features(self) -> list[float]:
        """The observation entries an episode never changes: log2(msg_size / 4 KiB) / 8,
        and whether the mix threshold is 64 (before 534d2eaf1970)."""
        return [math.log2(self.size / 4096) / 8.0, float(self.threshold == 64)]

    def bits(self) -> int:
        a, b = self._pools
        return a.init_bits + b.init_bits

    def bugs(self) -> int:
        a, b = self.kernels
        return len(a.bugs) + len(b.bugs)

    def mixes(self) -> int:
        a, b = self.randoms
        return a.mixes + b.mixes

    def step_size(self, i: int) -> int:
        """The message size of step ``i`` (0: no traffic): ``msg_size`` without phases."""
        if self.schedule is None:
            return self.size
        phase = self.schedule.phase(i)
        if phase == PAUSE:
            return 0
        if phase == NEXT_SIZE:   # the sweep's next size; none after 1024K (qperf has exited)
            return 0 if self.size >= parse_size(SIZES[-1]) else 2 * self.size
        return self.size

    def _next_change(self, size: int) -> int | None:
        """When the traffic next changes (the start of the first later step
        of another size; steps last step_ns), looking LOOKAHEAD steps ahead
        (beyond: then): no fast-forward of qperf may run past it."""
        if self.schedule is None:
            return None
        now = self.wl.engine.now
        for j in range(1, LOOKAHEAD + 1):
            if self.step_size(self.step_no - 1 + j) != size:
                break
        return now + j * self.step_ns

    def _clean_rtt(self, size: int) -> int:
        clean = self._clean.get(size)
        if clean is None:
            clean = self._clean[size] = steady_round_trip(self.plat, preempt=self._preempt, size=size,
                                                          learned=self._learned, irq_threads=self._irq_threads)
        return clean

    def step(self, deferral: str) -> dict:
        for r in self.randoms:
            r.set_deferral(deferral)
        mixes0 = self.mixes()
        size = self.step_size(self.step_no)
        self.step_no += 1
        clean_rtt = self._clean_rtt(size) if size else 0
        # qperf runs on across steps; a step is the next step_ns of it
        (st,) = self.wl.run_slice(size, self.wl.engine.now + self.step_ns, clean_rtt, hold=self._next_change(size))
        rts = self.last_round_trips = int(st.round_trips)
        mixes = self.last_mixes = self.mixes() - mixes0
        if not size:    # no traffic: no round trip to measure
            self.last = 0.0
            return {"throughput": 0.0, "latency": 0.0,
                    "raw": {"latency_us": NO_VALUE, "clean_latency_us": NO_VALUE, "round_trips": rts,
                            "mixes": mixes}}
        lat_ns = st.latency_ns
        clean_ns = clean_rtt / 2
        regression = max(0.0, lat_ns / clean_ns - 1.0)
        self.last = min(1.0, regression * 5.0)
        return {"throughput": clean_ns / lat_ns if lat_ns else 0.0, "latency": regression,
                "raw": {"latency_us": lat_ns / 1e3, "clean_latency_us": clean_ns / 1e3,
                        "round_trips": rts, "mixes": mixes}}

    @property
    def last_irqs(self) -> int:
        """The last step's receive interrupts on the client's qperf CPU: its
        round trips times the current message's (fast_pool.irqs is counted in
        bulk, late); worked out only when asked for (state_observation)."""
        rts = self.last_round_trips
        return rts * len(self.wl.pairs[0].irq_arrivals()) if rts else 0

    def state_observation(self) -> list[float]:
        """kenv.envs.observation.QPERF_STATE (``phases=True``): the last step's
        receive interrupts on the client's qperf CPU, log10(1 + per ms) / 3
        (1000 per ms -> 1), and its fast-pool mixes (both hosts) / 4, capped
        at 1.  (Not ``fast_pool.count``: the simulator counts a message's
        interrupts in bulk, so at a step's end it is not the kernel's value.)"""
        per_ms = self.last_irqs * 1e6 / self.step_ns
        return [min(1.0, math.log10(1.0 + per_ms) / 3.0), min(1.0, self.last_mixes / 4)]

    #: the step-only info entries before the first step (reset's info)
    RAW_AT_RESET = {"latency_us": NO_VALUE, "clean_latency_us": NO_VALUE, "round_trips": 0, "mixes": 0}

    def info(self) -> dict:
        """State entries of info; both hosts' in arrays of shape (2,): client, server."""
        a, b = self._pools
        return {"msg_size": self.msg_size_label,
               "crng_init": np.array((a.crng_init, b.crng_init), dtype=np.int64),
               "bits_credited_total": np.array((a.init_bits, b.init_bits), dtype=np.int64),
               "crng_ready_s": np.array((NO_VALUE if a.ready_ns is None else a.ready_ns / NSEC_PER_SEC,
                                         NO_VALUE if b.ready_ns is None else b.ready_ns / NSEC_PER_SEC)),
                **kernel_reports_info(self.kernels, self.kernels), **self.phase_info()}

    def phase_info(self) -> dict:
        """``traffic_phase`` (with a schedule): the last step's message size, or
        ``pause`` (at reset: the first step's)."""
        if self.schedule is None:
            return {}
        size = self.step_size(max(0, self.step_no - 1))
        return {"traffic_phase": format_size(size) if size else "pause"}


def resolve_machine(scenario: dict):
    """The platform with the scenario's HZ, and the preemption model."""
    plat = get_platform(scenario["platform"])
    preempt = plat.preempt if scenario["preempt"] == "platform" else scenario["preempt"]
    if scenario["hz"] != "platform":
        plat = dataclasses.replace(plat, hz=int(scenario["hz"]))
    return plat, preempt
