"""ftrace text in the shape of ``trace-cmd report -t``.

One section per simulated machine (``cpus=N`` as trace-cmd prints it), then
one line per event, in time order::

              dd-135   [002] 121.234568123: sched_switch:        prev_comm=dd prev_pid=135 prev_prio=120 prev_state=S ==> next_comm=swapper/2 next_pid=0 next_prio=120

``task-pid [cpu] timestamp: event: fields``: the task is the one current on
that CPU (``<idle>-0`` when none); the timestamp is seconds since the
simulated boot with nanoseconds.  Event names and field layouts are the
kernel's where a tracepoint exists: ``sched_switch``, ``sched_wakeup``,
``sched_process_exit``, ``irq_handler_entry``/``irq_handler_exit``,
``local_timer_entry``/``local_timer_exit`` (the hrtimer interrupt),
``softirq_entry``/``softirq_exit`` (``vec=N [action=NAME]``),
``timer_start``, ``timer_expire_entry``/``timer_expire_exit``,
``workqueue_queue_work``, ``workqueue_execute_start``/``_end``.  What has no
tracepoint (crng init, the fast-pool mix, RCU stall reports, BUGs, qperf's
aggregated round trips, environment steps) is a ``bprint`` line, as a
``trace_printk()`` would be.

Simulator notes: IRQ numbers are assigned per machine in first-seen order
from 24 (the simulated devices have no real numbers); pointers (``timer=``,
``work struct=``) are stable per-run numbers, not addresses; ``sched_wakeup``
is printed on the target CPU (the waker's CPU is not modelled); ``timer_start``
adds ``bucket_expiry=`` (the jiffy ``calc_index()`` rounded the expiry to);
counters and the non-preemptible stretches appear in the perfetto format only.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Iterator, TextIO

from .common import ENV_MACHINE, SLICE_RANK, TraceData, Window, fmt_s, norm_track

#: enum softirq numbers (include/linux/interrupt.h)
SOFTIRQ_VEC = MappingProxyType({"HI": 0, "TIMER": 1, "NET_TX": 2, "NET_RX": 3, "BLOCK": 4, "IRQ_POLL": 5,
               "TASKLET": 6, "SCHED": 7, "HRTIMER": 8, "RCU": 9})
LOCAL_TIMER_VECTOR = 236
FIRST_IRQ = 24


def _ptr(ref: Any) -> str:
    try:
        return f"{0xffff888000000000 + int(ref) * 0x40:016x}"
    except (TypeError, ValueError):
        return str(ref)


def _kv(args: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in args.items())


class _Machine:
    def __init__(self) -> None:
        self.irqs: dict[str, int] = {}

    def irq(self, name: str) -> int:
        n = self.irqs.get(name)
        if n is None:
            n = self.irqs[name] = FIRST_IRQ + len(self.irqs)
        return n


def _slice_events(m: _Machine, cat: str, name: str, start: int, end: int, args: dict):
    """(t, phase, sub, event, fields) for a slice's entry and exit.

    At one timestamp: exits of what ended (phase 0), entries (1), point
    events (2); the exit of a zero-length slice comes after all of them (3),
    so what its handler did is printed inside it."""
    r = SLICE_RANK.get(cat, 9)
    ex = 0 if end > start else 3
    if cat == "hardirq":
        if name == "hrtimer":
            f = f"vector={LOCAL_TIMER_VECTOR}"
            return [(start, 1, r, "local_timer_entry", f), (end, ex, -r, "local_timer_exit", f)]
        n = m.irq(name)
        return [(start, 1, r, "irq_handler_entry", f"irq={n} name={name}"),
                (end, ex, -r, "irq_handler_exit", f"irq={n} ret=handled")]
    if cat == "softirq":
        vec = str(args.get("vec") or name.split(":", 1)[-1])
        f = f"vec={SOFTIRQ_VEC.get(vec, 10)} [action={vec}]"
        return [(start, 1, r, "softirq_entry", f), (end, ex, -r, "softirq_exit", f)]
    if cat == "timer":
        p = _ptr(args.get("timer"))
        return [(start, 1, r, "timer_expire_entry",
                 f"timer={p} function={args.get('function', name)} now={args.get('now', '')} "
                 f"baseclk={args.get('baseclk', '')}"),
                (end, ex, -r, "timer_expire_exit", f"timer={p}")]
    if cat == "aggregated":
        return [(start, 2, 0, "bprint",
                 f"qperf_fast_forward: {name}: rtt={args.get('rtt_ns')}ns msg_size={args.get('msg_size')} "
                 f"until {fmt_s(end)}")]
    return []


def _instant_event(name: str, args: dict, cpu: int = 0) -> tuple[str, str] | None:
    """(event, fields) for an instant; None if it prints nothing itself."""
    a = args
    if name == "sched_switch":
        return ("sched_switch",
                f"prev_comm={a['prev_comm']} prev_pid={a['prev_pid']} prev_prio={a['prev_prio']} "
                f"prev_state={a['prev_state']} ==> next_comm={a['next_comm']} next_pid={a['next_pid']} "
                f"next_prio={a['next_prio']}")
    if name == "sched_wakeup":
        return ("sched_wakeup", f"comm={a['comm']} pid={a['pid']} prio={a['prio']} "
                                f"target_cpu={int(a['target_cpu']):03d}")
    if name == "sched_migrate_task":
        return ("sched_migrate_task", f"comm={a['comm']} pid={a['pid']} prio={a['prio']} "
                                      f"orig_cpu={a['orig_cpu']} dest_cpu={a['dest_cpu']}")
    if name == "sched_process_exit":
        return ("sched_process_exit", f"comm={a['comm']} pid={a['pid']} prio={a['prio']}")
    if name == "timer_start":
        lvl, be = int(a.get("level", 0)), int(a.get("bucket_expiry", 0))
        idx = lvl * 64 + ((be >> (3 * lvl)) & 63)
        return ("timer_start",
                f"timer={_ptr(a.get('timer'))} function={a.get('function')} expires={a.get('expires')} "
                f"[timeout={a.get('timeout')}] bucket_expiry={be} cpu={a.get('cpu')} idx={idx} flags=")
    if name == "workqueue_queue_work":
        return ("workqueue_queue_work",
                f"work struct={_ptr(a.get('work'))} function={a.get('function')} "
                f"workqueue={a.get('workqueue')} req_cpu={a.get('req_cpu')} cpu={a.get('cpu')}")
    if name in ("workqueue_execute_start", "workqueue_execute_end"):
        return (name, f"work struct {_ptr(a.get('work'))}: function {a.get('function')}")
    if name in ("crng init done", "crng init early"):
        return ("bprint", f"credit_init_bits: random: {name}")
    if name == "mix_interrupt_randomness":
        return ("bprint", f"mix_interrupt_randomness: {_kv(a)}")
    if name == "rcu_stall":
        return ("bprint", f"print_cpu_stall: rcu: INFO: rcu_sched self-detected stall on CPU: "
                          f"{cpu}-....: (t={a.get('t_jiffies')} jiffies) comm: {a.get('comm')}")
    if name == "BUG":
        return ("bprint", f"BUG: {a.get('msg', '')}")
    if name == "env_step":
        return ("bprint", f"kenv_env_step: {_kv(a)}")
    return ("bprint", f"{name.replace(' ', '_')}: {_kv(a)}")


def ftrace_lines(data: TraceData, window: Window | None = None,
                 header: list[str] | None = None) -> Iterator[str]:
    """Lines of the report.  ``data`` should be built without a window (the
    current task of each CPU is replayed from the start); ``window`` picks
    the lines printed."""
    window = window or Window()
    yield "# kenv trace: ftrace text in the shape of `trace-cmd report -t` (seconds since boot, ns)"
    for h in header or ():
        yield f"# {h}"
    env_events = [(t, seq, name, args) for cat, track, name, t, args, seq in data.instants
                  if norm_track(track)[0] == ENV_MACHINE and name.startswith("env_")]
    for mach in data.kernel_machines:
        mm = _Machine()
        items: list[tuple] = []   # (t, phase, sub, seq, cpu, event, fields, switch)
        for cat, track, name, start, end, args, seq in data.slices:
            machine, cpu = norm_track(track)
            if machine != mach.name:
                continue
            for t, ph, sub, ev, fields in _slice_events(mm, cat, name, start, end, args):
                items.append((t, ph, sub, seq, cpu, ev, fields, None))
        for cat, track, name, t, args, seq in data.instants:
            machine, cpu = norm_track(track)
            if machine != mach.name:
                continue
            r = _instant_event(name, args, cpu)
            if r is None:
                continue
            sw = (args["prev_comm"], args["prev_pid"], args["next_comm"], args["next_pid"]) \
                if name == "sched_switch" else None
            items.append((t, 2, 0, seq, cpu, r[0], r[1], sw))
        for t, seq, name, args in env_events:
            items.append((t, 2, 0, seq, 0, "bprint", f"kenv_{name}: {_kv(args)}", None))
        items.sort(key=lambda e: (e[0], e[1], e[2], e[3]))
        yield ""
        yield f"# machine: {mach.label()}"
        yield f"cpus={len(mach.cpu_list)}"
        cur: dict[int, tuple[str, int]] = {}
        for t, _, _, _, cpu, ev, fields, sw in items:
            if sw is not None:
                comm, pid = sw[0], sw[1]
                if pid == 0:
                    comm = "<idle>"
                cur[cpu] = ("<idle>", 0) if sw[3] == 0 else (sw[2], sw[3])
            else:
                comm, pid = cur.get(cpu, ("<idle>", 0))
            if window.has(t):
                yield f"{comm[:16]:>16}-{pid:<5} [{cpu:03d}] {fmt_s(t)}: {ev + ':':<20} {fields}"


def write_ftrace(data: TraceData, f: TextIO, window: Window | None = None,
                 header: list[str] | None = None) -> int:
    n = 0
    for line in ftrace_lines(data, window, header):
        f.write(line)
        f.write("\n")
        n += 1
    return n


__all__ = ["SOFTIRQ_VEC", "ftrace_lines", "write_ftrace"]
