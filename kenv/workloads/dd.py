"""``dd if=INFILE of=/dev/null bs=N count=C``: a user task that reads and times itself.

GNU dd (coreutils ``dd.c``) takes its start time after opening the files,
issues ``read(bs)`` ``count`` times, writes each block to /dev/null (which
costs nothing measurable) and reports ``bytes / elapsed`` with the elapsed time
from the start time to after the last write: the "copied, 3.99 s, 2.5 kB/s"
line.  A read on a character device may return fewer bytes than asked (a
partial record, counted as ``0+1 records in``); /dev/hwrng's
``rng_dev_read`` loops until the whole ``bs`` is filled.

The input is any generator function ``read(task, size) -> bytes read`` (for
/dev/hwrng, :func:`kenv.drivers.hwrng.rng_dev_read`), so this module does not
depend on a particular driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from ..schema import check_int

if TYPE_CHECKING:  # pragma: no cover
    from ..kernel.core import Kernel, Task, TaskBody

ReadFn = Callable[["Task", int], "TaskBody"]


@dataclass
class Dd:
    """One dd run: its parameters and what it measured (times in ns since boot)."""

    infile: str
    bs: int
    count: int
    start_at_ns: int
    start_ns: int | None = None   # dd's start time (first read issued)
    end_ns: int | None = None     # after the last write
    bytes: int = 0
    records_full: int = 0
    records_partial: int = 0
    task: "Task | None" = field(default=None, repr=False)

    @property
    def done(self) -> bool:
        return self.end_ns is not None

    @property
    def elapsed_ns(self) -> int:
        if self.start_ns is None:
            return 0
        end = self.end_ns if self.end_ns is not None else self.task.k.now if self.task else self.start_ns
        return end - self.start_ns

    @property
    def bytes_per_s(self) -> float:
        """dd's rate: bytes copied / elapsed seconds (0 before any time has passed)."""
        el = self.elapsed_ns
        return self.bytes * 1e9 / el if el > 0 else 0.0

    def summary(self) -> str:
        """The three lines GNU dd prints on stderr."""
        recs = f"{self.records_full}+{self.records_partial} records"
        el = self.elapsed_ns / 1e9
        human = f" ({_si(self.bytes)}B, {_iec(self.bytes)}B)" if self.bytes >= 1000 else ""
        return (f"{recs} in\n{recs} out\n"
                f"{self.bytes} bytes{human} copied, {el:g} s, {_si(self.bytes_per_s)}B/s")


def _human(x: float, base: int, units: tuple[str, ...]) -> str:
    """coreutils human_readable() as dd uses it: one decimal below 10, else none."""
    for unit in units:
        if abs(x) < base or unit == units[-1]:
            return (f"{x:.1f} " if abs(x) < 10 else f"{x:.0f} ") + unit
        x /= base
    return f"{x}"  # pragma: no cover


def _si(x: float) -> str:
    return _human(x, 1000, ("", "k", "M", "G"))


def _iec(x: float) -> str:
    return _human(x, 1024, ("", "Ki", "Mi", "Gi"))


def check_dd_args(bs: object, count: object) -> None:
    check_int(bs, "bs", 1, allowed="an integer number of bytes > 0")
    check_int(count, "count", 1, allowed="an integer > 0")


def start_dd(k: "Kernel", read: ReadFn, *, bs: int, count: int = 1, start_at_ns: int,
             infile: str = "/dev/hwrng", comm: str = "dd", cpus=None) -> Dd:
    """Run ``dd if=infile of=/dev/null bs=bs count=count`` as a task from
    ``start_at_ns``; ``cpus``: its affinity (``taskset -c``; None: any CPU)."""
    check_dd_args(bs, count)
    dd = Dd(infile, bs, count, start_at_ns)

    def body(task: "Task") -> "TaskBody":
        dd.start_ns = k.now
        for _ in range(count):
            n = yield from read(task, bs)
            if n <= 0:
                break
            dd.bytes += n
            if n == bs:
                dd.records_full += 1
            else:
                dd.records_partial += 1
            # write(1, buf, n) to /dev/null: write_null() returns n at once.
        dd.end_ns = k.now

    def spawn() -> None:
        dd.task = k.kthread_run(body, comm, cpus_allowed=cpus)

    k.engine.at(start_at_ns, spawn)
    return dd


__all__ = ["Dd", "check_dd_args", "start_dd"]
