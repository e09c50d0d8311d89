"""x86-avx512-32: a 32-CPU x86_64 server with AVX-512, the setting of seed 004.

The seed (Yajun Deng, "lib/raid6: Reduce high latency by using migrate
instead of preempt", Dec 2021, against v5.16-rc) ran ``cyclictest -S -p 95
-d 0 -i 1000 -m`` while ``modprobe raid6_pq`` ran, with
CONFIG_PREEMPT_VOLUNTARY, CONFIG_PREEMPT and CONFIG_PREEMPT_RT kernels.  The
machine is not described; everything below is a documented assumption, or
fitted where said.

The seed's figures do not depend on the per-call times (a window lasts 16
jiffies whatever the algorithm does); they depend on HZ, on the number of
windows (9 SIMD gen + 9 xor on v5.16 with AVX-512, from lib/raid6/algos.c)
and on the preemption rules.
"""

from __future__ import annotations

from ..drivers.raid6 import (
    X86_64_RAID6_ALGOS, X86_64_RAID6_RECOV, Raid6Params, build_raid6_algos, build_raid6_recov,
    gen_ns_for_mb_s, xor_ns_for_mb_s,
)
from ..kernel.core import SchedCosts
from ..workloads.cyclictest import WakeupLatency
from ..workloads.modprobe import ModprobeParams
from . import x86_avx2
from .base import Fitted, Platform

# --- raid6 per-call times --------------------------------------------------
#: Assumed: AVX2 and SSE2 run as on the x86-avx2 box (whose per-call times
#: are fitted to its dmesg); the server's cores are assumed of the same class.
#: Assumed: AVX-512 gen_syndrome() = 1.3x the AVX2 variant with the same
#: unroll.  ZMM doubles the vector width, but load bandwidth and the AVX-512
#: frequency licence of Skylake-SP / Cascade Lake eat much of it; Dirk
#: Mueller's 36dacddbf0bd notes machines where AVX2 even beats AVX-512.
AVX512_OVER_AVX2 = 1.3


def _speeds() -> dict[str, tuple[float, float | None]]:
    base = x86_avx2.DMESG_GEN_MB_S
    r = x86_avx2.XOR_OVER_GEN
    sp: dict[str, tuple[float, float | None]] = {}
    for n, mb in base.items():
        sp[n] = (gen_ns_for_mb_s(mb), xor_ns_for_mb_s(mb * r))
    for unroll in ("x4", "x2", "x1"):
        mb = base["avx2" + unroll] * AVX512_OVER_AVX2
        sp["avx512" + unroll] = (gen_ns_for_mb_s(mb), xor_ns_for_mb_s(mb * r))
    for n, f in x86_avx2.INT64_OVER_SSE2X1.items():
        mb = base["sse2x1"] * f
        sp[n] = (gen_ns_for_mb_s(mb), xor_ns_for_mb_s(mb * r))
    return sp


RAID6 = Raid6Params(
    algos=build_raid6_algos(X86_64_RAID6_ALGOS, _speeds()),
    recov_algos=build_raid6_recov(X86_64_RAID6_RECOV),
    select_setup_ns=20_000,  # assumed: 8 pages allocated, 24 KiB memcpy of raid6_gfmul
    printk_ns=2_000,         # assumed: vprintk_store() into the log buffer
)

PLATFORM = Platform(
    name="x86-avx512-32",
    description="32-CPU x86_64 server with AVX-512 (seed 004: modprobe raid6_pq under cyclictest)",
    arch="x86_64",
    nr_cpus=32,              # assumed: the seed does not describe its machine
    hz=250,                  # kernel/Kconfig.hz default (HZ_250), for none/voluntary/full
    preempt="voluntary",     # the seed's first configuration, CONFIG_PREEMPT_VOLUNTARY
    kernel_version="5.16",   # the seed patch applies to v5.16-rc lib/raid6/algos.c
    sched=SchedCosts(
        wakeup_ns=1_500,          # assumed: ttwu + exit from C1 (deep C-states off for RT tests)
        context_switch_ns=1_000,  # assumed: __schedule() + switch_mm on x86, ~1 us
    ),
    raid6=RAID6,
    cyclictest=WakeupLatency(
        hrtimer_irq_ns=1_000,     # assumed: LAPIC timer IRQ entry + hrtimer_interrupt + ttwu
        jitter_mean_ns=800.0,     # assumed: idle-exit / cache jitter, ~1 us scale
        thread_spawn_ns=30_000,   # assumed: pthread_create + affinity + sched_setscheduler
        source="assumed: idle x86 server, shallow C-states: cyclictest Min ~2 us, Avg ~3 us, "
               "Max ~10 us",
    ),
    extra={
        "modprobe": ModprobeParams(
            exec_user_ns=2_000_000,    # assumed: exec + libkmod config/modules.dep + read .ko
            load_module_ns=500_000,    # assumed: load_module() of a ~100 KiB module
            exit_user_ns=200_000,      # assumed
            source="assumed",
        ),
        # HZ per preemption model when --hz is not given.  PREEMPT_RT at
        # HZ=1000 is inferred from the seed: >16 ms is ~17 jiffies at
        # HZ=1000 (and >67 ms ~17 jiffies at HZ=250); the seed does not say.
        "hz_by_preempt": {"rt": 1000},
    },
    fitted=(
        Fitted("extra.hz_by_preempt['rt'] = 1000",
               "seed 004: latency > 16 ms with CONFIG_PREEMPT_RT (HZ not stated; inferred)"),
    ) + x86_avx2.PLATFORM.fitted,
    sources=("seed 004 (Yajun Deng, Dec 2021)", "lib/raid6/algos.c (v5.16, v5.17)",
             "kernel/Kconfig.hz", "kernel-notes §4 (AVX2 dmesg, via x86-avx2)"),
)
