"""Workloads that change within an episode: phase schedules (issue #31 item 1).

A *phase* is the state of a workload during one step (decision epoch): for
the /dev/hwrng reader, ``reader`` (rngd reading) or ``idle`` (no read(2) in
flight or started).  A *schedule* names a documented pattern of phases; the
scenario field ``reader_phases`` draws one per episode like any other field, and the
schedule's segment lengths are drawn from the episode's generator at reset
(:class:`PhaseSchedule`), so the same seed gives the same phases.  Phases
change only at step boundaries.

Segment lengths are counted in steps and drawn uniformly from the ranges
below: a spread over a few decision epochs, not a measured duration (no
published trace gives rngd's burst lengths on these boards); the pattern is
the documented part.
"""

from __future__ import annotations

import bisect
from types import MappingProxyType

import numpy as np

#: the phases of the /dev/hwrng reader in a step
READER, IDLE = "reader", "idle"

#: Schedules of the /dev/hwrng reader (scenario field ``reader_phases`` of
#: HwrngWait and Kernel with ``phases=True``), each a list of segments
#: (phase, (min steps, max steps)) repeated until the episode ends:
#:
#: * ``none``: a reader throughout (the -v0 workload: an rngd-like loop).
#: * ``rngd``: rng-tools' rngd feeding the kernel: it reads /dev/hwrng in
#:   bursts while the kernel wants entropy and sleeps in ``poll()`` on
#:   /dev/random in between (rngd(8): "--fill-watermark ... feed entropy to
#:   random-device until at least fill-watermark bits of entropy are
#:   available"), so the reader comes and goes.
#: * ``boot``: rngd's start at boot (rng-tools.service, before the crng is
#:   READY): one read burst, then rngd asleep for the rest of the episode.
#: * ``idle``: a board with no user reader of /dev/hwrng (rng-tools not
#:   installed: the hwrng core's own kthread, ``hwrng_fillfn``, is then the
#:   only consumer of the FIFO).
READER_SCHEDULES = MappingProxyType({
    "none": ((READER, (1, 1)),),
    "rngd": ((READER, (2, 16)), (IDLE, (1, 4))),
    "boot": ((READER, (8, 24)), (IDLE, (10**9, 10**9))),
    "idle": ((IDLE, (1, 1)),),
})


#: the phases of the raid6 subsystem's background job in a step
JOB, OFF = "job", "off"

#: Schedules of the background job on the benchmarking CPU (scenario field
#: ``load_phases`` of Raid6Bench and Kernel with ``phases=True``; the job is
#: the scenario's ``load``, so with ``load: none`` they change nothing):
#:
#: * ``none``: the job throughout (the -v0 workload).
#: * ``onoff``: a job that starts and stops, as a systemd timer unit starts a
#:   service that runs and exits (systemd.timer(5): ``OnBootSec=``,
#:   ``OnUnitActiveSec=``; e.g. man-db.timer, logrotate.timer): job for 1-4
#:   steps, off for 1-4, and again.
#: * ``starts``: off for 1-8 steps, then the job for the rest (a timer with
#:   ``OnBootSec=`` firing while modprobe raid6_pq runs at boot).
#: * ``stops``: the job for 1-8 steps, then off for the rest (a job that
#:   was running when modprobe began, and exits).
LOAD_SCHEDULES = MappingProxyType({
    "none": ((JOB, (1, 1)),),
    "onoff": ((JOB, (1, 4)), (OFF, (1, 4))),
    "starts": ((OFF, (1, 8)), (JOB, (10**9, 10**9))),
    "stops": ((JOB, (1, 8)), (OFF, (10**9, 10**9))),
})


#: the phases of qperf's traffic in a step: at the scenario's ``msg_size``,
#: at the next size of the seed's sweep (twice it), or paused (no traffic)
SIZE, NEXT_SIZE, PAUSE = "size", "next_size", "pause"

#: Schedules of qperf's traffic (scenario field ``traffic_phases`` of
#: RandomMix and Kernel with ``phases=True``):
#:
#: * ``none``: ``msg_size`` throughout (the -v0 workload).
#: * ``sweep``: the seed's own run, ``qperf ... -oo msg_size:4K:1024K:*2
#:   tcp_lat`` (seed 000): the episode straddles one step of the sweep --
#:   ``msg_size`` for 1-31 steps, one step without traffic while qperf ends
#:   the test and sets up the next, then twice the size (after 1024K the
#:   sweep is over: no traffic).
#: * ``pauses``: traffic with idle gaps on the NIC (a request/response
#:   service between bursts of requests): ``msg_size`` for 2-8 steps, no
#:   traffic for 1-3, and again.
TRAFFIC_SCHEDULES = MappingProxyType({
    "none": ((SIZE, (1, 1)),),
    "sweep": ((SIZE, (1, 31)), (PAUSE, (1, 1)), (NEXT_SIZE, (10**9, 10**9))),
    "pauses": ((SIZE, (2, 8)), (PAUSE, (1, 3))),
})


class PhaseSchedule:
    """The phase of each step of one episode: ``phase(i)`` for step ``i``
    (0-based; the boot before the first step is in step 0's phase).

    Segments are drawn lazily from ``rng`` (the episode's own generator,
    used for nothing else), in step order, so an episode of any length has a
    schedule and the draws do not depend on how far it is looked ahead."""

    __slots__ = ("name", "_segments", "_rng", "_ends", "_names")

    def __init__(self, name: str, rng: np.random.Generator, schedules=READER_SCHEDULES):
        self.name = name
        self._segments = schedules[name]
        self._rng = rng
        self._ends: list[int] = []     # the step after each drawn segment
        self._names: list[str] = []    # its phase

    def phase(self, i: int) -> str:
        ends = self._ends
        while not ends or ends[-1] <= i:
            phase, (lo, hi) = self._segments[len(ends) % len(self._segments)]
            n = lo if lo == hi else int(self._rng.integers(lo, hi + 1))
            ends.append((ends[-1] if ends else 0) + n)
            self._names.append(phase)
        return self._names[bisect.bisect_right(ends, i)]
