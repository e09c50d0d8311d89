"""Observation entries declared once.

Each entry of an env's observation, or each group of entries read together,
is one :class:`Obs`: the entries' names (``env.obs_rows``, the rules of
``kenv discover``), what they mean (the docstring's table), their bounds (the
Box), the kernel source they mirror, and how their values are read from the
simulation episode.  An env lists its ``Obs`` in order; the Box bounds, the
observation vector and the docstring table all come from that list
(kenv.envs.doctables writes the table, tests/test_doctables.py checks it).

The declarations shared by several envs are here; an env's own are in its module.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

from ..kernel.core import PREEMPT_MODELS


def one_hot(index: int, n: int) -> list[float]:
    v = [0.0] * n
    if 0 <= index < n:
        v[index] = 1.0
    return v


@dataclasses.dataclass(frozen=True)
class Obs:
    """One observation entry, or a group of entries read together."""

    #: each entry's short name (``env.obs_rows``)
    names: tuple[str, ...]
    #: the docstring table's text: one for the group, or one per entry
    meaning: str | tuple[str, ...]
    #: the entries' values, a list of floats, from the simulation episode
    read: Callable[[Any], list[float]]
    #: the bounds: one for the group, or one per entry (with a meaning per entry)
    low: float | tuple[float, ...] = 0
    high: float | tuple[float, ...] = 1
    #: where the kernel has it (file, function or variable), if it does
    source: str = ""
    #: the value never changes within an episode: read once, after the episode is built
    fixed: bool = False

    def renamed(self, names: tuple[str, ...], meaning: str | tuple[str, ...]) -> Obs:
        """The same entries under another env's names (Kernel-v3's raid6 and hwrng rows)."""
        return dataclasses.replace(self, names=names, meaning=meaning)

    def __post_init__(self):
        for field in ("meaning", "low", "high"):
            v = getattr(self, field)
            if isinstance(v, tuple) and (len(v) != len(self.names) or isinstance(self.meaning, str)):
                raise ValueError(f"{self.names}: one {field}, or one per entry (and then a meaning per entry)")

    def bounds(self) -> list[tuple[float, float]]:
        """(min, max) of each entry."""
        n = len(self.names)
        low = self.low if isinstance(self.low, tuple) else (self.low,) * n
        high = self.high if isinstance(self.high, tuple) else (self.high,) * n
        return list(zip(low, high))


def obs_rows(entries: Sequence[Obs]) -> list[tuple[str, float, float]]:
    """(name, min, max) of each entry."""
    return [(name, lo, hi) for e in entries for name, (lo, hi) in zip(e.names, e.bounds())]


def episode_reader(entries: Sequence[Obs], episode: Any) -> tuple:
    """The parts :func:`observe` joins for ``episode``: the fixed entries' values
    (read now; neighbours joined into one list) and the others' readers."""
    parts: list = []
    for e in entries:
        if not e.fixed:
            parts.append(e.read)
        elif parts and type(parts[-1]) is list:
            parts[-1] = parts[-1] + e.read(episode)
        else:
            parts.append(list(e.read(episode)))
    return tuple(parts)


def observe(parts: tuple, episode: Any) -> list[float]:
    """The episode's observation entries, in order (unclipped)."""
    out: list[float] = []
    for p in parts:
        out += p if type(p) is list else p(episode)
    return out


# ------------------------------------------------------------ shared entries
#: every env: the kernel's configuration
KERNEL_CONFIG = (
    Obs(tuple(f"preempt == {m}" for m in PREEMPT_MODELS), "preemption model one-hot: " + ", ".join(PREEMPT_MODELS),
        lambda ep: one_hot(PREEMPT_MODELS.index(ep.preempt), len(PREEMPT_MODELS)),
        source="CONFIG_PREEMPT_*", fixed=True),
    Obs(("HZ / 1000",), "HZ / 1000", lambda ep: [ep.hz / 1000.0], low=0.1, source="CONFIG_HZ", fixed=True),
)


def platform_one_hot(platforms: tuple[str, ...]) -> Obs:
    """Which of the env's ``platforms`` the episode runs on."""
    return Obs(tuple(f"platform == {p}" for p in platforms), "platform one-hot: " + ", ".join(platforms),
               lambda ep: one_hot(platforms.index(ep.plat.name), len(platforms)), fixed=True)


#: the crng state one-hot (HwrngWaitPhased-v0, KernelBoot-v0)
CRNG_INIT = Obs(("crng_init == CRNG_EMPTY", "crng_init == CRNG_EARLY", "crng_init == CRNG_READY"),
                "``crng_init`` one-hot: CRNG_EMPTY, CRNG_EARLY (128 bits credited), CRNG_READY (256)",
                lambda ep: one_hot(ep.pool.crng_init, 3), source="drivers/char/random.c crng_init")

#: progress of the input pool toward crng READY (HwrngWait, Kernel)
CRNG_PROGRESS = Obs(("crng progress",), "crng progress: credited bits / 256",
                    lambda ep: [min(1.0, ep.pool.init_bits / 256)], source="drivers/char/random.c input_pool.init_bits")

#: what the hwrng driver could read at the step's end (``phases=True``;
#: HwrngSubsystem.state_observation)
HWRNG_STATE = Obs(
    ("RNG_STATUS >> 24 / FIFO depth", "readers in rng_dev_read()", "tasks waiting on reading_mutex / 2",
     "time since the last RNG_DATA read, log10(1 + us) / 7"),
    ("``RNG_STATUS >> 24`` / FIFO depth: words in the FIFO now",
     "readers in ``rng_dev_read()`` (the reader's next read(2) has begun)",
     "tasks asleep on ``reading_mutex`` / 2 (capped at 1)",
     "time since words were last read from ``RNG_DATA``, log10(1 + us) / 7"),
    lambda ep: ep.hw.state_observation(), source="drivers/char/hw_random/bcm2835-rng.c, core.c")

#: the NIC's interrupts and the fast pools' mixes in the last step (``phases=True``;
#: QperfSubsystem.state_observation)
QPERF_STATE = Obs(
    ("NIC interrupts on the qperf CPU last step, log10(1 + per ms) / 3", "fast-pool mixes last step / 4"),
    ("NIC receive interrupts on the client's qperf CPU in the last step (its round trips x the message's "
     "interrupts), log10(1 + per ms) / 3",
     "fast-pool mixes in the last step (both hosts) / 4, capped at 1"),
    lambda ep: ep.q.state_observation(), source="drivers/char/random.c add_interrupt_randomness()")

#: the benchmarking CPU's runqueue (``phases=True``; Raid6Subsystem.state_observation)
RAID6_STATE = Obs(("runqueue length of the modprobe CPU / 4",),
                  "runqueue length of the CPU modprobe runs on / 4 (capped at 1) at the step's end: modprobe, "
                  "the cyclictest thread if woken, the job if running or runnable",
                  lambda ep: ep.r6.state_observation(), source="kernel/sched rq->nr_running")

#: qperf's message size and random.c's mix threshold (RandomMix, Kernel)
QPERF_CONFIG = Obs(("log2(msg_size / 4K) / 8", "threshold == 64"),
                   ("log2(msg_size / 4 KiB) / 8", "mix threshold is 64 (before 534d2eaf1970)"),
                   lambda ep: ep.q.config_features(), fixed=True)

#: the last step's tcp_lat regression (RandomMix, Kernel)
QPERF_REGRESSION = Obs(("previous tcp_lat regression x 5",), "previous step's tcp_lat regression x 5 (capped at 1)",
                       lambda ep: [ep.q.last])

#: the hwrng reader's state (HwrngWait; Kernel renames them).  Only what a reader
#: can know: not whether the generator is warming up or silent (the driver cannot
#: see that either, it polls RNG_STATUS)
HWRNG_NO_BYTE = Obs(("reader has had no byte yet",), "the reader has not had a byte from /dev/hwrng yet",
                    lambda ep: [float(ep.hw.reader_bytes == 0)], source="drivers/char/hw_random/core.c rng_dev_read()")
HWRNG_LAST = Obs(("previous throughput", "previous spin"),
                 ("previous step's throughput component (capped at 1: a step that only reads words already in the "
                  "FIFO lasts under a microsecond, and its rate reaches about 1.5)",
                  "previous step's spin component (capped at 1)"),
                 lambda ep: ep.hw.last)

#: the benchmarking CPU's background job and the benchmark's progress (Raid6Bench;
#: Kernel renames them)
RAID6_LOAD = Obs(("continuous hog on the benchmark CPU", "periodic job on the benchmark CPU"),
                 ("a continuous CPU hog is pinned to the benchmarking CPU",
                  "a periodic job (20 ms every 50 ms) is pinned to it"),
                 lambda ep: ep.r6.load_observation())
RAID6_PROGRESS = Obs(("benchmark progress", "previous worst wakeup (log scale)", "previous window's lost calls"),
                     ("benchmark progress: windows done / 18",
                      "previous step's worst cyclictest wakeup, log10(1 + us) / 6 (up to 1.5)",
                      "share of the previous window's calls lost to preemption"),
                     lambda ep: ep.r6.progress_observation(), high=(1, 1.5, 1),
                     source="lib/raid6/algos.c raid6_choose_gen(); cyclictest")
