"""Input checks, the normalised trace model and atomic file output, shared by the writers.

:class:`TraceData` turns what a :class:`~kenv.sim.engine.Recorder` collected
into machines (one per simulated kernel, from its ``kernel_boot`` record or
the tracks seen), CPU tracks, slices, instants and counters, restricted to a
time window.  Tracks are ``(machine, cpu)``; the environment's own track is
``(ENV_MACHINE, 0)``.
"""

from __future__ import annotations

import io
import math
import os
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, BinaryIO, Callable, Iterable, TextIO

from ..errors import ConfigError
from ..schema import check_choice
from ..files import atomic_write as files_atomic_write, check_out_path
from ..sim.engine import NSEC_PER_SEC, Recorder

FORMATS = ("perfetto", "ftrace")

#: the pseudo-machine that carries environment steps (``kenv trace env``)
ENV_MACHINE = "kenv env"

#: the latest window bound (s): a year of simulated time, far past any run
MAX_WINDOW_S = 31_536_000.0
WINDOW_ALLOWED = ("START:END in seconds of simulated time, either side optional "
                  f"(e.g. 120:121.5, 0.01:, :2), with 0 <= START < END <= {MAX_WINDOW_S:.0f}")


def check_format(fmt: object) -> str:
    return check_choice(fmt, "format", FORMATS)


@dataclass(frozen=True)
class Window:
    """A time range in ns; None = open on that side."""

    start: int | None = None
    end: int | None = None

    def __str__(self) -> str:
        def f(t):
            return "" if t is None else f"{t / NSEC_PER_SEC:.9g}"
        return f"{f(self.start)}:{f(self.end)}"

    @property
    def lo(self) -> int:
        return self.start if self.start is not None else -1

    @property
    def hi(self) -> int:
        return self.end if self.end is not None else 1 << 62

    def has(self, t: int) -> bool:
        return self.lo <= t <= self.hi

    def overlaps(self, start: int, end: int) -> bool:
        return end >= self.lo and start <= self.hi


def parse_window(text: object) -> Window:
    """``"START:END"`` (seconds, either side optional) -> :class:`Window`; ConfigError if malformed."""
    if text is None:
        return Window()
    if isinstance(text, Window):
        return text
    if not isinstance(text, str) or text.count(":") != 1:
        raise ConfigError("window", text, WINDOW_ALLOWED)
    a, b = (p.strip() for p in text.split(":"))
    out = []
    for part in (a, b):
        if part == "":
            out.append(None)
            continue
        try:
            v = float(part)
        except ValueError:
            raise ConfigError("window", text, WINDOW_ALLOWED) from None
        if not math.isfinite(v) or not 0 <= v <= MAX_WINDOW_S:   # (v * 1e9 as an int: no overflow)
            raise ConfigError("window", text, WINDOW_ALLOWED)
        out.append(int(round(v * NSEC_PER_SEC)))
    if out[0] is not None and out[1] is not None and out[1] <= out[0]:
        raise ConfigError("window", text, WINDOW_ALLOWED)
    return Window(out[0], out[1])


def atomic_write(path: str, write: Callable[[TextIO], None]) -> int:
    """:func:`kenv.files.atomic_write` of the text ``write`` writes (UTF-8, ``\\n``):
    nothing is left behind on error (an existing ``path`` is untouched).  Returns the
    size written in bytes."""
    path = check_out_path(path)

    def text(f: BinaryIO) -> None:
        t = io.TextIOWrapper(f, encoding="utf-8", newline="\n")
        write(t)
        t.flush()
        t.detach()

    files_atomic_write(path, text, "out")
    return os.path.getsize(path)


# --------------------------------------------------------------------------
# the normalised model
# --------------------------------------------------------------------------

@dataclass
class Machine:
    name: str
    nr_cpus: int | None = None
    hz: int | None = None
    preempt: str | None = None
    cpus: set = field(default_factory=set)

    @property
    def cpu_list(self) -> list[int]:
        c = set(self.cpus)
        if self.nr_cpus:
            c |= set(range(self.nr_cpus))
        return sorted(c)

    def label(self) -> str:
        bits = [b for b in (f"{self.nr_cpus} CPUs" if self.nr_cpus else "",
                            f"HZ={self.hz}" if self.hz else "",
                            f"preempt={self.preempt}" if self.preempt else "") if b]
        return f"{self.name} ({', '.join(bits)})" if bits else self.name


#: slice categories: outer ones first when two start together
SLICE_RANK = MappingProxyType({"env": 0, "aggregated": 1, "task": 2, "nonpreempt": 3, "hardirq": 4, "softirq": 5,
              "timer": 6})
#: interrupt context: takes the CPU from whatever task runs there
INTERRUPT_CATS = ("hardirq", "softirq")


class TraceData:
    """What a Recorder collected, by machine and track, inside ``window``.

    ``slices``: ``[cat, (machine, cpu), name, start, end, args, seq]`` (lists,
    so the writers may trim them); ``instants``: ``(cat, track, name, t,
    args, seq)``; ``counters``: ``(name, series, t, value, machine, seq)``.
    Slices are kept whole if they overlap the window; instants and counters
    only inside it (counters also get their last earlier value at the window
    start, so a counter track does not start blank).
    """

    def __init__(self, rec: Recorder, window: Window | None = None, kernels: Iterable[Any] = ()):
        self.window = window or Window()
        self.machines: dict[str, Machine] = {}
        for k in kernels:
            self._machine(k.name, nr_cpus=k.nr_cpus, hz=k.HZ, preempt=k.preempt)
        w = self.window
        self.slices: list[list] = []
        self.instants: list[tuple] = []
        self.counters: list[tuple] = []
        seq = 0
        for cat, track, name, t, args in rec.instants:
            seq += 1
            if name == "kernel_boot":
                self._machine(track[0], nr_cpus=args.get("nr_cpus"), hz=args.get("hz"),
                              preempt=args.get("preempt"))
                continue
            if w.has(t):
                self._track(track)
                self.instants.append((cat, track, name, t, args, seq))
        for cat, track, name, start, end, args in rec.slices:
            seq += 1
            if w.overlaps(start, end):
                self._track(track)
                self.slices.append([cat, track, name, start, end, args, seq])
        last_before: dict = {}
        for c in rec.counters:
            name, series, t, value = c[:4]
            machine = c[4] if len(c) > 4 else None
            seq += 1
            if machine is not None:
                self._machine(machine)
            key = (machine, name, series)
            if w.start is not None and t < w.start:
                last_before[key] = (name, series, w.start, value, machine, seq)
            elif w.has(t):
                if key in last_before:
                    self.counters.append(last_before.pop(key))
                self.counters.append((name, series, t, value, machine, seq))
        self.counters.extend(last_before.values())
        self.instants.sort(key=lambda e: (e[3], e[5]))
        self.slices.sort(key=lambda s: (s[3], -(s[4] - s[3]), SLICE_RANK.get(s[0], 9), s[6]))
        self.counters.sort(key=lambda e: (e[2], e[5]))

    def _machine(self, name: str, **info: Any) -> Machine:
        m = self.machines.get(name)
        if m is None:
            m = self.machines[name] = Machine(name)
        for k, v in info.items():
            if v is not None and getattr(m, k) is None:
                setattr(m, k, v)
        return m

    def _track(self, track: Any) -> None:
        if isinstance(track, tuple) and len(track) == 2:
            self._machine(track[0]).cpus.add(track[1])
        else:  # a bare cpu number (a recorder fed by older code): one unnamed machine
            self._machine("kernel").cpus.add(track)

    @property
    def kernel_machines(self) -> list[Machine]:
        return [m for m in self.machines.values() if m.name != ENV_MACHINE]

    @property
    def t_first(self) -> int:
        ts = [s[3] for s in self.slices[:1]] + [e[3] for e in self.instants[:1]] + \
             [c[2] for c in self.counters[:1]]
        return min(ts) if ts else 0


def norm_track(track: Any) -> tuple:
    if isinstance(track, tuple) and len(track) == 2:
        return track
    return ("kernel", track)


def fix_nesting(slices: list[list]) -> int:
    """Make the slices of each track nest strictly (a viewer's requirement).

    Interrupt context (hard IRQ, softirq) owns the CPU while it runs: a task,
    non-preemptible or aggregated slice that an interrupt straddles at its
    start begins when the interrupt ends, one straddled at its end ends when
    the interrupt begins (the simulator charges interrupt time to whatever
    runs; these are the few places where a switch falls inside an interrupt).
    Whatever still overlaps its parent after that is clipped to the parent.
    Returns the number of slices changed; ``slices`` is re-sorted in place.
    """
    import bisect

    changed = 0
    by_track: dict = {}
    for s in slices:
        by_track.setdefault(norm_track(s[1]), []).append(s)
    for ss in by_track.values():
        irq = sorted((s[3], s[4]) for s in ss if s[0] in INTERRUPT_CATS and s[4] > s[3])
        starts = [a for a, _ in irq]
        for s in ss:
            if s[0] in INTERRUPT_CATS or s[0] == "timer" or s[0] == "env":
                continue
            a0, b0 = s[3], s[4]
            # an interrupt with a < start < b: start at b
            i = bisect.bisect_left(starts, s[3]) - 1
            if i >= 0 and irq[i][0] < s[3] < irq[i][1]:
                s[3] = irq[i][1]
            # an interrupt with a < end < b: end at a
            i = bisect.bisect_left(starts, s[4]) - 1
            if i >= 0 and irq[i][0] < s[4] < irq[i][1]:
                s[4] = irq[i][0]
            if s[4] < s[3]:
                s[4] = s[3]
            if (s[3], s[4]) != (a0, b0):
                changed += 1
        ss.sort(key=lambda s: (s[3], -(s[4] - s[3]), SLICE_RANK.get(s[0], 9), s[6]))
        stack: list[list] = []
        for s in ss:
            while stack and stack[-1][4] <= s[3]:
                stack.pop()
            if stack and s[4] > stack[-1][4]:
                s[4] = stack[-1][4]
                changed += 1
            stack.append(s)
    slices.sort(key=lambda s: (s[3], -(s[4] - s[3]), SLICE_RANK.get(s[0], 9), s[6]))
    return changed


def fmt_s(t_ns: int) -> str:
    """Seconds with 9 decimals, exact (``trace-cmd report -t`` style)."""
    sign = "-" if t_ns < 0 else ""
    t_ns = abs(int(t_ns))
    return f"{sign}{t_ns // NSEC_PER_SEC}.{t_ns % NSEC_PER_SEC:09d}"


__all__ = [
    "ENV_MACHINE", "FORMATS", "Machine", "TraceData", "Window", "atomic_write", "check_format",
    "check_out_path", "fix_nesting", "fmt_s", "parse_window",
]
