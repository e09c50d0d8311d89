"""What a named machine is: its CPUs, kernel configuration and the parameters
of each simulated subsystem.

Every parameter in a platform file carries its source in a comment: a kernel
file, a datasheet, a measurement, or "fitted" together with the published
figure it was fitted to.  Each platform lists its fitted parameters in
``fitted`` so that the count can be checked against the figures reproduced.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..kernel.core import SchedCosts


@dataclass(frozen=True)
class Fitted:
    """A parameter whose value was fitted, and the published figure it was fitted to."""

    param: str
    figure: str


@dataclass(frozen=True)
class Platform:
    name: str
    description: str
    arch: str                 # "arm64", "arm", "x86_64"
    nr_cpus: int
    hz: int                   # CONFIG_HZ
    preempt: str              # CONFIG_PREEMPT_{NONE,VOLUNTARY,} / PREEMPT_RT
    kernel_version: str
    sched: SchedCosts
    smp_cache_bytes: int = 64  # L1_CACHE_BYTES
    long_bits: int = 64        # BITS_PER_LONG
    hwrng: Any = None          # kenv.drivers.hwrng.Bcm2835Params
    raid6: Any = None          # kenv.drivers.raid6.Raid6Params
    nic: Any = None            # kenv.workloads.qperf.NicParams
    cyclictest: Any = None     # kenv.workloads.cyclictest.WakeupLatency
    extra: dict = field(default_factory=dict)
    fitted: tuple[Fitted, ...] = ()
    sources: tuple[str, ...] = ()
