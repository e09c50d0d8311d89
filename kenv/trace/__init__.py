"""Kernel-style traces of simulated runs: Perfetto/Chrome JSON and ftrace text.

Recording is off unless asked for: the engine's ``recorder`` is None and the
kernel's recording calls are behind one ``if recorder is not None`` test.

Python use::

    from kenv.trace import recording, write_trace
    from kenv.experiments.hwrng_dd import run_hwrng_dd

    with recording() as rec:                 # the first Engine created inside is recorded
        run_hwrng_dd("rpi3bplus", "hwrng_yield", 2000)
    write_trace(rec, "dd.json")              # perfetto (default) or fmt="ftrace"

Command line: ``kenv trace experiment NAME ... --out FILE`` and
``kenv trace env --env ID --policy NAME --steps N --out FILE`` (see
:mod:`kenv.trace.cli`).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterable, Iterator

from ..sim.engine import Recorder
from ..sim.engine import recording as _engine_recording
from .common import (
    ENV_MACHINE, FORMATS, TraceData, Window, atomic_write, check_format, check_out_path,
    parse_window,
)
from .probes import counter_probes


@contextlib.contextmanager
def recording(recorder: Recorder | None = None, *, counters: bool = True) -> Iterator[Recorder]:
    """Record the first Engine created inside the block (see
    :class:`kenv.sim.engine.recording`); with ``counters`` the driver counter
    probes (:mod:`kenv.trace.probes`) are attached meanwhile.  On exit the
    recorder's finish hooks run (closing open counter samples)."""
    with contextlib.ExitStack() as stack:
        if counters:
            stack.enter_context(counter_probes())
        rec = stack.enter_context(_engine_recording(recorder))
        try:
            yield rec
        finally:
            rec.finish()


def episode_kernels(episode: Any, depth: int = 6) -> list:
    """The simulated kernels an environment episode holds (``.k``,
    ``.q.wl.hosts[i].k``, ...), found by walking its attributes, in a
    deterministic order, each once."""
    from ..kernel.core import Kernel

    found: list = []
    seen: set[int] = set()

    def walk(obj: Any, d: int) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, Kernel):
            found.append(obj)
            return
        if d <= 0:
            return
        if isinstance(obj, (list, tuple)):
            if len(obj) <= 16:  # containers of parts (hosts, pairs), not logs
                for x in obj:
                    walk(x, d - 1)
            return
        mod = type(obj).__module__ or ""
        if not mod.startswith("kenv."):
            return
        attrs = getattr(obj, "__dict__", None)
        if attrs is None:
            return
        for v in list(attrs.values()):
            walk(v, d - 1)

    walk(episode, depth)
    return found


def write_trace(rec: Recorder, path: str, fmt: str = "perfetto", window: str | Window | None = None,
                meta: dict | None = None, kernels: Iterable[Any] = ()) -> dict:
    """Write what ``rec`` holds to ``path`` atomically; returns a summary
    (format, path, bytes, events/lines, machines, window)."""
    fmt = check_format(fmt)
    win = parse_window(window)
    path = check_out_path(path)
    meta = dict(meta or {})
    meta.setdefault("generator", "kenv trace")
    meta["window"] = str(win) if (win.start is not None or win.end is not None) else None
    summary: dict = {"format": fmt, "path": path}
    kernels = list(kernels)
    if fmt == "perfetto":
        from .perfetto import write_perfetto

        data = TraceData(rec, win, kernels)

        def write(f):
            summary["events"] = write_perfetto(data, f, meta)
    else:
        from .ftrace import write_ftrace

        data = TraceData(rec, None, kernels)
        header = [f"{k}: " + (" ".join(f"{a}={b}" for a, b in v.items()) if isinstance(v, dict) else str(v))
                  for k, v in meta.items() if v is not None]

        def write(f):
            summary["lines"] = write_ftrace(data, f, win, header)
    summary["bytes"] = atomic_write(path, write)
    summary["machines"] = [m.label() for m in data.kernel_machines]
    summary["window"] = meta["window"]
    return summary


__all__ = [
    "ENV_MACHINE", "FORMATS", "Recorder", "TraceData", "Window", "check_format", "check_out_path",
    "counter_probes", "episode_kernels", "parse_window", "recording", "write_trace",
]
