"""Chrome trace-event JSON, as Perfetto UI (ui.perfetto.dev) and chrome://tracing open it.

Layout:

* one process (``pid``) per simulated machine, named after its kernel
  (``rpi3bplus``, ``client``/``server`` for qperf's two hosts), and one for
  the environment's steps when there are any;
* one thread (``tid`` = cpu + 1) per CPU that has anything recorded, named ``CPU n``;
* complete events (``"ph": "X"``) for what ran: each task by its kernel name
  (``kworker/3:1H``, ``hwrng``, ``cyclictest``, ``modprobe``,
  ``qperf-client``), ``hardirq: NAME``, ``softirq: VEC`` (by vector), the
  timer callbacks inside TIMER softirq, the non-preemptible stretches
  (``preempt_disable`` sections on full/rt; on none/voluntary the stretch of
  kernel code with no preemption point) and the aggregated stretches of the
  qperf message stream (``qperf: N round trips (aggregated)``);
* instant events (``"ph": "i"``): ``sched_wakeup``, ``timer_start``,
  ``timer expired``, ``workqueue_queue_work``, ``mix scheduled``,
  ``mix_interrupt_randomness``, ``crng init done``, ``RCU stall``, ``BUG``,
  environment steps;
* counters (``"ph": "C"``): runnable tasks per CPU, credited entropy bits of
  the input pool, words in the bcm2835 FIFO;
* ``process_name``/``thread_name`` (and sort index) metadata events.

Timestamps are microseconds with three decimals (the simulator's
nanoseconds, exactly); events are written sorted by ``ts``, so within each
track they never go backwards, and slices nest strictly (see
:func:`~kenv.trace.common.fix_nesting`).  The top-level ``otherData`` says
what was run and with which window.
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterator, TextIO

import numpy as np

from .common import ENV_MACHINE, TraceData, fix_nesting, norm_track

SOFTIRQ_LABEL = "softirq: {}"


def _us(t_ns: int) -> float:
    return round(t_ns / 1000.0, 3)


def _jsonable(v: Any) -> Any:
    if isinstance(v, (bool, str, int)) or v is None:
        return v
    if isinstance(v, (float, np.floating)):
        v = float(v)
        return v if math.isfinite(v) else None  # JSON has no NaN/inf
    if isinstance(v, np.integer):
        return int(v)
    return str(v)


def _args(d: dict) -> dict:
    return {k: _jsonable(v) for k, v in d.items() if v is not None}


def slice_label(cat: str, name: str, args: dict) -> str:
    if cat == "hardirq":
        return f"hardirq: {name}"
    if cat == "softirq":
        return SOFTIRQ_LABEL.format(args.get("vec") or name.split(":", 1)[-1])
    if cat == "timer":
        return f"timer: {name}"
    return name


def instant_label(name: str, args: dict) -> str:
    if name == "rcu_stall":
        return "RCU stall"
    return name


class _Ids:
    def __init__(self, data: TraceData):
        self.pid: dict[str, int] = {}
        for m in data.machines.values():
            if m.name != ENV_MACHINE:
                self.pid[m.name] = len(self.pid) + 1
        if ENV_MACHINE in data.machines:
            self.pid[ENV_MACHINE] = len(self.pid) + 1

    def of(self, track: Any) -> tuple[int, int]:
        machine, cpu = norm_track(track)
        return self.pid[machine], int(cpu) + 1


def perfetto_events(data: TraceData, meta: dict | None = None) -> Iterator[dict]:
    """The events of ``data`` (metadata first, then everything sorted by ts)."""
    nesting_fixes = fix_nesting(data.slices)
    if meta is not None:
        meta["nesting_fixes"] = nesting_fixes
    ids = _Ids(data)
    for m in data.machines.values():
        pid = ids.pid[m.name]
        pname = "kenv env: steps" if m.name == ENV_MACHINE else m.label()
        yield {"ph": "M", "name": "process_name", "ts": 0, "pid": pid, "tid": 0, "args": {"name": pname}}
        yield {"ph": "M", "name": "process_sort_index", "ts": 0, "pid": pid, "tid": 0,
               "args": {"sort_index": pid}}
        # the CPUs with something recorded (a 96-CPU host would otherwise show 90 empty tracks)
        cpus = sorted(m.cpus) or [0]
        for cpu in cpus:
            tname = "steps" if m.name == ENV_MACHINE else f"CPU {cpu}"
            yield {"ph": "M", "name": "thread_name", "ts": 0, "pid": pid, "tid": cpu + 1,
                   "args": {"name": tname}}
            yield {"ph": "M", "name": "thread_sort_index", "ts": 0, "pid": pid, "tid": cpu + 1,
                   "args": {"sort_index": cpu}}
    out: list[tuple[int, int, dict]] = []   # (t_ns, order, event)
    for cat, track, name, start, end, args, seq in data.slices:
        pid, tid = ids.of(track)
        ev = {"ph": "X", "cat": cat, "name": slice_label(cat, name, args), "ts": _us(start),
              "dur": _us(end - start), "pid": pid, "tid": tid}
        if args:
            ev["args"] = _args(args)
        out.append((start, 0, ev))
        if cat == "timer":
            out.append((start, 1, {"ph": "i", "s": "t", "cat": "timer", "name": "timer expired",
                                   "ts": _us(start), "pid": pid, "tid": tid,
                                   "args": _args({"function": name, **args})}))
    for cat, track, name, t, args, seq in data.instants:
        if name == "sched_switch":
            continue  # the task slices show the switches
        pid, tid = ids.of(track)
        ev = {"ph": "i", "s": "t", "cat": cat, "name": instant_label(name, args), "ts": _us(t),
              "pid": pid, "tid": tid}
        if args:
            ev["args"] = _args(args)
        out.append((t, 1, ev))
        fn = args.get("function")
        if fn == "mix_interrupt_randomness" and name in ("workqueue_queue_work", "timer_start"):
            via = "workqueue" if name == "workqueue_queue_work" else "timer"
            out.append((t, 1, {"ph": "i", "s": "t", "cat": "random", "name": "mix scheduled",
                               "ts": _us(t), "pid": pid, "tid": tid,
                               "args": _args({"via": via, **args})}))
    last: dict = {}
    for name, series, t, value, machine, seq in data.counters:
        pid = ids.pid.get(machine if machine is not None else "kernel", 1)
        key = (pid, series, name)
        if last.get(key) == value:
            continue
        last[key] = value
        out.append((t, 2, {"ph": "C", "name": str(series), "ts": _us(t), "pid": pid, "tid": 0,
                           "args": {str(name): _jsonable(value)}}))
    out.sort(key=lambda e: (e[0], e[1]))
    for _, _, ev in out:
        yield ev


def write_perfetto(data: TraceData, f: TextIO, meta: dict | None = None) -> int:
    """Write ``{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": meta}``;
    one event per line.  Returns the number of events."""
    meta = dict(meta or {})
    events = perfetto_events(data, meta)
    f.write('{"displayTimeUnit": "ns",\n"traceEvents": [\n')
    n = 0
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
    for ev in events:
        if n:
            f.write(",\n")
        f.write(dumps(ev))
        n += 1
    meta["events"] = n
    f.write("\n],\n\"otherData\": ")
    f.write(json.dumps({k: _jsonable(v) if not isinstance(v, (dict, list)) else v
                        for k, v in meta.items()}, ensure_ascii=False, default=str))
    f.write("}\n")
    return n


__all__ = ["perfetto_events", "write_perfetto"]
