"""x86-avx2: the AVX2 machine whose raid6 ``dmesg`` gen() figures are in kernel-notes §4.

A calibration platform: its gen_syndrome() per-call times are *fitted* to
that machine's boot log (avx2x4 25330, avx2x2 23414, avx2x1 18053, sse2x4
17209, sse2x2 16701, sse2x1 7835 MB/s), so a simulated benchmark on it checks
the kernel's MB/s arithmetic and the window mechanics, nothing more.  The
machine is otherwise undescribed: CPU count, HZ and scheduler costs are
assumptions.  It has no AVX-512 (raid6_have_avx512() is false), so v5.16
benchmarks the six AVX2/SSE2 variants, gen and xor.
"""

from __future__ import annotations

from types import MappingProxyType

from ..drivers.raid6 import (
    X86_64_RAID6_ALGOS, X86_64_RAID6_RECOV, Raid6Params, build_raid6_algos, build_raid6_recov,
    gen_ns_for_mb_s, xor_ns_for_mb_s,
)
from ..kernel.core import SchedCosts
from ..workloads.cyclictest import WakeupLatency
from ..workloads.modprobe import ModprobeParams
from .base import Fitted, Platform

# --- raid6 per-call times --------------------------------------------------
#: Fitted: gen() MB/s of the AVX2 box's dmesg (kernel-notes §4).  Each is
#: turned into ns per gen_syndrome(8 disks, 4 KiB) call by gen_ns_for_mb_s():
#: 24 KiB / (MB/s * 2^20) -- the inverse of the kernel's arithmetic.
DMESG_GEN_MB_S = MappingProxyType({
    "avx2x4": 25330, "avx2x2": 23414, "avx2x1": 18053,
    "sse2x4": 17209, "sse2x2": 16701, "sse2x1": 7835,
})
#: Assumed: xor() prints ~0.75 of gen() (the boot log's xor() lines are not
#: in the notes).  Taken from Ard Biesheuvel's Cortex-A57 log in commit
#: 0e833e697bcf "md/raid6: delta syndrome for ARM NEON" (neonx8 2232/2957 =
#: 0.75, neonx4 0.81, neonx2 0.77, neonx1 0.70); an ARM figure, assumed to
#: carry over to x86.
XOR_OVER_GEN = 0.75
#: Assumed: the int64 variants run at a fraction of sse2x1.  They are never
#: benchmarked on x86_64 (prefer 0 < the SIMD variants' 1) and never chosen;
#: the figure only matters for "the fastest algorithm", which they are not.
INT64_OVER_SSE2X1 = MappingProxyType({"int64x8": 0.55, "int64x4": 0.6, "int64x2": 0.5, "int64x1": 0.3})


def _speeds() -> dict[str, tuple[float, float | None]]:
    sp: dict[str, tuple[float, float | None]] = {}
    for name, mb in DMESG_GEN_MB_S.items():
        sp[name] = (gen_ns_for_mb_s(mb), xor_ns_for_mb_s(mb * XOR_OVER_GEN))
    for name, f in INT64_OVER_SSE2X1.items():
        mb = DMESG_GEN_MB_S["sse2x1"] * f
        sp[name] = (gen_ns_for_mb_s(mb), xor_ns_for_mb_s(mb * XOR_OVER_GEN))
    for n in ("avx512x4", "avx512x2", "avx512x1"):
        sp[n] = (1.0, 1.0)   # not valid on this CPU: never run
    return sp


RAID6 = Raid6Params(
    algos=build_raid6_algos(X86_64_RAID6_ALGOS, _speeds(),
                            invalid=("avx512x4", "avx512x2", "avx512x1")),
    recov_algos=build_raid6_recov(X86_64_RAID6_RECOV, invalid=("avx512x2",)),
    select_setup_ns=20_000,  # assumed: 8 pages allocated, 24 KiB memcpy of raid6_gfmul
    printk_ns=2_000,         # assumed: vprintk_store() into the log buffer
)

PLATFORM = Platform(
    name="x86-avx2",
    description="AVX2 x86_64 box of the kernel-notes raid6 dmesg (calibration platform)",
    arch="x86_64",
    nr_cpus=8,               # assumed: not stated with the dmesg figures
    hz=250,                  # kernel/Kconfig.hz default (HZ_250); the box's HZ is not stated
    preempt="voluntary",     # assumed: distribution default CONFIG_PREEMPT_VOLUNTARY
    kernel_version="5.16",   # the six gen() lines (SSE2 benchmarked next to AVX2) are pre-5.17
    sched=SchedCosts(
        wakeup_ns=1_500,         # assumed: ttwu + exit from C1 on a recent x86 core
        context_switch_ns=1_000,  # assumed: __schedule() + switch_mm on x86, ~1 us
    ),
    raid6=RAID6,
    cyclictest=WakeupLatency(
        hrtimer_irq_ns=1_000,     # assumed: LAPIC timer IRQ entry + hrtimer_interrupt + ttwu
        jitter_mean_ns=800.0,     # assumed: idle-exit / cache jitter, ~1 us scale
        thread_spawn_ns=30_000,   # assumed: pthread_create + affinity + sched_setscheduler
        source="assumed: idle x86 with shallow C-states, cyclictest Min ~2 us / Avg ~3 us",
    ),
    extra={
        "modprobe": ModprobeParams(
            exec_user_ns=2_000_000,    # assumed: exec + libkmod config/modules.dep + read .ko
            load_module_ns=500_000,    # assumed: load_module() of a ~100 KiB module
            exit_user_ns=200_000,      # assumed
            source="assumed",
        ),
        "hz_by_preempt": {},
    },
    fitted=tuple(Fitted(f"raid6.{n}.gen_ns", f"dmesg {n} gen() {mb} MB/s (kernel-notes §4)")
                 for n, mb in DMESG_GEN_MB_S.items()),
    sources=("kernel-notes §4 (dmesg gen() figures)", "lib/raid6/algos.c (v5.16, v5.17)",
             "commit 0e833e697bcf (Cortex-A57 xor/gen ratios)"),
)
