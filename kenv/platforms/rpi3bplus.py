"""Raspberry Pi 3 Model B+: the board of seed 001's measurements.

BCM2837B0, 4x Cortex-A53 at 1.4 GHz, arm64 ``defconfig`` (CONFIG_PREEMPT=y,
CONFIG_HZ=250), linux 6.7 era (the seed patch, hwrng_yield, is v6.7).  The
seed measured ``dd if=/dev/hwrng of=/dev/null count=1 bs=10000`` with three
wait strategies on this board:

    cpu_relax ~138025 B/s, hwrng_msleep(1000) ~13 B/s, hwrng_yield ~2510 B/s

Two parameters are fitted, one to each of two of those figures (see
``fitted``); the third figure (hwrng_msleep) and the timer-wheel behaviour
behind all three come from the kernel rules.
"""

from types import MappingProxyType

from ..drivers.hwrng import Bcm2835Params
from ..kernel.core import SchedCosts
from ..sim.engine import NSEC_PER_MSEC
from .base import Fitted, Platform

HWRNG = Bcm2835Params(
    # FITTED to the seed's cpu_relax figure (~138025 B/s, dd bs=10000): a
    # spinning reader takes each word as it lands, so dd's rate is 4 bytes x
    # this rate (less the 5 words already in the FIFO when dd starts).
    # Cross-check, not a fit: rngd measured ~709 Kibit/s (~22.7 k words/s)
    # from the same RNG block on a BCM2835 (Pi 1, 250 MHz core clock); if the
    # block runs off the core clock (an assumption), the Pi 3B+'s 400 MHz
    # gives ~36 k words/s, within 6% of the fit.
    word_rate_hz=34_420,
    # FITTED to the seed's hwrng_yield figure (~2510 B/s): a reader that
    # sleeps 2 jiffies (8 ms at HZ=250) per wakeup drains a full FIFO each
    # time, 4 bytes x depth / 8 ms = 2500 B/s for 5 words.  The depth is not
    # documented ("a few words", kernel-notes section 3); RNG_STATUS[31:24]
    # only bounds it by 255.
    fifo_words=5,
    # Assumed (no published figure depends on it): bcm2835-rng is a platform
    # driver probed a second or two into boot; the hwrng kthread starts then.
    # dd runs minutes later (see kenv/experiments/hwrng_dd.py).
    probe_ns=1_500 * NSEC_PER_MSEC,
    # Estimate, not fitted: one readl() of an RNG register is an uncached,
    # strongly-ordered read across the VideoCore peripheral bus (~100-200 ns
    # on BCM283x).  The figures are insensitive to it: one rng_dev_read
    # iteration (~1 us) stays far below the 29 us word period.
    rng_readl_ns=150,
    # Estimate, not fitted: mutex_lock/unlock + memcpy + copy_to_user of <= 64 B
    # on a 1.4 GHz A53; same insensitivity argument as rng_readl_ns.
    copy_chunk_ns=300,
    # The generator runs from enable; no silent period on this board.
    silent_until_ns=None,
    # Assumption: a warm-up "number" is one generator bit (RNG_CTRL's enable
    # bit is RBGEN, "random bit generator"), so the 0x40000 numbers take
    # 8192 word periods (~0.24 s).  Only boot-time behaviour depends on it.
    warmup_bits_per_number=1,
)

# --- raid6 (lib/raid6 on arm64: neonx8/x4/x2/x1, int64x8/x4/x2/x1) ----------
# No raid6 boot log of a Pi 3 is at hand; the table is scaled from a published
# Cortex-A57 one.  Only the ranking matters for the choice (neonx8 first); the
# MB/s printed are as uncertain as the scale factor.
from ..drivers.raid6 import (  # noqa: E402  (raid6 block kept apart from the hwrng one)
    ARM64_RAID6_ALGOS, ARM64_RAID6_RECOV, Raid6Params, build_raid6_algos, build_raid6_recov,
    gen_ns_for_mb_s, xor_ns_for_mb_s,
)

#: (gen, xor) MB/s on a Cortex-A57, from Ard Biesheuvel's boot log in commit
#: 0e833e697bcf "md/raid6: delta syndrome for ARM NEON".
_RAID6_A57_MB_S = MappingProxyType({
    "neonx8": (2957, 2232), "neonx4": (2888, 2334), "neonx2": (2528, 1942),
    "neonx1": (1834, 1278), "int64x8": (1773, 1165), "int64x4": (1896, 1321),
    "int64x2": (1343, 1286), "int64x1": (905, 881),
})
#: NEON xor() after/before commit 35129dde88af ("md/raid6: use faster
#: multiplication for ARM NEON delta syndrome", in mainline long before v6.7),
#: measured on a Cortex-A57: 2281/1680, 3362/2286, 3787/3162, 4239/3389.
_RAID6_NEON_XOR_SPEEDUP = MappingProxyType({"neonx1": 2281 / 1680, "neonx2": 3362 / 2286,
                           "neonx4": 3787 / 3162, "neonx8": 4239 / 3389})
#: Assumed: a 1.4 GHz in-order Cortex-A53 runs these loops at 0.4x the A57 of
#: that log (clock ~0.7x, and narrower issue / half-rate 128-bit NEON ops
#: ~0.6x); one factor for all variants, so the ranking is the A57's.
_RAID6_A53_OVER_A57 = 0.4

RAID6 = Raid6Params(
    algos=build_raid6_algos(ARM64_RAID6_ALGOS, {
        name: (gen_ns_for_mb_s(gen * _RAID6_A53_OVER_A57),
               xor_ns_for_mb_s(xor * _RAID6_NEON_XOR_SPEEDUP.get(name, 1.0) * _RAID6_A53_OVER_A57))
        for name, (gen, xor) in _RAID6_A57_MB_S.items()}),
    recov_algos=build_raid6_recov(ARM64_RAID6_RECOV),
    select_setup_ns=60_000,  # assumed: 8 pages + 24 KiB memcpy on a 1.4 GHz A53
    printk_ns=6_000,         # assumed: vprintk_store() into the log buffer on an A53
)

PLATFORM = Platform(
    name="rpi3bplus",
    description="Raspberry Pi 3 Model B+ (BCM2837B0, 4x Cortex-A53 1.4 GHz), arm64 defconfig",
    arch="arm64",
    nr_cpus=4,                 # BCM2837B0: quad Cortex-A53
    hz=250,                    # arm64 defconfig leaves CONFIG_HZ at its Kconfig default, 250
    preempt="full",            # arm64 defconfig: CONFIG_PREEMPT=y
    kernel_version="6.7",      # the seed (hwrng_yield) landed in v6.7
    # Estimates, not fitted: cyclictest on a Raspberry Pi 3 (mainline/Raspbian
    # 4.x kernels, idle system) shows minimum wakeup latencies of ~10 us,
    # i.e. timer IRQ + try_to_wake_up + context switch; split here as 8 + 4 us.
    # No hwrng figure is sensitive to them (they are << one jiffy).
    sched=SchedCosts(wakeup_ns=8_000, context_switch_ns=4_000),
    smp_cache_bytes=64,        # arm64 L1_CACHE_BYTES: RNG_BUFFER_SIZE = 64 bytes
    long_bits=64,
    hwrng=HWRNG,
    raid6=RAID6,  # lib/raid6 NEON/int64 table, assumed (scaled from a Cortex-A57 log): see RAID6
    fitted=(
        Fitted("hwrng.word_rate_hz", "seed 001: dd bs=10000 with cpu_relax ~138025 B/s"),
        Fitted("hwrng.fifo_words", "seed 001: dd bs=10000 with hwrng_yield ~2510 B/s"),
    ),
    sources=(
        "seed 001 (Stefan Wahren, 'hwrng: bcm2835: Fix hwrng throughput regression'): "
        "the three dd figures on a Raspberry Pi 3B+ with arm64/defconfig",
        "arch/arm64/configs/defconfig (CONFIG_PREEMPT=y); kernel/Kconfig.hz (HZ default 250)",
        "drivers/char/hw_random/bcm2835-rng.c, drivers/char/hw_random/core.c (v6.7)",
        "rngd statistics on a Raspberry Pi 1 (vk5tu.livejournal.com/43059.html): HRNG source "
        "speed avg 709.1 Kibit/s -- a cross-check of word_rate_hz only",
    ),
)
