"""Exact skips of steady stretches (docs/fast-forward.md): the hwrng poller's
wait cycles (:mod:`kenv.fastforward.hwrng`) and qperf's steady round trips
(:mod:`kenv.fastforward.qperf`).  Simulator machinery, not kernel code: a
fast-forward changes how many engine events a run takes and nothing else."""
