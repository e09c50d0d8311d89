"""Wall time of the hwrng-dd reproduction, against a reference measured in the same process.

    PYTHONPATH=. python benchmarks/bench_hwrng.py [--repeat 3] [--cartpole-steps 20000]

For each case of seed 001's reproduction (the three rpi3bplus dd runs, the
kernelci boot with its RCU stall) and for ``reproduce_rows`` as a whole: the
best of ``--repeat`` wall times, the simulated time and events, and the ratio
to the reference (``--cartpole-steps`` steps of gymnasium's CartPole-v1 with
random actions), so figures from different machines can be compared.  The
target: the whole reproduction in under 10 s of wall time (events scale with
wakeups, not with simulated nanoseconds: hwrng_msleep(1000) simulates ~10
minutes of kernel time).
"""

from __future__ import annotations

import argparse

from _common import best_of, cartpole_reference
from kenv.experiments.hwrng_dd import KERNELCI_SECONDS, reproduce_rows, run_hwrng_dd

CASES = [
    ("rpi3bplus", "cpu_relax", None),
    ("rpi3bplus", "hwrng_yield", None),
    ("rpi3bplus", "hwrng_msleep(1000)", None),
    ("bcm2835-kernelci", "cpu_relax", KERNELCI_SECONDS),
    ("bcm2835-kernelci", "hwrng_yield", KERNELCI_SECONDS),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cartpole-steps", type=int, default=20000)
    args = ap.parse_args()

    ref = min(cartpole_reference(args.cartpole_steps) for _ in range(args.repeat))
    print(f"reference: {args.cartpole_steps} CartPole-v1 steps = {ref:.3f} s")
    print(f"{'case':<46} {'wall s':>8} {'x ref':>7} {'sim s':>9} {'events':>8} {'result':>22}")
    total = 0.0
    for platform, wait, seconds in CASES:
        dt, res = best_of(args.repeat, lambda: run_hwrng_dd(platform, wait, 10000, seconds=seconds))
        total += dt
        if seconds is None:
            what = f"{res.bytes_per_s:.5g} B/s"
        else:
            what = f"{len(res.rcu_stalls)} RCU stall(s)"
        print(f"{platform + ' ' + wait:<46} {dt:>8.3f} {dt / ref:>7.2f} {res.simulated_s:>9.1f} "
              f"{res.events_run:>8} {what:>22}")
    print(f"{'sum of the cases':<46} {total:>8.3f} {total / ref:>7.2f}")
    dt, rows = best_of(args.repeat, lambda: reproduce_rows(0))
    print(f"{'reproduce_rows(0) (' + str(len(rows)) + ' figures)':<46} {dt:>8.3f} {dt / ref:>7.2f}"
          f"   target < 10 s: {'ok' if dt < 10 else 'MISSED'}")


if __name__ == "__main__":
    main()
