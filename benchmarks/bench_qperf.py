"""Wall time of the seed-000 qperf experiment, against a reference measured in the same process.

    PYTHONPATH=. python benchmarks/bench_qperf.py [--repeat 1] [--cartpole-steps 20000]
        [--time 60] [--check-time 0.2]

1. The full seed experiment for one strategy: nine sizes (4K..1024K) x
   ``--time`` s (60, as the seed) of simulated qperf tcp_lat, aggregated mode,
   for ``workqueue`` and for ``timer`` (the slower one to fast-forward: a
   pending mix timer bounds each skip).  Target: under 20 s of wall time each.
2. The exact-vs-aggregated check on a short window (``--check-time`` s per
   size): every round trip simulated vs steady round trips skipped; the
   figures (per-size latency and round trips, mixes, bits credited, crng
   times) must be identical.  Prints both wall times and the speed-up.
3. ``reproduce_rows(0)`` for this experiment (target ~30 s).

Each wall time is also given as a ratio to the reference: ``--cartpole-steps``
steps of gymnasium's CartPole-v1 with random actions.
"""

from __future__ import annotations

import argparse

from _common import best_of, cartpole_reference
from kenv.experiments.qperf_tcp_lat import reproduce_rows, run_qperf_tcp_lat


def figures(r) -> tuple:
    return (tuple((s["msg_size"], s["latency_us"], s["round_trips"]) for s in r.sizes),
            r.mixes, r.bits_credited, r.crng_early_s, r.crng_ready_s, r.bug_count)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--cartpole-steps", type=int, default=20000)
    ap.add_argument("--time", type=float, default=60.0, help="qperf --time per size (seed: 60)")
    ap.add_argument("--check-time", type=float, default=0.2,
                    help="seconds per size for the exact-vs-aggregated check")
    args = ap.parse_args()

    ref = min(cartpole_reference(args.cartpole_steps) for _ in range(max(1, args.repeat)))
    print(f"reference: {args.cartpole_steps} CartPole-v1 steps = {ref:.3f} s")

    print(f"\n1. full seed experiment: 9 sizes x {args.time:g} s simulated, one strategy (aggregated)")
    print(f"{'deferral':<14} {'wall s':>8} {'x ref':>7} {'round trips':>12} {'detailed':>9} "
          f"{'events':>9} {'mean us':>9}   target < 20 s")
    for d in ("workqueue", "timer"):
        dt, r = best_of(args.repeat, lambda: run_qperf_tcp_lat(deferral=d, time_s=args.time,
                                                               baseline=False))
        print(f"{d:<14} {dt:>8.2f} {dt / ref:>7.2f} {r.round_trips:>12,} {r.detailed_round_trips:>9,} "
              f"{r.events_run:>9,} {r.mean_latency_us:>9.2f}   {'ok' if dt < 20 else 'MISSED'}")

    print(f"\n2. exact vs aggregated, 9 sizes x {args.check_time:g} s")
    print(f"{'case':<26} {'exact s':>8} {'agg s':>8} {'speed-up':>9} {'detailed/exact':>15}  figures")
    ok_all = True
    for d, thr in (("workqueue", 1024), ("timer", 1024), ("workqueue", 64), ("timer", 64),
                   ("hardirq", 64), ("schedule_work", 1024)):
        kw = dict(deferral=d, time_s=args.check_time, threshold=thr, baseline=False, seed=1)
        te, e = best_of(1, lambda: run_qperf_tcp_lat(mode="exact", **kw))
        ta, a = best_of(1, lambda: run_qperf_tcp_lat(mode="aggregated", **kw))
        same = figures(e) == figures(a)
        ok_all &= same
        print(f"{d + ' thr ' + str(thr):<26} {te:>8.2f} {ta:>8.3f} {te / ta:>8.0f}x "
              f"{a.detailed_round_trips:>7,}/{e.detailed_round_trips:<7,}  "
              f"{'identical' if same else 'DIFFER'}")
    print(f"all identical: {ok_all}")

    dt, rows = best_of(1, lambda: reproduce_rows(0))
    print(f"\n3. reproduce_rows(0): {dt:.2f} s ({dt / ref:.2f} x ref)   target ~30 s: "
          f"{'ok' if dt < 30 else 'MISSED'}")
    for row in rows:
        print(f"   {row.figure}: simulated {row.simulated:+.4f}, published {row.published:+.2f} "
              f"[{row.low}, {row.high}]")


if __name__ == "__main__":
    main()
