"""The kernelci BCM2835 board whose boot stalled in bcm2835_rng_read (seed 001's history).

A Raspberry Pi 1-class board (BCM2835, one ARM1176JZF-S core, arm32), booted
by kernelci with ``bcm2835_defconfig`` (CONFIG_HZ=100, no CONFIG_PREEMPT: the
``none`` model), on a 6.0-era linux-next.  Its boot log reported::

    rcu: INFO: rcu_sched self-detected stall on CPU     (at 23.16 s after boot)
    rcu:     0-....: (t=2101 jiffies ...)
    ... hwrng kthread in bcm2835_rng_read

i.e. the "hwrng" kthread spun with ``cpu_relax()`` on an empty FIFO without
ever reaching a quiescent state.  That report led to 96cb9d055445 (6.1:
``hwrng_msleep(1000)``), whose throughput cost led to the seed (``hwrng_yield``).

Reproduced here: the stall's time (23.16 s) and its ``t=2101 jiffies``.  One
parameter is fitted (the probe time, to the 23.16 s); ``t=2101`` follows from
HZ=100 and CONFIG_RCU_CPU_STALL_TIMEOUT=21 through the detector's rules in
:mod:`kenv.kernel.core`.  The preemption model is ``none`` by default and
selectable: on ``full``/``rt`` the same spin is preemptible and reports
nothing.
"""

from ..drivers.hwrng import Bcm2835Params
from ..kernel.core import SchedCosts
from ..sim.engine import NSEC_PER_SEC, NSEC_PER_USEC
from .base import Fitted, Platform

HWRNG = Bcm2835Params(
    # Measured, not fitted: rngd on a Raspberry Pi 1 (BCM2835) reported an
    # "HRNG source speed" of avg 709.100 Kibit/s; 709.1 * 1024 / 32 words/s.
    word_rate_hz=22_691,
    # Not fitted here: the same RNG block (compatible "brcm,bcm2835-rng") as
    # the rpi3bplus, whose fitted depth (5 words) is reused.  No kernelci
    # figure depends on it.
    fifo_words=5,
    # FITTED to the report's stall time (23.16 s): the detector reports at
    # the first tick after gp_start + 21 * HZ jiffies, gp_start being the
    # tick after the kthread's non-preemptible stretch begins.  Every start in
    # jiffy 214 (2.140 s .. 2.150 s) gives a report at 23.160 s, t=2101;
    # 23.16 s - 21.01 s = 2.15 s is the end of that window, we take its middle.
    probe_ns=2_145_000 * NSEC_PER_USEC,
    # Assumed (a lower bound read off the report, not a fit): the FIFO was
    # still empty when the stall was reported at 23.16 s, 21 s after the
    # kthread began to spin.  Why the generator produced nothing is not known
    # (the report does not say); we let it start at 30 s.  Any value above
    # 23.17 s gives the same stall figures.
    silent_until_ns=30 * NSEC_PER_SEC,
    # Estimates for a 700 MHz ARM1176 (not fitted; no figure depends on them).
    rng_readl_ns=250,
    copy_chunk_ns=1_000,
    # As rpi3bplus: a warm-up number is taken to be one generator bit.
    warmup_bits_per_number=1,
)

PLATFORM = Platform(
    name="bcm2835-kernelci",
    description="kernelci BCM2835 board (1x ARM1176JZF-S 700 MHz, arm32), bcm2835_defconfig",
    arch="arm",
    nr_cpus=1,                 # BCM2835: a single ARM1176JZF-S
    hz=100,                    # arch/arm Kconfig default HZ_100; t=2101 at the 21 s timeout confirms it
    preempt="none",            # bcm2835_defconfig sets no CONFIG_PREEMPT*
    kernel_version="6.0 (linux-next, 2022)",
    # Estimates (not fitted): the rpi3bplus costs scaled ~2.5x for a 700 MHz
    # single-issue core.  No kernelci figure depends on them.
    sched=SchedCosts(wakeup_ns=20_000, context_switch_ns=10_000),
    smp_cache_bytes=32,        # CONFIG_ARM_L1_CACHE_SHIFT=5 on ARMv6: RNG_BUFFER_SIZE = 32
    long_bits=32,
    hwrng=HWRNG,
    fitted=(
        Fitted("hwrng.probe_ns", "kernelci report: rcu_sched self-detected stall at 23.16 s after boot"),
    ),
    sources=(
        "kernelci boot report on BCM2835 (kernel-notes section 3): 'rcu_sched self-detected stall "
        "on CPU' at 23.16 s, t=2101 jiffies, hwrng kthread in bcm2835_rng_read",
        "commit 96cb9d055445 'hwrng: bcm2835 - use hwrng_msleep() instead of cpu_relax()'",
        "kernel/rcu/Kconfig.debug: CONFIG_RCU_CPU_STALL_TIMEOUT default 21",
        "arch/arm/configs/bcm2835_defconfig; arch/arm/Kconfig (HZ_100 default)",
        "rngd statistics on a Raspberry Pi 1 (vk5tu.livejournal.com/43059.html): "
        "HRNG source speed avg 709.100 Kibit/s",
    ),
)
