"""qperf ``tcp_lat`` over IPoIB: the workload of seed 000.

``qperf <server> -oo msg_size:4K:1024K:*2 tcp_lat``: one TCP connection, the
client writes ``msg_size`` bytes, the server reads them all and writes them
back, the client reads them all, and so on for ``--time`` seconds per size.
qperf reports ``latency = elapsed / (messages received by both sides)``,
i.e. RTT / 2.

What is simulated, per host (the client X7 box and the server, both running
the kernel under test):

* **The NIC** (:class:`NicParams`): an IPoIB datagram-mode interface on a
  ConnectX-3 (mlx4) at 4X QDR.  A message of ``S`` bytes is
  ``ceil(S / MSS)`` packets, ``wire_ns`` apart.  NAPI: the hard IRQ schedules
  the poll; the poll drains the receive CQ and re-arms the interrupt when it
  is empty.  IPoIB sets no CQ moderation by default, so the packets per
  interrupt follow from the race between the two: while the CPU takes
  ``irq_ns`` for an interrupt, ``irq_ns / wire_ns`` more packets arrive, and
  the poll gains ``wire_ns - rx_pkt_ns`` per packet, so a poll cycle covers
  ``B = ceil(irq_ns / (wire_ns - rx_pkt_ns))`` packets (all of them if the
  softirq cannot keep up with the wire).  Every interrupt goes through
  add_interrupt_randomness() on the CPU that takes it.
* **qperf** on the interrupted CPU (the client under ``numactl -m0 -N0`` on
  node 0; we pin it to the CPU that takes the IPoIB interrupt, where the
  scheduler's wake_affine puts a task woken by that CPU's softirq): a task
  of the kernel core that blocks in read(), copies what the softirq
  delivered, and writes the reply.
* **The deferred mix** (kenv.drivers.random): kworker wakeups, timers and
  the hard-IRQ mix run through the kernel core (try_to_wake_up, CFS wakeup
  preemption, context switches, TIMER softirq at the tick).

The regression mechanism (:class:`HostStackParams`): a kworker that runs on
the CPU of the latency-critical path costs, mechanically, a wakeup, a context
switch in, the mix, a context switch out (all from the kernel core with the
platform's SchedCosts) -- a few microseconds, far too small on its own for
~10% at one mix per 1024 interrupts.  What it does *afterwards* to the critical
path was never measured publicly; kenv models it as a refill the next piece
of receive work (the NET_RX softirq) and the next run of qperf each pay when
a task other than qperf ran on their CPU since they last ran there
(``resume_refill_ns``, fitted to the ~10% figure; see the platform file).
The timer deferral runs the mix inside TIMER_SOFTIRQ at the next tick with no
task switch, so nothing is refilled.  (A kworker wakeup that sets
need_resched during NET_RX would also make __do_softirq() hand pending work
to ksoftirqd, but on this NIC the softirq drains the CQ faster than the wire
fills it, so no NET_RX work is pending at the restart check and the
hand-off never happens; it is not modelled.)

``schedule_work`` regresses as much as ``workqueue`` here, by the kernel
core's CFS rules rather than by a constant of its own: a kworker woken after
a sleep is placed ``sched_latency / 2`` (12 ms with 8+ CPUs) behind
``min_vruntime`` (GENTLE_FAIR_SLEEPERS), more than the wakeup granularity of a
nice-0 wakee (4 ms), so the nice-0 kworker preempts qperf just as the nice -20
one does (on PREEMPT_VOLUNTARY both at qperf's next preemption point), and
either way a task other than qperf has run on the CPU.

Speed: the message stream is *aggregated*.  Each message is a handful of
kernel events (the first and last interrupt of its NAPI stream, its copy and
its reply).  The CPU time of the interrupts in between is charged with the
first one (the softirq keeps up with the wire, so only the last batch is on
the critical path); they are counted in bulk, with the mix rules evaluated at
each one's own arrival time: the interrupt that triggers a mix becomes an
event of its own, and a deferred mix first counts every interrupt that has
arrived so that it credits them.  Between rare events (a mix trigger, a pending mix timer, a
kworker, a refill owed) whole round trips are skipped arithmetically: the
steady round trip is measured in detail once per size, and a fast-forward
adds ``k`` times its effect (time, interrupts counted, CPU time and vruntime
of qperf) in one step, where ``k`` is computed from the fast pool state so
that the next mix trigger falls in the first round trip simulated in detail
again.  The round trip after a kworker ran, which pays the refills it left owed
and is otherwise clean, is learned the same way (per set of refills owed, two
alike) and replayed when nothing rare can happen in it.  So is the round trip
that holds the interrupt scheduling a workqueue mix, per deferral and index of
that interrupt in the message on each host and refills owed at its start: it
is replayed as the last round trip of a fast-forward (or as one on its own,
after a kworker's round trip) -- the interrupt counted at its time, at the time the
kworker ran its work that kworker's CPU time, switches and vruntime (placed by
the sleeper credit, as when it was learned, or early in a boot at its own
vruntime when that decides nothing differently) and mix_interrupt_randomness()
itself, at the end the refills left owed -- when no timer is due on either CPU,
the count rule (not the HZ rule) triggers, and before the engine's ``until``
(the next step may change the deferral).  A timer-deferred mix whose TIMER
softirq steals from qperf's own run (not an interrupt, a wakeup or a switch,
and no interrupt of that host arriving until the run's end) only delays
everything after it: that round trip is replayed as the steady one that much
longer; one that fires in the NAPI poll of a message's first batches delays the
message's last interrupt handler by what the poll's slack does not absorb
(checked in detail once per poll stretch); one inside other stretches (a hard
IRQ, a softirq, a context switch) delays what follows by what a detailed round
trip showed there, per host and set of stretches, once a second one agrees.
A fast-forward goes on past its last rare round trip -- the refill round trip
after a trigger one, then steady round trips up to the next mix -- instead of
ending there, and a trigger interrupt and the mix it schedules (the kworker's
run, or the timer's expiry at its tick) are one event when both fall inside
the slice.  What a run learned (a :class:`QperfLearned`, keyed by the machine
and the size, owned by the simulation and passed down explicitly: an
environment keeps one across its episodes, an experiment run makes its own)
starts the next runs of the same machine and size that share it, and the
latency reference of the environments comes from :func:`steady_round_trip`,
so no figure depends on what ran before.  ``mode="exact"`` turns the fast-forward off (every
round trip is simulated); the test and the benchmark check that both modes give
the same figures.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..drivers.random import FAST_POOL_MIX_THRESHOLD, MIX_INFLIGHT, IrqRandomness
from ..errors import ConfigError
from ..kernel.core import BLOCK, NICE_0_LOAD, TASK_SLEEPING, Kernel, Run, Task, TaskBody
from ..kernel.workqueue import get_pool, system_highpri_wq, system_wq
from ..sim.engine import NSEC_PER_MSEC, Engine

if TYPE_CHECKING:  # pragma: no cover
    from ..platforms.base import Platform

#: run_slice(): the client's t_end (it never stops) and the most round trips one
#: fast-forward skips (the HZ rule bounds them anyway: a mix at least every second)
NEVER = 1 << 62
MAX_JUMP_ROUND_TRIPS = 1 << 32
#: QperfPair._refills_owed() of a clean state: no endpoint owes a refill
NO_REFILLS = ((False, False), (False, False))
#: a round trip's deltas (_state) on one host when there is no such round trip
_NO_DELTAS = (0,) * 7

#: tables kept per QperfLearned (one per machine, CPU and message size; the
#: steady round trips of steady_round_trip() likewise): past this many the
#: least recently used one is forgotten (measured again when it comes back).
#: RandomMix-v0's and Kernel-v0's scenario fields allow 4 preemption models
#: x 4 HZ x 9 sizes = 144 machines and sizes on x86-ib40g.
MAX_QPERF_TABLES = 64


def _new_table() -> dict:
    return {"refill": {}, "trigger": {}, "tick": {}, "tick_inside": {}}


class QperfLearned:
    """The round trips one simulation has measured (the steady one with its
    busy stretches, the refill, trigger and tick round trips), per machine,
    CPU and message size (:func:`_machine_key`): they are a function of those,
    so a later run of the same machine starts with them instead of measuring
    them again; and :func:`steady_round_trip`'s answers.  Owned by whoever
    runs the simulation (an environment keeps one across its episodes, an
    experiment run makes its own) and passed down to :class:`QperfTcpLat`;
    at most ``max_tables`` of each, the least recently used forgotten first."""

    __slots__ = ("_tables", "_steady_rtt", "max_tables")

    def __init__(self, max_tables: int = MAX_QPERF_TABLES):
        self._tables: OrderedDict[tuple, dict] = OrderedDict()
        self._steady_rtt: OrderedDict[tuple, int] = OrderedDict()
        self.max_tables = max_tables

    def table(self, key: tuple) -> dict:
        """The round trips learned for ``key`` (new, empty tables if none)."""
        return _lru_get(self._tables, key, _new_table, self.max_tables)

    def tables(self) -> list[dict]:
        """The tables kept, least recently used first."""
        return list(self._tables.values())

    def steady_rtt(self, key: tuple, measure) -> int:
        """The steady round trip of ``key``: the one kept, else ``measure()``'s."""
        return _lru_get(self._steady_rtt, key, measure, self.max_tables)

    def clear(self) -> None:
        """Forget everything learned."""
        self._tables.clear()
        self._steady_rtt.clear()


def _lru_get(d: OrderedDict, key, make, cap: int):
    """``d[key]``, made with ``make()`` if missing; ``d`` keeps the ``cap`` most recently used."""
    v = d.get(key)
    if v is None:
        v = d[key] = make()
        if len(d) > cap:
            d.popitem(last=False)
    else:
        d.move_to_end(key)
    return v


def _machine_key(nic: "NicParams", stack: "HostStackParams", costs, hz: int, preempt: str,
                 nr_cpus: int) -> tuple:
    """What a qperf round trip depends on besides the CPU and the message size:
    both hosts' NIC, stack and scheduler costs, HZ, preemption model and CPU count."""
    return nic, stack, costs, hz, preempt, nr_cpus


def irq_randomness_factory(platform: "Platform", *, deferral: str = "timer",
                           threshold: int = FAST_POOL_MIX_THRESHOLD):
    """A ``random_factory`` for :class:`QperfTcpLat`: each host's random.c
    interrupt state with the platform's parameters."""
    def factory(k: Kernel) -> IrqRandomness:
        return IrqRandomness(k, deferral=deferral, threshold=threshold, params=platform.extra["random"],
                             long_bits=platform.long_bits)
    return factory

#: IPv4 (20) + TCP (20) + TCP timestamps option (12): MSS = MTU - 52.
TCP_IP_HEADER_BYTES = 52
QPERF_MODES = ("aggregated", "exact")


@dataclass(frozen=True)
class NicParams:
    """An IPoIB interface: link, encapsulation and the receive path's CPU costs."""

    name: str
    data_rate_gbps: float      # link data rate after line coding
    ipoib_mtu: int             # interface MTU (datagram mode: IB MTU - 4)
    ib_overhead_bytes: int     # per packet on the wire besides the IPoIB payload
    wire_latency_ns: int       # one way, first bit out of the sender HCA to the receiver's CQE
    irq_ns: int                # one hard IRQ: entry/exit, EQ handler, napi_schedule, fast_mix
    rx_pkt_ns: int             # NET_RX per packet: CQE, skb refill, GRO, ip_rcv, tcp_v4_rcv
    source: str = ""

    @property
    def mss(self) -> int:
        return self.ipoib_mtu - TCP_IP_HEADER_BYTES

    @property
    def wire_ns(self) -> float:
        """Time one full packet occupies the link."""
        return (self.ipoib_mtu + self.ib_overhead_bytes) * 8 / self.data_rate_gbps

    def packets(self, size: int) -> int:
        return -(-size // self.mss)

    def napi_batch(self) -> int | None:
        """Packets per interrupt once NAPI races the wire (None: the poll never empties)."""
        gain = self.wire_ns - self.rx_pkt_ns
        if gain <= 0:
            return None
        return max(1, math.ceil(self.irq_ns / gain))


@dataclass(frozen=True)
class HostStackParams:
    """The host-side costs of one qperf message, and the fitted refill."""

    send_syscall_ns: int       # write(): syscall, tcp_sendmsg() fixed part, tcp_push, xmit of the first skb
    send_ns_per_kib: int       # tcp_sendmsg(): copy from user (LSO segments in the HCA)
    recv_syscall_ns: int       # read(): syscall, lock_sock, tcp_recvmsg() fixed part, tcp_cleanup_rbuf
    copy_ns_per_kib: int       # skb_copy_datagram_iter() to user
    user_ns: int               # qperf's own loop between two syscalls (user mode)
    resume_refill_ns: int      # FITTED: see the platform file
    source: str = ""


# ---------------------------------------------------------------------------
# one message's interrupts
# ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=256)
def _message_shape(nic: NicParams, size: int) -> tuple:
    """(packets, packets per interrupt, interrupts, MSS, interrupt offsets) of a
    ``size``-byte message: interrupt ``j`` (0-based) is taken when batch ``j``
    is complete, ``min((j + 1) * B, packets) * wire_ns`` after the first
    packet's arrival would start."""
    packets = nic.packets(size)
    b = nic.napi_batch()
    batch = packets if b is None else min(b, packets)
    n_irq = -(-packets // batch)
    wire_ns = nic.wire_ns
    offsets = tuple(int(min((j + 1) * batch, packets) * wire_ns) for j in range(n_irq))
    return packets, batch, n_irq, nic.mss, offsets


class RxMessage:
    """The NAPI interrupt stream of one message arriving at one CPU
    (``shape``: :func:`_message_shape`).

    Interrupt ``j`` (0-based) is taken when batch ``j`` is complete:
    ``t0 + min((j + 1) * B, packets) * wire_ns``.
    """

    __slots__ = ("size", "t0", "batch", "packets", "n_irq", "mss", "offsets", "next_irq",
                 "trigger_ev")

    def __init__(self, size: int, t0: int, shape: tuple):
        self.size = size
        self.t0 = t0
        self.packets, self.batch, self.n_irq, self.mss, self.offsets = shape
        self.next_irq = 0          # interrupts [0, next_irq) have been counted
        self.trigger_ev = None

    def irq_time(self, j: int) -> int:
        return self.t0 + self.offsets[j]

    def batch_packets(self, j: int) -> int:
        return min((j + 1) * self.batch, self.packets) - j * self.batch

    def bytes_of(self, first: int, last: int) -> int:
        """Payload bytes in batches ``first..last`` (inclusive): full-MSS
        packets, the remainder in the last one."""
        p0 = first * self.batch
        p1 = min((last + 1) * self.batch, self.packets)
        return min(self.size, p1 * self.mss) - min(self.size, p0 * self.mss)


# ---------------------------------------------------------------------------
# a host and a qperf endpoint on it
# ---------------------------------------------------------------------------

class QperfHost:
    """One machine: a kernel, its random.c interrupt state, its qperf endpoints."""

    def __init__(self, engine: Engine, platform: "Platform", role: str, *, random_factory,
                 preempt: str, rng):
        self.role = role
        self.platform = platform
        self.k = Kernel(engine, nr_cpus=platform.nr_cpus, hz=platform.hz, preempt=preempt,
                        costs=platform.sched, rng=rng, name=role)
        self.random: "IrqRandomness" = random_factory(self.k)
        self.random.mix_hooks.append(self._on_mix)
        self.random.pre_mix_hooks.append(self._before_mix)
        self.endpoints: dict[int, "QperfEndpoint"] = {}

    def boot_kworkers(self, cpu: int) -> None:
        """The per-CPU kworkers of both system pools exist (and sleep) before
        qperf starts, as on a booted machine."""
        from ..kernel.workqueue import get_pool, system_highpri_wq, system_wq

        get_pool(self.k, cpu, system_highpri_wq)
        get_pool(self.k, cpu, system_wq)

    def _before_mix(self, fp) -> None:
        ep = self.endpoints.get(fp.cpu)
        if ep is not None:
            ep.sync_irqs()
            if ep.pair is not None and ep.pair._jumping is not None:
                ep.pair._sync_jump(ep)   # a mix timer inside a fast-forward

    def _on_mix(self, fp, context: str) -> None:
        ep = self.endpoints.get(fp.cpu)
        if ep is not None:
            ep.on_mix(context)


class QperfEndpoint:
    """One qperf process (client or server) on one CPU of a host."""

    def __init__(self, host: QperfHost, cpu: int, role: str, nic: NicParams,
                 stack: HostStackParams, workload: "QperfTcpLat"):
        self.host = host
        self.k = host.k
        self.cpu = cpu
        self.role = role
        self.nic = nic
        self.stack = stack
        self.wl = workload
        self.peer: QperfEndpoint | None = None
        self.rx: RxMessage | None = None
        self.sock_avail = 0        # bytes delivered to the socket, not yet read
        self.rx_done = 0           # bytes of the current message read so far
        self.waiting = False       # blocked in read() (sk_wait_data)
        self.cold_qperf = False    # a foreign task ran here since qperf last ran
        self.cold_netrx = False    # ... since the NET_RX softirq last ran
        self.refills = 0
        self.disturb = 0           # rare-event counter: any change means "not steady"
        self.msgs_received = 0
        self.last_irq_t = 0        # time of the last interrupt counted
        self.last_trigger_t = 0    # time of the last interrupt that scheduled a mix (in detail)
        self.last_mix: tuple | None = None   # (time, context) of the last mix on this CPU
        self.pair: "QperfPair | None" = None
        self._shape_size: int | None = None   # the message size of ``_shape``
        self._shape: tuple = ()
        host.endpoints[cpu] = self
        host.boot_kworkers(cpu)
        self.task: Task = self.k.kthread_run(self._body, f"qperf-{role}", cpu=cpu)

    # ---------------------------------------------------------- receive side
    def start_message(self, size: int, t0: int) -> None:
        """The first packet of a message leaves the sender's HCA at ``t0 - wire_latency``."""
        if size != self._shape_size:   # one size at a time: look the shape up once
            self._shape_size, self._shape = size, _message_shape(self.nic, size)
        msg = RxMessage(size, t0, self._shape)
        self.rx = msg
        eng = self.k.engine
        if msg.n_irq == 1:
            eng.at(msg.irq_time(0), self._irq_single)
        else:
            eng.at(msg.irq_time(0), self._irq_first)
            eng.at(msg.irq_time(msg.n_irq - 1), self._irq_last)

    def _count_irqs_to(self, idx: int) -> bool:
        """Count interrupts [next_irq, idx) in bulk and interrupt ``idx`` itself."""
        msg = self.rx
        rnd = self.host.random
        n = idx - msg.next_irq
        if n > 0:
            rnd.add_interrupt_randomness_many(self.cpu, n, msg.irq_time(idx - 1))
        msg.next_irq = idx + 1
        self.last_irq_t = msg.irq_time(idx)
        trig = rnd.add_interrupt_randomness(self.cpu)
        if trig:
            self.disturb += 1
            self.last_trigger_t = self.k.now
        return trig

    def sync_irqs(self) -> None:
        """Count, in bulk, the interrupts of the current message that have
        arrived by now but are not yet counted (called before a deferred mix
        reads ``count``, so that it credits them).  The first and the last
        interrupt keep their own events."""
        msg = self.rx
        if msg is None or msg.next_irq == 0:
            return
        hi = msg.n_irq - 2                    # the last one has its own event
        # the last interrupt in next_irq .. hi that has arrived (next_irq - 1: none)
        j = bisect.bisect_right(msg.offsets, self.k.now - msg.t0, msg.next_irq, max(msg.next_irq, hi + 1)) - 1
        n = j + 1 - msg.next_irq
        if n > 0:
            self.host.random.add_interrupt_randomness_many(self.cpu, n, msg.irq_time(j))
            msg.next_irq = j + 1
            self.last_irq_t = msg.irq_time(j)

    def _plan_trigger(self) -> None:
        """Make the next interrupt of the current message that will schedule a
        mix (if any, and if it is not the last one, which has its own event)
        an event of its own."""
        msg = self.rx
        if msg is None:
            return
        if msg.trigger_ev is not None:
            msg.trigger_ev.cancel()
            msg.trigger_ev = None
        first = msg.next_irq
        last = msg.n_irq - 1          # handled by _irq_last
        n = last - first
        if n <= 0:
            return
        j = self.host.random.first_trigger(self.cpu, n, lambda i: msg.irq_time(first + i))
        if j is None:
            return
        msg.trigger_ev = self.k.engine.at(msg.irq_time(first + j), self._irq_trigger, first + j)

    def _netrx_cost(self, packets: int, extra_irqs: int = 0) -> int:
        cost = packets * self.nic.rx_pkt_ns + extra_irqs * self.nic.irq_ns
        if self.cold_netrx:
            self.cold_netrx = False
            self.refills += 1
            self.disturb += 1
            cost += self.stack.resume_refill_ns
        return cost

    def _irq_single(self) -> None:
        self.k.hardirq(self.cpu, self.nic.irq_ns, self._hardirq_single, name="mlx4-ib0")

    def _hardirq_single(self) -> None:
        msg = self.rx
        self._count_irqs_to(0)
        self.k.run_softirq(self.cpu, "NET_RX", self._netrx_cost(msg.packets), self._deliver,
                           msg.size)

    def _irq_first(self) -> None:
        self.k.hardirq(self.cpu, self.nic.irq_ns, self._hardirq_first, name="mlx4-ib0")

    def _hardirq_first(self) -> None:
        msg = self.rx
        self._count_irqs_to(0)
        # NAPI polls of batches 0 .. n-2, and the hard IRQs of 1 .. n-2: the
        # receive keeps up with the wire, so only the last batch is on the
        # critical path; the CPU time of the others is charged here, each
        # interrupt is still counted at its own time.
        last = msg.n_irq - 1
        pk = msg.batch * last
        self.k.run_softirq(self.cpu, "NET_RX", self._netrx_cost(pk, last - 1), self._deliver,
                           msg.bytes_of(0, last - 1))
        self._plan_trigger()

    def _irq_trigger(self, idx: int) -> None:
        """A middle interrupt that schedules a mix (its CPU time is in the lump)."""
        msg = self.rx
        msg.trigger_ev = None
        if msg.next_irq > idx:
            return
        self.k.hardirq(self.cpu, 0, self._hardirq_trigger, idx, name="mlx4-ib0")

    def _hardirq_trigger(self, idx: int) -> None:
        self._count_irqs_to(idx)
        self._plan_trigger()

    def _irq_last(self) -> None:
        self.k.hardirq(self.cpu, self.nic.irq_ns, self._hardirq_last, name="mlx4-ib0")

    def _hardirq_last(self) -> None:
        msg = self.rx
        if msg.trigger_ev is not None:
            msg.trigger_ev.cancel()
            msg.trigger_ev = None
        last = msg.n_irq - 1
        self._count_irqs_to(last)
        self.k.run_softirq(self.cpu, "NET_RX", self._netrx_cost(msg.batch_packets(last)),
                           self._deliver, msg.bytes_of(last, last))

    def _deliver(self, nbytes: int) -> None:
        """tcp_data_queue() -> sk_data_ready(): wake the reader."""
        self.sock_avail += nbytes
        if self.waiting:
            self.waiting = False
            self.k.wake_up_process(self.task)

    def on_mix(self, context: str) -> None:
        self.disturb += 1
        self.last_mix = (self.k.now, context)
        if context == "kworker":
            # a task other than qperf ran on this CPU
            self.cold_qperf = True
            self.cold_netrx = True
        self._plan_trigger()

    # --------------------------------------------------------------- qperf
    def _run_cost(self, ns: int) -> int:
        if self.cold_qperf:
            self.cold_qperf = False
            self.refills += 1
            self.disturb += 1
            ns += self.stack.resume_refill_ns
        return ns

    def _recv_message(self, task: Task) -> TaskBody:
        """qperf's recv_full(): read() until the whole message is in."""
        st = self.stack
        while True:
            while self.sock_avail == 0:
                self.waiting = True
                yield BLOCK
            take = self.sock_avail
            self.sock_avail = 0
            yield Run(self._run_cost(st.recv_syscall_ns + take * st.copy_ns_per_kib // 1024))
            self.rx_done += take
            if self.rx is not None and self.rx_done >= self.rx.size:
                size = self.rx.size
                self.rx_done = 0
                self.msgs_received += 1
                self.rx = None
                return size
            yield Run(st.user_ns, user=True)

    def _send_message(self, task: Task, size: int) -> TaskBody:
        st = self.stack
        yield Run(self._run_cost(st.send_syscall_ns + size * st.send_ns_per_kib // 1024))
        self.peer.start_message(size, self.k.now + self.nic.wire_latency_ns)

    def _body(self, task: Task) -> TaskBody:
        if self.role == "server":
            while True:
                size = yield from self._recv_message(task)
                yield Run(self.stack.user_ns, user=True)
                yield from self._send_message(task, size)
        else:
            yield from self.wl.client_body(self, task)


# ---------------------------------------------------------------------------
# the experiment driver: sizes, fast-forward, statistics
# ---------------------------------------------------------------------------

@dataclass(slots=True)
class SizeStats:
    msg_size: int
    elapsed_ns: int = 0
    round_trips: int = 0
    latency_ns: float = 0.0
    mixes_client: int = 0
    irqs_client: int = 0
    detailed_round_trips: int = 0
    jumps: int = 0


@dataclass(slots=True)
class _Snap:
    t: int
    state: tuple
    irqs: tuple
    disturb: int


class QperfPair:
    """One qperf client on host A and its server on host B, CPU ``cpu`` on both."""

    def __init__(self, wl: "QperfTcpLat", cpu: int):
        self.wl = wl
        self.cpu = cpu
        self.client = QperfEndpoint(wl.hosts[0], cpu, "client", wl.nic, wl.stack, wl)
        self.server = QperfEndpoint(wl.hosts[1], cpu, "server", wl.nic, wl.stack, wl)
        self.client.peer = self.server
        self.server.peer = self.client
        self.client.pair = self.server.pair = self
        self.t_end = 0
        self.t_first = 0
        self.done = True
        self.rts = 0
        self.fresh = False   # the next boundary is a run's first (client_body)
        # run_slice() (no pause between slices): round trips completed in detail,
        # as (end, duration), and fast-forwards as (start, rtt, k), until credited
        self.completed: list[tuple[int, int]] = []
        self.skipped: list[tuple[int, int, int]] = []
        self.last_completion = 0
        self.detailed = 0
        self.jumps = 0
        self.prev: _Snap | None = None
        self.steady: tuple | None = None     # (rtt, state deltas, irqs per rt, last-irq offsets)
        self.steady_size: int | None = None  # the message size ``steady`` was measured at
        self.candidate: tuple | None = None
        self._min_vr_after_jump: int | None = None
        self._offsets: tuple = (None, None)   # (steady, per endpoint interrupt offsets)
        # the busy stretches of each host's CPU in the steady round trip (from its
        # start), measured with it; a fast-forward takes in a mix timer that fires
        # while the CPU is idle
        self.busy: tuple | None = None
        self._busy_candidate: tuple | None = None
        self._logging_from: int | None = None
        # the round trip that pays the refills a kworker left owed (cold_netrx,
        # cold_qperf) on one or both hosts, otherwise clean: measured in detail like
        # the steady one (twice alike) per set of refills owed, then replayed
        self.refill_rts: dict[tuple, tuple] = {}      # refills owed -> (rtt, deltas, irqs per rt, offsets)
        self._learned: dict = _new_table()   # from the workload's QperfLearned
        self._refill_candidate: dict[tuple, tuple] = {}
        self._refill_measuring: tuple | None = None   # (refills owed, snapshot) of the one in progress
        self._jumping: tuple | None = None     # (start, round trips, record, trigger) of the fast-forward in progress
        # the mix triggers a planned fast-forward contains: (endpoint, interrupt, time)
        self._triggers: list[tuple] = []
        self._jump_counted: dict = {}
        self._record: tuple | None = None      # what the next jump() skips: steady or a refill_rts entry
        # the round trip that holds the interrupt scheduling a workqueue mix (on one
        # host or both), with its kworker run(s): measured in detail like the refill
        # round trip (twice alike), per (deferral, trigger index on the client, on
        # the server, refills owed at its start), then replayed as the last round
        # trip of a fast-forward (or alone, from a refill boundary)
        self.trigger_rts: dict[tuple, tuple] = {}
        self._trigger_candidate: dict[tuple, tuple] = {}
        self._trigger_measuring: tuple | None = None
        # the next jump()'s last round trip, if it is a trigger_rts one: (record, per-host plan)
        self._trigger: tuple | None = None
        self._mix_in: dict[int, int] = {}     # host index -> the tick of its mix timer in the plan
        # steady round trips the next jump() takes on after its last rare one (_steady_tail)
        self._tail = 0
        self.trigger_replays = 0               # trigger round trips replayed (statistics, tests)
        self.trigger_refill_replays = 0        # ... with the refill round trip after it (_refill_after_trigger)
        self.own_placement_replays = 0         # ... with a kworker placed at its own vruntime (_kworker_after)
        self.tail_rts = 0                      # steady round trips taken on after a rare one (_steady_tail)
        # a mix timer that fires while its CPU is busy, where the round trip is
        # the steady one with what follows the tick ``delay`` later (_tick_model):
        # replayed as the last round trip of a fast-forward, (endpoint, m,
        # offset, delay, shift of each endpoint's last interrupt)
        self._tick: tuple | None = None
        # _plan_jump: may a mix timer's softirq end near a round trip's end (and did one)
        self._near_end_ok = False
        self._near_end = False
        self._idle_ticks: list[int] = []               # mix timers a plan takes in while their CPU is idle
        self.tick_replays = 0                          # busy ticks replayed (statistics, tests)
        self.near_end_plans = 0                        # ... with a softirq near its round trip's end (_plan_jump)
        # the NAPI-poll case of _tick_model, checked in detail once per stretch
        # (endpoint, its index) before it is replayed: True, or False if refuted
        self.tick_rts: dict[tuple, bool] = {}
        # _tick_model's other stretches: (host, stretches) -> (delay, shifts) seen once in detail
        self.tick_inside: dict[tuple, tuple] = {}
        self._tick_candidate: tuple | None = None
        self._tick_measuring: tuple | None = None

    # state of both hosts that the fast-forward must carry
    def _state(self) -> tuple:
        out = []
        for ep in (self.client, self.server):
            t = ep.task
            rq = ep.k.cpus[ep.cpu]
            out.append((t.vruntime, t.sum_exec_runtime, t.nvcsw, t.nivcsw, rq.nr_switches,
                        rq.busy_ns, rq.min_vruntime))
        return tuple(out)

    def _irqs(self) -> tuple:
        return tuple(ep.host.random.fast_pool(ep.cpu).irqs for ep in (self.client, self.server))

    def _disturb(self) -> int:
        return self.client.disturb + self.server.disturb

    def _refills_owed(self) -> tuple | None:
        """The refills owed, ``((cold_qperf, cold_netrx) of the client, of the
        server)``, if that is all that keeps the state from clean (NO_REFILLS:
        clean -- no rare event pending: nothing but qperf runnable, no refill
        owed, no interrupt left to count, no mix in a kworker pending); None if
        anything else does."""
        owed = []
        for ep in (self.client, self.server):
            rq = ep.k.cpus[ep.cpu]
            if rq.cfs_queue or rq.rt_queue:
                return None
            if ep.rx is not None or ep.sock_avail:
                return None
            cur = rq.curr
            if cur is not None and cur is not ep.task:
                return None
            if rq.irq_until > ep.k.now:
                return None
            fp = ep.host.random.fast_pool(ep.cpu)
            if fp.count & MIX_INFLIGHT and ep.host.random.deferral in ("workqueue", "schedule_work",
                                                                      "hardirq"):
                return None
            owed.append((ep.cold_qperf, ep.cold_netrx))
        if not self.server.waiting:
            return None
        return owed[0], owed[1]

    def boundary(self, t: int) -> int:
        """At the top of the client loop: record, and return how many round
        trips can be skipped (0: simulate the next one in detail).

        The steady round trip is measured once per size: two consecutive
        round trips that start and end clean, without a rare event, and
        agree in every recorded delta.  After that, any boundary at which the
        state is clean may be followed by a fast-forward: from a clean state
        the next round trips are the steady one (the model is deterministic
        between rare events), and the exact mode checks it.
        """
        owed = self._refills_owed()
        clean = owed == NO_REFILLS
        fresh, self.fresh = self.fresh, False
        if self.steady is not None:
            # measured already (only a new size measures again, from a fresh
            # ``prev``): no snapshot needed
            if self._refill_measuring is not None:
                self._end_refill_measure(t, clean)
            if self._trigger_measuring is not None:
                self._end_trigger_measure(t)
            if self._tick_measuring is not None:
                self._end_tick_measure(t)
            if fresh or owed is None or not self.wl.fast_forward:
                # (the first round trip of a run, from qperf's wakeup, is not a steady
                # one for min_vruntime: the steady lag of min_vruntime behind qperf's
                # vruntime builds up in it)
                return 0
            if not clean:
                return self._plan_refill(t, owed) or self._plan_refill_trigger(t, owed)
            k = self._plan_jump(t)
            if k == 0:
                self._start_trigger_measure(t)
                if self._tick_candidate is not None:
                    self._start_tick_measure(t)
            return k
        snap = _Snap(t, self._state(), self._irqs(), self._disturb() if clean else -1)
        prev = self.prev
        self.prev = snap
        busy = self._busy_log(t, clean)
        if not clean:
            return 0
        if self.steady is None:
            if prev is None or prev.disturb < 0 or prev.disturb != snap.disturb:
                self.candidate = None
                return 0
            rtt = t - prev.t
            deltas = tuple(tuple(b - a for a, b in zip(s0, s1))
                           for s0, s1 in zip(prev.state, snap.state))
            dirq = tuple(b - a for a, b in zip(prev.irqs, snap.irqs))
            offs = (self.client.last_irq_t - prev.t, self.server.last_irq_t - prev.t)
            rec = (rtt, deltas, dirq, offs)
            if self.candidate != rec:
                self.candidate = rec
                self._busy_candidate = busy
                return 0
            self.steady = rec
            # the CPUs' busy stretches, if both measured round trips agree on them too
            self.busy = busy if busy is not None and busy == self._busy_candidate else None
            self._stop_busy_log()
            self._learned["steady"] = (self.steady, self.busy)
        if not self.wl.fast_forward:
            return 0
        return self._plan_jump(t)

    def _busy_log(self, t: int, clean: bool) -> tuple | None:
        """During the measurement: the busy stretches of both CPUs since the
        last boundary (relative to it), and a new log from here."""
        out = None
        eps = (self.client, self.server)
        if self._logging_from is not None:
            t0 = self._logging_from
            out = []
            for ep in eps:
                rq = ep.k.cpus[ep.cpu]
                log = list(rq.busy_log or ())
                if rq._busy_from is not None:
                    log.append((rq._busy_from, t))     # still busy at the boundary
                out.append(tuple((a - t0, b - t0) for a, b in log))
            out = tuple(out)
        if clean and self.steady is None and self.wl.fast_forward:
            self._logging_from = t
            for ep in eps:
                rq = ep.k.cpus[ep.cpu]
                rq.busy_log = []
                rq._busy_from = t if rq.curr is not None else None
        else:
            self._stop_busy_log()
        return out

    def _stop_busy_log(self) -> None:
        self._logging_from = None
        for ep in (self.client, self.server):
            rq = ep.k.cpus[ep.cpu]
            rq.busy_log = None
            rq._busy_from = None

    def _idle_at(self, i: int, t: int, o: int, d: int, m: int, k: int) -> bool:
        """Is host ``i``'s CPU idle from offset ``o`` of round trip ``m`` for
        ``d`` ns, in a fast-forward of ``k`` round trips from ``t``?"""
        if self.busy is None:
            return False
        rtt = self.steady[0]
        costs = self.client.k.costs
        end = t + m * rtt + o + d
        stretches = self.busy[i]
        for shift in (0, rtt):      # this round trip, and the next one if it spills over
            lo, hi = o - shift, o + d - shift
            if hi < 0:
                break
            for a, b in stretches:
                if a <= hi and b >= lo:
                    return False
        # the fast-forward's own wakeup at its end
        return self._near_end_check(end >= t + k * rtt - costs.wakeup_ns - costs.context_switch_ns - 1)

    def _near_end_check(self, near: bool) -> bool:
        """A mix timer's softirq that the plan takes in: is it clear of the
        fast-forward's own wakeup?  One that ``near`` its round trip's end is,
        if steady round trips follow in the same fast-forward; _plan_jump
        notes it (``_near_end``) and checks that they do."""
        if not near:
            return True
        if not self._near_end_ok:
            return False
        self._near_end = True
        return True

    def _irq_offsets(self, i: int) -> list[int] | None:
        """Offsets from the round trip's start of endpoint ``i``'s interrupts in a
        steady round trip (the last one measured, the others from the message's
        NAPI batches), or None if they do not match the message's."""
        cache = self._offsets
        if cache[0] is self.steady:
            return cache[1][i]
        self._offsets = (self.steady, [self._irq_offsets_of(0), self._irq_offsets_of(1)])
        return self._offsets[1][i]

    def _irq_offsets_of(self, i: int) -> list[int] | None:
        rtt, deltas, dirq, offs = self.steady
        n, off_last = dirq[i], offs[i]
        at = _message_shape(self.wl.nic, self.wl.size)[4]
        if n != len(at):
            return None
        return [off_last - (at[-1] - a) for a in at]

    def _plan_jump(self, t: int) -> int:
        """How many round trips from the clean boundary ``t`` to skip (0: the
        next one in detail), and what the jump needs (_trigger, _tick,
        _triggers, _tail).  A mix timer's softirq near the end of the round
        trip it falls in could meet the fast-forward's own wakeup if that round
        trip were its last: it is taken in when steady round trips follow it
        in the same fast-forward (a busy tick's tail); else the plan is made
        again without it."""
        self._near_end_ok, self._near_end = True, False
        k = self._plan(t)
        if self._near_end:
            if self._tick is not None and self._tail:
                self.near_end_plans += 1
            else:
                self._near_end_ok = False
                k = self._plan(t)
        self._near_end_ok = False
        return k

    def _plan(self, t: int) -> int:
        self._record = rtt, deltas, dirq, offs = self.steady
        self._trigger = self._tick = self._tick_candidate = None
        self._tail = 0
        self._idle_ticks = []
        self._mix_in = {}     # host index -> the tick of its mix timer inside this plan
        # rounds that still start before t_end (run_slice: none, the rare events bound it)
        k = k_end = min(-(-(self.t_end - t) // rtt), MAX_JUMP_ROUND_TRIPS)
        self._triggers = []
        wq = []            # (endpoint index, endpoint, index of its next trigger interrupt)
        timers = False
        for i, (ep, n, off) in enumerate(zip((self.client, self.server), dirq, offs)):
            if n <= 0:
                continue
            rnd = ep.host.random
            fp = rnd.fast_pool(ep.cpu)
            mix = fp.mix
            ev = getattr(mix, "_event", None)
            if ev is not None and ev.pending:
                # a pending mix timer: in the fast-forward if it fires while the CPU
                # is idle, else stop before the round trip it fires in
                timers = True
                k = self._take_timer(i, ep, t, k, ev.time, mix.cost_ns)
            if fp.count & MIX_INFLIGHT:
                continue
            offsets = self._irq_offsets(i) if rnd.deferral in ("timer", "none") else None
            if offsets is None:
                # the interrupt that schedules the next mix is simulated in detail
                # (unless a learned trigger round trip takes it in, below)
                k = min(k, max(0, self._rts_before_mix(ep, n, off, t, fp.count, fp.last)))
                wq.append((i, ep, rnd.threshold - 1 - fp.count))
                continue
            # timer (or no) deferral: the interrupt that schedules the mix only sets
            # MIX_INFLIGHT and queues the timer -- nothing a round trip would notice;
            # it happens inside the fast-forward, which ends before the timer fires
            def time_of(j, offsets=offsets, n=n):
                m, r = divmod(j, n)
                return t + m * rtt + offsets[r]
            j = rnd.first_trigger(ep.cpu, k * n, time_of)
            if j is None:
                continue
            t_trig = time_of(j)
            until = ep.k.engine.until
            if until is not None and t_trig > until:
                # the deferral may change after this slice: stop before that round trip
                k = min(k, j // n)
                continue
            self._triggers.append((ep, j, t_trig, time_of(j - 1) if j else t))
            if rnd.deferral == "timer":
                tick = ep.k.tick_time(ep.k.jiffies_at(t_trig) + 1)   # expires = jiffies: the next tick
                k = self._take_timer(i, ep, t, k, tick, rnd.params.mix_ns)
        if len(wq) == 2 and not timers and 0 <= k < k_end and self.trigger_rts and self._plan_wq_trigger(t, k, wq):
            k += 1     # the round trip with the trigger(s), replayed as the last one
        if self._tick is not None:
            i, m, o, _, shifts = self._tick
            tick = t + m * rtt + o
            later = any(t_trig > tick and j < k * dirq[0 if ep is self.client else 1]
                        for ep, j, t_trig, _ in self._triggers) or any(x > tick for x in self._idle_ticks)
            for h, ep in enumerate((self.client, self.server)):
                # the other host's interrupts, later by the shift: still before its HZ rule
                fp = ep.host.random.fast_pool(ep.cpu)
                if h != i and dirq[h] and not fp.count & MIX_INFLIGHT and (
                        t + m * rtt + offs[h] + shifts[h] >= ep.k.tick_time(fp.last + ep.k.HZ + 1)):
                    later = True
            if k != m + 1 or later:
                # the busy tick's round trip is not the last one, or something after
                # the tick in it would move with it: stop before it instead
                self._tick = None
                k = min(k, m)
            else:
                self._tail = self._tail_after_tick(t, k, self._tick[3])
        return max(0, k)

    def _tail_after_tick(self, t: int, k: int, delay: int) -> int:
        """_steady_tail after a busy tick's round trip, the last of the ``k``
        planned from ``t`` (``delay`` longer): on each host the count restarted
        at its mix in the plan (that tick's, or one while its CPU was idle,
        _mix_in) or goes on; none if a host still has a mix to come."""
        rtt, deltas, dirq, offs = self.steady
        pools = []
        for h, ep in enumerate((self.client, self.server)):
            fp = ep.host.random.fast_pool(ep.cpu)
            n = dirq[h]
            x = self._mix_in.get(h)
            if x is not None:
                # the interrupts after the mix in its round trip, and all of those after it
                mh, oh = divmod(x - t, rtt)
                count = n - bisect.bisect_right(self._irq_offsets(h), oh) + (k - 1 - mh) * n
                pools.append((count, ep.k.jiffies_at(x)))
            elif fp.count & MIX_INFLIGHT or any(e is ep and j < k * n for e, j, _, _ in self._triggers):
                return 0
            else:
                pools.append((fp.count + k * n, fp.last))
        return self._steady_tail(t + k * rtt + delay, pools)

    # ----------------------------------------- the round trip of a workqueue mix
    @staticmethod
    def _timer_due(ep: "QperfEndpoint", t: int) -> bool:
        """Does a timer of ``ep``'s CPU fire by ``t`` (next_expiry's tick)?"""
        nxt = ep.k.timers.next_expiry(ep.cpu)
        return nxt is not None and ep.k.tick_time(nxt) <= t

    def _kworker(self, ep: "QperfEndpoint") -> Task:
        """The kworker that runs ``ep``'s CPU's workqueue mix (the queue _schedule_mix picks)."""
        wq = system_highpri_wq if ep.host.random.deferral == "workqueue" else system_wq
        return get_pool(ep.k, ep.cpu, wq).worker

    def _trigger_start(self, ep: "QperfEndpoint", min_vruntime: int) -> tuple | None:
        """(kworker, its vruntime floor) if ``ep``'s kworker sleeps and will be
        placed by the sleeper credit (place_entity: ``min_vruntime -
        sched_latency / 2`` is above its own vruntime), else None: where a
        trigger round trip is learned."""
        w = self._kworker(ep)
        floor = min_vruntime - ep.k.sysctl_sched_latency // 2
        if w.state != TASK_SLEEPING or w.vruntime > floor:
            return None
        return w, floor

    def _kworker_after(self, ep: "QperfEndpoint", m: int, d: tuple, kw: tuple) -> tuple | None:
        """(kworker, its vruntime after the trigger round trip ``m`` rounds on
        from now, each with steady deltas ``d``) when the kworker replays
        ``kw`` -- recorded where the sleeper credit placed it (_trigger_start):
        at its wakeup ``place`` above that round trip's floor (the floor's rise
        by then), and ``run`` more by the round trip's end.  Placed by the
        credit again (its own vruntime not above the floor at the wakeup):
        floor + place + run.  Placed at its own vruntime instead (early in a
        boot, while ``min_vruntime`` is below half a latency), the round trip is
        the same if the kworker, woken once, stays more than the wakeup
        granularity behind qperf and ``min_vruntime`` all along: then it wakes
        preempting or on the idle CPU, is picked first, and moves neither
        ``min_vruntime`` nor qperf's placement, as with the credit; it ends
        ``run`` above its own vruntime.  Else None."""
        w = self._kworker(ep)
        if w.state != TASK_SLEEPING:
            return None
        k = ep.k
        place, run, _, dnvcsw, _ = kw
        min_vr = k.cpus[ep.cpu].min_vruntime + m * d[6]
        floor = min_vr - k.sysctl_sched_latency // 2
        if w.vruntime <= floor + place:
            return w, floor + place + run
        gran = k.sysctl_sched_wakeup_granularity * NICE_0_LOAD // w.weight
        if dnvcsw == 1 and w.vruntime + run + gran < min(min_vr, ep.task.vruntime + m * d[0]):
            self.own_placement_replays += 1
            return w, w.vruntime + run
        return None

    def _wq_deferral(self) -> str | None:
        """The workqueue deferral both hosts are on (``workqueue`` or
        ``schedule_work``), or None -- None as well while tracing (the trigger
        round trip is then simulated in detail, for the trace)."""
        d = self.client.host.random.deferral
        if (d not in ("workqueue", "schedule_work") or self.server.host.random.deferral != d
                or self.client.k.engine.recorder is not None):
            return None
        return d

    def _wq_next(self) -> list | None:
        """Both hosts on one workqueue deferral (_wq_deferral) with no mix in
        flight or pending: (endpoint index, endpoint, index of its next trigger
        interrupt by the count rule) for each, else None."""
        if self._wq_deferral() is None:
            return None
        out = []
        for i, (ep, n) in enumerate(zip((self.client, self.server), self.steady[2])):
            rnd = ep.host.random
            fp = rnd.fast_pool(ep.cpu)
            ev = getattr(fp.mix, "_event", None)
            if n <= 0 or fp.count & MIX_INFLIGHT or (ev is not None and ev.pending):
                return None
            out.append((i, ep, rnd.threshold - 1 - fp.count))
        return out

    def _plan_refill_trigger(self, t: int, owed: tuple) -> int:
        """A boundary clean but for the refills ``owed`` whose round trip (not
        replayable as a refill one) holds a workqueue mix's trigger: replay it
        as a one-round-trip fast-forward (1) if that trigger round trip, with
        these refills owed at its start, is known; else measure it (0)."""
        wq = self._wq_next()
        if wq is None:
            return 0
        if self.trigger_rts and self._plan_wq_trigger(t, 0, wq, owed):
            self._record = self.steady
            self._triggers = []
            return 1
        self._start_trigger_measure(t, owed)
        return 0

    def _plan_wq_trigger(self, t: int, m: int, wq: list, owed: tuple = NO_REFILLS) -> bool:
        """Round trip ``m`` after ``t`` (both hosts clean and on a workqueue
        deferral, nothing else bounding the fast-forward before it) holds the
        interrupt that schedules a mix on one host or both: take it into the
        fast-forward as its last round trip if it is known (trigger_rts) and
        nothing rare can happen in it -- no timer due on either CPU, the HZ rule
        not earlier than the count rule, each trigger within the engine's
        ``until`` (the deferral may change after it), each kworker placed as
        _kworker_after allows.  ``owed``: the refills owed at
        its start (a refill boundary; then ``m`` is 0).  Sets ``_trigger``."""
        rtt, deltas, dirq, offs = self.steady
        deferral = self._wq_deferral()
        if deferral is None:
            return False
        js = tuple(j - m * dirq[i] if j // dirq[i] == m else None for i, ep, j in wq)
        rec = self.trigger_rts.get((deferral,) + js + (owed,))
        if rec is None:
            return False
        trtt, _, toffs, mix_offs = rec[:4]
        t_m = t + m * rtt                      # the trigger round trip starts here
        until = self.client.k.engine.until
        plan = []
        for (i, ep, j), jm in zip(wq, js):
            k = ep.k
            if self._timer_due(ep, t_m + trtt):
                return False
            fp = ep.host.random.fast_pool(ep.cpu)
            t_hz = k.tick_time(fp.last + k.HZ + 1)
            if jm is None:
                if t_m + toffs[i] >= t_hz:       # its last interrupt in the fast-forward
                    return False
                continue
            steady_offs = self._irq_offsets(i)
            if steady_offs is None:
                return False
            shift = toffs[i] - offs[i]           # the message arrives later in this round trip
            t_trig = t_m + steady_offs[jm] + shift
            if t_trig >= t_hz or (until is not None and t_trig > until):
                return False
            start = self._kworker_after(ep, m, deltas[i], rec[4][i])
            if start is None:
                return False
            if jm:
                t_before = t_m + steady_offs[jm - 1] + shift
            else:
                t_before = t_m - rtt + offs[i] if m else t
            plan.append((ep, i, j, t_trig, t_before, t_m + mix_offs[i]) + start)
        self._trigger = (rec, plan, self._refill_after_trigger(t_m, m, rec, wq, js))
        return True

    def _steady_tail(self, b: int, pools: list) -> int:
        """How many steady round trips from ``b`` -- a clean boundary inside a
        plan, after its last rare event, each host's fast pool then at ``pools``
        (count, last) with no mix in flight -- the same fast-forward takes on
        (``_tail``): all of them up to the one whose interrupts would schedule a
        mix by the count or the HZ rule, as _plan_jump would from that boundary."""
        rtt, deltas, dirq, offs = self.steady
        tail = min(-(-(self.t_end - b) // rtt), MAX_JUMP_ROUND_TRIPS)
        for ep, n, off, (count, last) in zip((self.client, self.server), dirq, offs, pools):
            if n > 0:
                tail = min(tail, self._rts_before_mix(ep, n, off, b, count, last))
        return max(0, tail)

    def _rts_before_mix(self, ep: "QperfEndpoint", n: int, off: int, b: int, count: int, last: int) -> int:
        """Steady round trips from ``b`` none of whose ``n`` interrupts (the
        last at offset ``off``) schedules a mix on ``ep``'s host, its fast pool
        then at ``count`` and ``last`` with no mix in flight: those before the
        one the count rule triggers in, whose last interrupt comes before the
        HZ rule's jiffy (may be negative: none)."""
        rtt = self.steady[0]
        x = ep.k.tick_time(last + ep.k.HZ + 1) - b - off
        return min((ep.host.random.threshold - 1 - count) // n, -(-x // rtt))

    def _refill_after_trigger(self, t_m: int, m: int, rec: tuple, wq: list, js: tuple) -> tuple | None:
        """The refill round trip that pays what trigger round trip ``rec`` (from
        ``t_m``, ``m`` steady ones after the plan's start) leaves owed, if it is
        known and nothing rare can happen in it: replayed right after it, in
        the same fast-forward, instead of from a boundary of its own (as
        _plan_refill would).  No timer due on either CPU before it ends, and none
        of its interrupts schedules a mix: on a host that mixed in the trigger
        round trip the count restarts at the mix (the interrupts after it count
        on), ``last`` is the mix's jiffy; on the other the count goes on."""
        trtt, _, toffs, mix_offs, _, ends = rec[:6]
        if ends == NO_REFILLS:
            return None
        after = self.refill_rts.get(ends)
        if after is None:
            return None
        rtt, deltas, dirq, offs = self.steady
        b = t_m + trtt                          # the refill round trip starts here
        if b >= self.t_end:
            return None                         # (run_size: the client stops there)
        t_end = b + after[0]
        pools = []
        for (i, ep, j), jm in zip(wq, js):
            k = ep.k
            if self._timer_due(ep, t_end):
                return None
            n = dirq[i]
            fp = ep.host.random.fast_pool(ep.cpu)
            if jm is None:
                count, last = fp.count + (m + 1) * n, fp.last
            else:
                # the interrupts of the trigger round trip later than its mix (_sync_jump)
                shift = toffs[i] - offs[i]
                count = n - bisect.bisect_right(self._irq_offsets(i), mix_offs[i] - shift)
                last = k.jiffies_at(t_m + mix_offs[i])
            if count + n >= ep.host.random.threshold or b + after[3][i] >= k.tick_time(last + k.HZ + 1):
                return None
            pools.append((count + n, last))
        # after it the state is clean: steady round trips follow, in the same fast-forward
        self._tail = self._steady_tail(t_end, pools)
        return after

    def _start_trigger_measure(self, t: int, owed: tuple = NO_REFILLS) -> None:
        """A boundary, clean but for the refills ``owed``, whose next round
        trip, simulated in detail, holds an interrupt that schedules a workqueue
        mix, of a kind not learned yet: snapshot both hosts (and their kworkers)
        to learn it at the next boundary."""
        wq = self._wq_next()
        if wq is None:
            return
        dirq = self.steady[2]
        js, starts = [], []
        for i, ep, j in wq:
            start = self._trigger_start(ep, ep.k.cpus[ep.cpu].min_vruntime)
            if start is None:
                return
            js.append(j if j < dirq[i] else None)
            w, floor = start
            starts.append((w, floor, w.sum_exec_runtime, w.nvcsw, w.nivcsw,
                           ep.host.random.fast_pool(ep.cpu).mixes, ep.k.timers.next_expiry(ep.cpu),
                           ep.refills, ep.disturb))
        key = (self._wq_deferral(),) + tuple(js) + (owed,)
        if js == [None, None] or key in self.trigger_rts:
            return
        self._trigger_measuring = (key, _Snap(t, self._state(), self._irqs(), 0), starts)

    def _end_trigger_measure(self, t: int) -> None:
        """The boundary after a trigger round trip simulated in detail: keep it
        if it went as its key says (the mixes where and when the count rule
        puts them, in a kworker, nothing else on the CPUs' timers, ending clean
        but for refills) and learn it once two of them agree."""
        key, snap, starts = self._trigger_measuring
        self._trigger_measuring = None
        eps = (self.client, self.server)
        if self._refills_owed() is None or any(ep.host.random.deferral != key[0] for ep in eps):
            return
        rtt, deltas, dirq, offs = self.steady
        t0 = snap.t
        if tuple(b - a for a, b in zip(snap.irqs, self._irqs())) != dirq:
            return
        toffs = (self.client.last_irq_t - t0, self.server.last_irq_t - t0)
        mix_offs, kw = [], []
        for i, (ep, j, st) in enumerate(zip(eps, key[1:3], starts)):
            w, floor, exec0, nvcsw0, nivcsw0, mixes0, nxt0, _, _ = st
            fp = ep.host.random.fast_pool(ep.cpu)
            nxt = ep.k.timers.next_expiry(ep.cpu)
            if nxt != nxt0 or (nxt is not None and ep.k.tick_time(nxt) <= t):
                return
            if j is None:
                if fp.mixes != mixes0 or w.nvcsw != nvcsw0:
                    return
                mix_offs.append(None)
                kw.append(None)
                continue
            steady_offs = self._irq_offsets(i)
            if (steady_offs is None or fp.mixes != mixes0 + 1 or ep.last_mix is None
                    or ep.last_mix[1] != "kworker"
                    or ep.last_trigger_t != t0 + steady_offs[j] + toffs[i] - offs[i]):
                return
            if w.woken_ns is None or w.woken_ns < t0:
                return     # (woken in this round trip: woken_vruntime is its placement here)
            mix_offs.append(ep.last_mix[0] - t0)
            kw.append((w.woken_vruntime - floor, w.vruntime - w.woken_vruntime,
                       w.sum_exec_runtime - exec0, w.nvcsw - nvcsw0, w.nivcsw - nivcsw0))
        d = tuple(tuple(b - a for a, b in zip(s0, s1)) for s0, s1 in zip(snap.state, self._state()))
        rec = (t - t0, d, toffs, tuple(mix_offs), tuple(kw),
               tuple((ep.cold_qperf, ep.cold_netrx) for ep in eps),
               tuple(ep.refills - st[7] for ep, st in zip(eps, starts)),
               tuple(ep.disturb - st[8] for ep, st in zip(eps, starts)))
        if self._trigger_candidate.get(key) == rec:
            self.trigger_rts[key] = rec
        else:
            self._trigger_candidate[key] = rec

    def start_size(self, size: int) -> None:
        """A new message size: what was measured at another size does not
        hold; take what the workload's QperfLearned holds for this one, if
        anything, and learn into it (exact mode: learn for this run only)."""
        self.steady_size = size
        self._refill_candidate, self._refill_measuring = {}, None
        self._trigger_candidate, self._trigger_measuring = {}, None
        if self.wl.fast_forward:
            k = self.client.k
            key = _machine_key(self.wl.nic, self.wl.stack, k.costs, k.HZ, k.preempt, k.nr_cpus) + (self.cpu, size)
            self._learned = self.wl.learned.table(key)
        else:
            self._learned = _new_table()
        self.steady, self.busy = self._learned.get("steady", (None, None))
        self.refill_rts = self._learned["refill"]
        self.trigger_rts = self._learned["trigger"]
        self.tick_rts = self._learned["tick"]
        self.tick_inside = self._learned["tick_inside"]
        self._tick_measuring = None

    def _plan_refill(self, t: int, owed: tuple) -> int:
        """A boundary that is clean but for the refills ``owed``: replay the
        round trip that pays them (1) if it is known and nothing rare can
        happen in it -- no timer due on either CPU, no interrupt of it
        scheduling a mix (count or HZ rule) -- else simulate it in detail
        (0), measuring it if it is not known yet."""
        rec = self.refill_rts.get(owed)
        if rec is None:
            self._refill_measuring = (owed, _Snap(t, self._state(), self._irqs(), self._disturb()))
            return 0
        rtt, deltas, dirq, offs = rec
        for ep, n, off in zip((self.client, self.server), dirq, offs):
            k = ep.k
            if self._timer_due(ep, t + rtt):
                return 0
            if n:
                rnd = ep.host.random
                fp = rnd.fast_pool(ep.cpu)
                if not fp.count & MIX_INFLIGHT and (
                        fp.count + n >= rnd.threshold or t + off >= k.tick_time(fp.last + k.HZ + 1)):
                    return 0
        self._record = rec
        self._triggers = []
        # after it the state is clean: steady round trips follow, in the same fast-forward
        pools = []
        for ep, n in zip((self.client, self.server), dirq):
            fp = ep.host.random.fast_pool(ep.cpu)
            ev = getattr(fp.mix, "_event", None)
            if fp.count & MIX_INFLIGHT or (ev is not None and ev.pending):
                break
            pools.append((fp.count + n, fp.last))
        else:
            self._tail = self._steady_tail(t + rtt, pools)
        return 1

    def _end_refill_measure(self, t: int, clean: bool) -> None:
        """The boundary after a refill round trip simulated in detail: keep it
        if it ended clean with no rare event but its refills, and learn it
        once two of them agree (as the steady round trip is learned)."""
        owed, snap = self._refill_measuring
        self._refill_measuring = None
        refills = sum(owed[0]) + sum(owed[1])
        if not clean or self._disturb() - snap.disturb != refills:
            return
        dirq = tuple(b - a for a, b in zip(snap.irqs, self._irqs()))
        if dirq != self.steady[2]:
            return
        deltas = tuple(tuple(b - a for a, b in zip(s0, s1)) for s0, s1 in zip(snap.state, self._state()))
        rec = (t - snap.t, deltas, dirq, (self.client.last_irq_t - snap.t, self.server.last_irq_t - snap.t))
        if self._refill_candidate.get(owed) == rec:
            self.refill_rts[owed] = rec
        else:
            self._refill_candidate[owed] = rec

    def _take_timer(self, i: int, ep: "QperfEndpoint", t: int, k: int, tick: int, cost: int) -> int:
        """A mix timer of endpoint ``i`` fires at ``tick`` (a TIMER softirq of
        ``cost`` ns on its CPU): the fast-forward of ``k`` round trips from
        ``t`` takes it in when that CPU is idle then in the steady round trip
        (the mix counts the interrupts so far, see _sync_jump) and ends before
        the next mix could be scheduled; when the CPU is busy and _tick_model
        knows what the softirq does there, it ends with that round trip, longer
        by the model's delay (``_tick``); else it stops before that round trip.
        A timer at the very nanosecond a round trip ends or one of the host's
        interrupts arrives is left to the detailed simulation: there the order
        of the same-time events (the order they were scheduled in) decides."""
        rtt, deltas, dirq, offs = self.steady
        m, o = divmod(tick - t, rtt)
        if o == 0 and m > 0:
            # at the very nanosecond round trip m - 1 ends: the timer, armed before
            # that round trip's last stretch began, expires first and ends it late
            # (in detail; the fast-forward would end it on time): simulate it
            return min(k, m - 1)
        if m >= k:
            return k
        offsets = self._irq_offsets(i)
        if offsets is None:
            return min(k, m)
        if o in offsets:
            # at the very nanosecond one of this host's interrupts arrives: which
            # counts first, the mix (count restarts) or the interrupt, is the
            # order of the two events in detail: simulate that round trip
            return min(k, m)
        if not self._idle_at(i, t, o, cost, m, k):
            model = None if self._tick is not None else self._tick_model(i, o, cost, offsets)
            # after the mix the count restarts: the interrupts after it must not schedule another
            if model is not None and len(offsets) - bisect.bisect_right(offsets, o) < ep.host.random.threshold:
                key, delay, shifts = model
                if key is None or self.tick_rts.get(key):
                    self._tick = (i, m, o, delay, shifts)   # the last round trip, ``delay`` longer
                    self._mix_in[i] = tick
                    return m + 1
                if m == 0 and key not in self.tick_rts:
                    self._tick_candidate = (key, i, o, delay, shifts)
            return min(k, m)
        self._idle_ticks.append(tick)
        self._mix_in[i] = tick
        # after the mix: count restarts; no new trigger before the fast-forward ends
        n = dirq[i]
        rnd = ep.host.random
        after_in_m = len(offsets) - bisect.bisect_right(offsets, o)   # offsets are in order
        k = min(k, m + 1 + (rnd.threshold - 1 - after_in_m) // n)
        last = ep.k.jiffies_at(tick)
        x = ep.k.tick_time(last + ep.k.HZ + 1) - t - offs[i]
        return min(k, max(m + 1, -(-x // rtt)))

    def _shifts(self, i: int, o: int, cost: int, offsets: list) -> bool:
        """Does a TIMER softirq from offset ``o`` of the steady round trip for
        ``cost`` ns on host ``i``'s CPU only delay everything after it by
        ``cost``?  So when it falls inside qperf's own run: within the CPU's
        busy stretch, clear of every interrupt, softirq, wakeup and context
        switch in it (the measured stretches), with none of host ``i``'s
        interrupts arriving from the tick to the end of the stretch plus
        ``cost`` (the delayed work could meet one), and ending before the
        fast-forward's own wakeup if its round trip is the last one
        (_plan_jump).  The softirq then stretches the running
        chunk (Kernel.steal) and nothing at a fixed time follows on this CPU
        before the message the delayed work sends: the other CPU is idle, the
        interrupts it takes next come from that message.  The same stolen time
        is not charged to qperf, so its counters are the steady ones."""
        rtt = self.steady[0]
        costs = self.client.k.costs
        end = None
        for a, b in self.busy[i]:
            if a <= o + cost and b >= o:
                if end is not None or not (a < o and o + cost < b):
                    return False     # more than qperf's stretch here, or its edge
                end = b
        if end is None:
            return False
        j = bisect.bisect_left(offsets, o)
        if j < len(offsets) and offsets[j] <= end + cost:
            return False
        return self._near_end_check(o + cost >= rtt - costs.wakeup_ns - costs.context_switch_ns - 1)

    def _tick_model(self, i: int, o: int, cost: int, offsets: list) -> tuple | None:
        """What a TIMER softirq from offset ``o`` for ``cost`` ns on host
        ``i``'s busy CPU does to the steady round trip, if it only delays what
        follows: (key, delay, shift of each endpoint's last interrupt), key None
        when no check is needed; None otherwise.

        * Inside qperf's own run (_shifts): everything after it ``cost`` later.
        * Inside the NAPI poll of a message's first batches (a softirq stretch
          within qperf's wakeup-to-sleep stretch that ends at ``L``, the message's
          last interrupt arriving at ``A`` after its start): the poll ends
          ``cost`` later, so the last interrupt's handler starts at
          ``max(A, L + cost)`` instead of ``max(A, L)``, and what depends on it
          (qperf's copy, the reply and the other host's interrupts) moves by the
          difference; this host's interrupts are already on their way.  Checked
          in detail once per stretch before it is replayed (tick_rts).
        * Inside any other busy stretches, clear of their edges (a hard IRQ, a
          NET_RX softirq, a context switch, ...): a delay and shifts learned
          from the round trip simulated in detail, per host and set of stretches
          (tick_inside), and replayed once a second one agrees (the softirq runs
          after the one it interrupts, or is absorbed by a wait: measured, all of
          it or none, the same wherever in those stretches it falls)."""
        if self._shifts(i, o, cost, offsets):
            return None, cost, tuple(cost if off > o else 0 for off in self.steady[3])
        rtt, deltas, dirq, offs = self.steady
        costs = self.client.k.costs
        inside = [(s, a, b) for s, (a, b) in enumerate(self.busy[i]) if a <= o + cost and b >= o]
        if not inside or any(not (a < o and o + cost < b) for _, a, b in inside):
            return None
        poll = self._poll_model(i, o, cost, offsets, inside)
        if poll is not None:
            return poll
        key = (i, tuple(s for s, _, _ in inside))
        delay, shifts = self.tick_inside.get(key, (None, None))
        end = o + cost + (cost if delay is None else delay)
        if not self._near_end_check(end >= rtt - costs.wakeup_ns - costs.context_switch_ns - 1):
            return None
        return key, delay, shifts

    def _poll_model(self, i: int, o: int, cost: int, offsets: list, inside: list) -> tuple | None:
        """_tick_model's NAPI-poll case (``inside``: the stretches the softirq falls in)."""
        rtt, deltas, dirq, offs = self.steady
        costs = self.client.k.costs
        if len(inside) not in (2, 3):
            return None
        # qperf's stretch is the widest; the poll and (if qperf was woken in it)
        # the wait for its kick both end where the poll does
        inside = sorted(inside, key=lambda x: x[2] - x[1])
        s, a, L = inside[-2] if len(inside) == 3 and inside[0][2] == inside[1][2] else inside[0]
        if len(inside) == 3 and inside[0][2] != inside[1][2]:
            return None
        A = offsets[-1]
        if not offsets[0] <= a < A or not any(b0 == max(A, L) for b0, _ in self.busy[i]):
            return None      # not a poll that the last interrupt's handler follows
        delay = max(A, L + cost) - max(A, L)
        if not self._near_end_check(o + cost + delay >= rtt - costs.wakeup_ns - costs.context_switch_ns - 1):
            return None
        return (i, s), delay, tuple(delay if h != i and off > o else 0 for h, off in enumerate(offs))

    def _start_tick_measure(self, t: int) -> None:
        """A clean boundary whose round trip, simulated in detail, has a mix
        timer fire in a NAPI poll whose _tick_model is not checked yet (or in
        stretches whose delay is not learned or not confirmed yet, tick_inside):
        snapshot, to compare with it (or learn it) at the next boundary.  What else the plan
        saw in that round trip -- the other host's mix timer firing while its
        CPU is idle, interrupts that schedule a timer mix -- is expected too."""
        key, i, o, delay, shifts = self._tick_candidate
        self._tick_candidate = None
        rtt = self.steady[0]
        idle = sum(1 for x in self._idle_ticks if x < t + rtt)
        if idle > 1:
            return
        triggers = sum(1 for ep, j, t_trig, _ in self._triggers if t_trig < t + rtt)
        expect = tuple(ep.host.random.fast_pool(ep.cpu).mixes + (h == i) + (h != i and idle > 0)
                       for h, ep in enumerate((self.client, self.server)))
        self._tick_measuring = (key, i, o, delay, shifts, _Snap(t, self._state(), self._irqs(), self._disturb()),
                                expect, 1 + idle + triggers)

    def _end_tick_measure(self, t: int) -> None:
        """The boundary after that round trip: if nothing else happened in it
        (it ended clean; the mixes, and the disturbances, the plan expected; the
        timer's at the tick), it must be the model's -- the steady counters, the
        round trip and the shifted interrupts ``delay`` later -- or the stretch
        is refuted for good.  A tick_inside key seen for the first time learns
        its delay and shifts here instead (refuted if the counters are not the
        steady ones)."""
        key, i, o, delay, shifts, snap, expect, disturb = self._tick_measuring
        self._tick_measuring = None
        eps = (self.client, self.server)
        mixes = tuple(e.host.random.fast_pool(e.cpu).mixes for e in eps)
        last = eps[i].last_mix
        h = 1 - i
        if mixes[h] == expect[h] + 1 and eps[h].last_mix == (snap.t + o, "timer") and self._idle_at(
                h, snap.t, o, eps[h].host.random.params.mix_ns, 0, 1):
            # the other host's mix timer fired at the same tick, while its CPU was
            # idle (a plan stopped by this tick does not look at it): expected too
            expect = tuple(e + (x == h) for x, e in enumerate(expect))
            disturb += 1
        if (self._refills_owed() != NO_REFILLS or self._disturb() - snap.disturb != disturb or mixes != expect
                or last is None or last != (snap.t + o, "timer")):
            return    # something else happened in it: no verdict
        rtt, deltas, dirq, offs = self.steady
        d = tuple(tuple(b - a for a, b in zip(s0, s1)) for s0, s1 in zip(snap.state, self._state()))
        dirq_m = tuple(b - a for a, b in zip(snap.irqs, self._irqs()))
        offs_m = (self.client.last_irq_t - snap.t, self.server.last_irq_t - snap.t)
        if delay is None:
            # the first of a tick_inside key: learn what it did, if it was only a delay
            delay = t - snap.t - rtt
            if d != deltas or dirq_m != dirq or not 0 <= delay <= eps[i].host.random.params.mix_ns:
                self.tick_rts[key] = False
            else:
                self.tick_inside[key] = (delay, tuple(b - a for a, b in zip(offs, offs_m)))
            return
        model = (rtt + delay, deltas, dirq, tuple(off + sh for off, sh in zip(offs, shifts)))
        self.tick_rts[key] = (t - snap.t, d, dirq_m, offs_m) == model

    def _sync_jump(self, ep: "QperfEndpoint") -> None:
        """A mix inside a fast-forward: count the interrupts of ``ep``'s host
        that have arrived by now (the rest are counted when it ends)."""
        t, k, rec, trig = self._jumping
        if rec is not self.steady:  # pragma: no cover - a refill replay is planned without mixes
            raise RuntimeError("qperf fast-forward: a mix inside a replayed refill round trip")
        i = 0 if ep is self.client else 1
        rtt, deltas, dirq, offs = rec
        n = dirq[i]
        offsets = self._irq_offsets(i)
        now = ep.k.now
        m, o = divmod(now - t, rtt)
        shift = 0
        if trig is not None and m >= k - 1:
            # in the last round trip, the trigger one: its message arrives later
            m, o = k - 1, now - t - (k - 1) * rtt
            shift = trig[0][2][i] - offs[i]
        # the offsets are in order: those <= o are the first bisect_right(offsets, o)
        total = k * n if m >= k else m * n + bisect.bisect_right(offsets, o - shift)
        counted = self._jump_counted.get(ep, 0)
        if total > counted:
            j = total - 1
            last = t + (j // n) * rtt + offsets[j % n] + (shift if j // n == k - 1 else 0)
            ep.host.random.add_interrupt_randomness_many(ep.cpu, total - counted, last)
            self._jump_counted[ep] = total

    def _jump_timer_mix(self, ep: "QperfEndpoint", before: int, t_prev: int, bucket: int) -> None:
        """The interrupt that schedules a timer mix inside a fast-forward and
        that timer's expiry at its tick (the plan has it fire there, on an idle
        CPU or as the busy tick, _mix_in): one event at the tick for the two,
        as nothing looks at the pool or the timer in between -- the ``before``
        interrupts since the fast-forward began (the last at ``t_prev``), the
        trigger at its jiffy (``bucket - 1``), the expiry."""
        rnd = ep.host.random
        if before:
            rnd.add_interrupt_randomness_many(ep.cpu, before, t_prev)
        ep.k.timers.expire_now(rnd.add_interrupt_randomness_timer(ep.cpu, bucket - 1), ep.cpu, bucket)

    def _jump_trigger(self, ep: "QperfEndpoint", before: int, t_prev: int) -> None:
        """The interrupt that schedules a mix, inside a fast-forward: count the
        ``before`` interrupts since it began (the last at ``t_prev``), then it."""
        rnd = ep.host.random
        if before:
            rnd.add_interrupt_randomness_many(ep.cpu, before, t_prev)
        if not rnd.add_interrupt_randomness(ep.cpu):  # pragma: no cover - planned so
            raise RuntimeError("qperf fast-forward: the planned mix trigger did not trigger")

    def jump(self, task: Task, t: int, k: int) -> TaskBody:
        """Skip ``k`` round trips of the record boundary() chose (the steady
        one, or one refill round trip; or steady ones and a trigger round trip
        last, ``_trigger``): block until they would have ended."""
        rec = self._record
        rtt = rec[0]
        costs = self.client.k.costs
        engine = self.client.k.engine
        trig, self._trigger = self._trigger, None
        tick, self._tick = self._tick, None
        tail, self._tail = self._tail, 0
        last_rtt = trig[0][0] if trig is not None else rtt + tick[3] if tick is not None else rtt
        after = trig[2] if trig is not None else None
        t_tail = t + (k - 1) * rtt + last_rtt + (after[0] if after is not None else 0)
        t_resume = t_tail + tail * self.steady[0]
        if self.wl.continuous:
            if last_rtt == rtt:
                self.skipped.append((t, rtt, k))
            else:
                if k > 1:
                    self.skipped.append((t, rtt, k - 1))
                self.skipped.append((t + (k - 1) * rtt, last_rtt, 1))
            if after is not None:
                self.skipped.append((t + (k - 1) * rtt + last_rtt, after[0], 1))
            if tail:
                self.skipped.append((t_tail, self.steady[0], tail))
        if trig is not None:
            self.trigger_replays += 1
            self.trigger_refill_replays += after is not None
        if tick is not None:
            self.tick_replays += 1
        self.tail_rts += tail
        counted = {}
        for ep, j, t_trig, t_before in self._triggers:
            i = 0 if ep is self.client else 1
            if j < k * rec[2][i]:   # inside this jump
                # interrupts 0 .. j-1 are counted there, j is the trigger itself;
                # a timer mix fires at the next tick (expires = jiffies), in the
                # same event when it fires inside this jump and this slice (the
                # deferral may change after it)
                bucket = ep.k.jiffies_at(t_trig) + 1
                t_mix = ep.k.tick_time(bucket)
                if (self._mix_in.get(i) == t_mix and t_mix < t_resume and engine.recorder is None
                        and (engine.until is None or t_mix <= engine.until)):
                    engine.at(t_mix, self._jump_timer_mix, ep, j, t_before, bucket)
                else:
                    engine.at(t_trig, self._jump_trigger, ep, j, t_before)
                counted[ep] = j + 1
        if trig is not None:
            until = engine.until
            for ep, i, j, t_trig, t_before, t_mix, w, v_end in trig[1]:
                if until is None or t_mix <= until:
                    # one event for both, nothing looking at the pool in between
                    engine.at(t_mix, self._jump_wq_mix, ep, j, t_before, t_trig, trig[0][4][i], w, v_end)
                else:
                    engine.at(t_trig, self._jump_wq_trigger, ep, j, t_before)
                    engine.at(t_mix, self._jump_kworker, ep, trig[0][4][i], w, v_end, t_trig)
                counted[ep] = j + 1
        self._jump_counted = counted
        self._jumping = (t, k, rec, trig)
        engine.at(t_resume - costs.wakeup_ns - costs.context_switch_ns, self._jump_end, k, t, rec, trig, tick,
                  tail)
        self.jumps += 1
        rec = self.client.k.engine.recorder
        if rec is not None:
            # one slice per host for the k round trips skipped, not k * (events per round trip)
            for ep in (self.client, self.server):
                rec.slice("aggregated", (ep.k.name, ep.cpu), f"qperf: {k} round trips (aggregated)",
                          t, t_resume, round_trips=k, rtt_ns=rtt, msg_size=self.wl.size)
        yield BLOCK
        # the jump's own block/wake moved min_vruntime; put back what k
        # steady round trips would have left
        mv = self._min_vr_after_jump
        if mv is not None:
            self.client.k.cpus[self.cpu].min_vruntime = mv
            self._min_vr_after_jump = None

    def _jump_wq_trigger(self, ep: "QperfEndpoint", before: int, t_prev: int, jiffies: int | None = None) -> None:
        """The interrupt that schedules a workqueue mix, inside a fast-forward
        that replays a trigger round trip: count the ``before`` interrupts since
        it began (the last at ``t_prev``), then it, at ``jiffies`` (default now;
        the work queued, its kworker's run replayed by _jump_kworker)."""
        rnd = ep.host.random
        if before:
            rnd.add_interrupt_randomness_many(ep.cpu, before, t_prev)
        rnd.add_interrupt_randomness_queued(ep.cpu, jiffies)

    def _jump_wq_mix(self, ep: "QperfEndpoint", before: int, t_prev: int, t_trig: int, kw: tuple, w: Task,
                     v_end: int) -> None:
        """_jump_wq_trigger (as at ``t_trig``) and _jump_kworker in one event
        at the kworker's mix, when both fall inside the slice (the deferral
        cannot change in between) and nothing looks at the pool in between."""
        self._jump_wq_trigger(ep, before, t_prev, ep.k.jiffies_at(t_trig))
        self._jump_kworker(ep, kw, w, v_end, t_trig)

    def _jump_kworker(self, ep: "QperfEndpoint", kw: tuple, w: Task, v_end: int, t_woken: int) -> None:
        """Where the kworker of a trigger round trip ran its work: its CPU
        time, switches and vruntime (``v_end``, _kworker_after), then
        mix_interrupt_randomness() as worker_thread() calls it."""
        _, run, dexec, dnvcsw, dnivcsw = kw
        w.woken_ns = t_woken
        w.woken_vruntime = v_end - run
        w.vruntime = v_end
        w.sum_exec_runtime += dexec
        w.nvcsw += dnvcsw
        w.nivcsw += dnivcsw
        rnd = ep.host.random
        rnd.mix_interrupt_randomness(rnd.fast_pool(ep.cpu), "kworker")

    def _jump_end(self, k: int, t: int, rec: tuple, trig: tuple | None = None, tick: tuple | None = None,
                  tail: int = 0) -> None:
        """The end of a fast-forward from ``t``: what its round trips left, on
        both hosts -- ``k`` of ``rec`` (the last one the trigger round trip of
        ``trig``, or the steady one with the busy ``tick``), the refill round
        trip after a trigger one (``trig[2]``), then ``tail`` steady ones --
        and qperf woken where the last of them ends."""
        rtt, deltas, dirq, offs = rec
        counted = self._jump_counted
        self._jumping = None
        refill = rec is not self.steady
        after = None
        t_last = t + (k - 1) * rtt               # the last of the k starts here
        if trig is not None:
            trtt, tdeltas, toffs, mix_offs, _, ends, refills, disturbs = trig[0]
            after = trig[2]
            t_tail = t_last + trtt + (after[0] if after is not None else 0)
        else:
            t_tail = t_last + rtt + (tick[3] if tick is not None else 0)
        rts = k + (after is not None) + tail
        srtt, sdeltas, _, soffs = self.steady     # the tail's
        for i, (ep, d, n, off) in enumerate(zip((self.client, self.server), deltas, dirq, offs)):
            if refill:
                # the refills the replayed round trip paid (_run_cost, _netrx_cost)
                paid = ep.cold_qperf + ep.cold_netrx
                ep.cold_qperf = ep.cold_netrx = False
                ep.refills += paid
                ep.disturb += paid
            if tail:
                last = t_tail + (tail - 1) * srtt + soffs[i]   # in the last steady one after it
            elif after is not None:
                last = t_last + trtt + after[3][i]              # in the refill round trip after it
            elif trig is not None:
                last = t_last + toffs[i]
            else:
                last = t_last + off
                if tick is not None:
                    last += tick[4][i]    # after the busy tick: later by its delay
            if n:
                left = rts * n - counted.get(ep, 0)
                if left:
                    ep.host.random.add_interrupt_randomness_many(ep.cpu, left, last)
                ep.last_irq_t = last
            task = ep.task
            rq = ep.k.cpus[ep.cpu]
            # k - 1 round trips of the record, then the last of the k: the
            # record's again, or the trigger round trip's; and the tail's
            td = d if trig is None else tdeltas[i]
            ad = _NO_DELTAS if after is None else after[1][i]     # the refill round trip after it
            sd = sdeltas[i]
            task.vruntime += (k - 1) * d[0] + td[0] + ad[0] + tail * sd[0]
            task.sum_exec_runtime += (k - 1) * d[1] + td[1] + ad[1] + tail * sd[1]
            task.nvcsw += (k - 1) * d[2] + td[2] + ad[2] + tail * sd[2]
            task.nivcsw += (k - 1) * d[3] + td[3] + ad[3] + tail * sd[3]
            rq.nr_switches += (k - 1) * d[4] + td[4] + ad[4] + tail * sd[4]
            rq.busy_ns += (k - 1) * d[5] + td[5] + ad[5] + tail * sd[5]
            rq.min_vruntime += (k - 1) * d[6] + td[6] + ad[6] + tail * sd[6]
            if trig is not None:
                # what the trigger round trip paid and left owed (its mix's own
                # hook set both refills and counted itself)
                ep.cold_qperf, ep.cold_netrx = ends[i]
                ep.refills += refills[i]
                ep.disturb += disturbs[i] - (mix_offs[i] is not None)
            if after is not None:
                # the refills the refill round trip after it paid
                paid = ep.cold_qperf + ep.cold_netrx
                ep.cold_qperf = ep.cold_netrx = False
                ep.refills += paid
                ep.disturb += paid
            ep.msgs_received += rts
        cl = self.client
        crq = cl.k.cpus[cl.cpu]
        # the jump's own BLOCK and switch-in are not round trips
        cl.task.nvcsw -= 1
        crq.nr_switches -= 1
        self._min_vr_after_jump = crq.min_vruntime
        self.rts += rts
        self.prev = None
        cl.k.wake_up_on_idle(cl.task)


class QperfTcpLat:
    """The seed's qperf run on two hosts: ``pairs`` client/server pairs, one size at a time.

    ``random_factory(kernel)`` builds each host's :class:`IrqRandomness`.
    ``mode``: ``"aggregated"`` fast-forwards steady round trips, ``"exact"``
    simulates every one (the same figures, slower).  ``learned``: what the
    fast-forward learns goes there and is taken from there (the simulation's
    :class:`QperfLearned`, shared by its runs); None: this run's own.
    """

    def __init__(self, platform: "Platform", *, random_factory, preempt: str, rng,
                 instances: int = 1, mode: str = "aggregated", learned: QperfLearned | None = None):
        if mode not in QPERF_MODES:
            raise ConfigError("mode", mode, ", ".join(QPERF_MODES))
        if platform.nic is None or "qperf_host" not in platform.extra:
            raise ConfigError("platform", platform.name, "a platform with an IPoIB NIC (x86-ib40g)")
        self.platform = platform
        #: run_slice(): the ping-pong runs on without a pause (an environment)
        self.continuous = False
        self.nic: NicParams = platform.nic
        self.stack: HostStackParams = platform.extra["qperf_host"]
        self.rng = rng
        self.fast_forward = mode == "aggregated"
        #: the fast-forward's memory (None in exact mode)
        self.learned: QperfLearned | None = ((learned if learned is not None else QperfLearned())
                                             if self.fast_forward else None)
        self.engine = Engine()
        self.hosts = [QperfHost(self.engine, platform, role, random_factory=random_factory,
                                preempt=preempt, rng=rng) for role in ("client", "server")]
        self.size = 0
        self.pairs = [QperfPair(self, cpu) for cpu in range(instances)]
        # let the endpoints reach their first read()/wait
        self.engine.run(stop=lambda: all(p.client.task.state == "S" and p.server.waiting
                                         for p in self.pairs))

    # the client loop lives here because it needs the pair
    def client_body(self, ep: QperfEndpoint, task: Task) -> TaskBody:
        pair = next(p for p in self.pairs if p.client is ep)
        while True:
            yield BLOCK                      # until run_size() starts us
            size = self.size
            t0 = ep.k.now
            pair.t_first = t0
            pair.prev = None
            if pair.steady_size != size:
                # the steady round trip is a property of the size: measure it
                # again only when the size changes
                pair.start_size(size)
            pair.candidate = None
            pair.fresh = True
            rts0 = pair.rts
            while True:
                t = ep.k.now
                if t >= pair.t_end:
                    break
                k = pair.boundary(t)
                if k > 0:
                    yield from pair.jump(task, t, k)
                    continue
                pair.detailed += 1
                yield from ep._send_message(task, size)
                yield from ep._recv_message(task)
                pair.rts += 1
                yield Run(ep.stack.user_ns, user=True)
                if self.continuous:
                    pair.completed.append((ep.k.now, ep.k.now - t))
            pair.elapsed = ep.k.now - t0
            pair.size_rts = pair.rts - rts0
            pair.done = True

    def run_slice(self, size: int, until: int, min_rtt_ns: int = 0) -> list[SizeStats]:
        """Run on to ``until`` without pausing qperf (an environment's step):
        the first call starts every client at an arbitrary phase of the tick,
        later calls continue the same ping-pong.  Per pair: the round trips
        completed in the slice and their mean latency (RTT / 2), or, if none
        completed, that of the round trip in flight: it has taken the time
        since the last completion so far, and will take at least
        ``min_rtt_ns`` (the undisturbed round trip, a lower bound of every
        round trip; without it a round trip begun just before ``until`` would
        count as a latency of a few ns).  A client whose first round trip has
        not begun by ``until`` has none in flight: its latency is 0 (the slice
        measured nothing; the first call's start phase is drawn over a whole
        tick, longer than a slice with HZ=100 and 5 ms slices).
        """
        eng = self.engine
        if not self.continuous:
            self.continuous = True
            self.size = size
            for p in self.pairs:
                t0 = eng.now + 1 + int(self.rng.integers(0, p.client.k.TICK_NSEC))
                p.t_end = NEVER
                p.done = False
                p.last_completion = t0
                eng.at(t0, p.client.k.wake_up_process, p.client.task)
        elif size != self.size:
            raise ConfigError("msg_size", size, f"{self.size} (run_slice keeps one size)")
        t_from = eng.now
        starts = [_counters(p) for p in self.pairs]
        eng.run(until=until)
        out = []
        for p, start in zip(self.pairs, starts):
            count, total = _credit(p, t_from, until)
            # (last_completion is the client's start until its first round
            # trip completes; a start after ``until`` must not count as a
            # negative wait)
            if count:
                lat = total / (2 * count)
            elif p.last_completion >= until:
                lat = 0.0
            else:
                lat = max(until - p.last_completion, min_rtt_ns) / 2
            out.append(_size_stats(p, start, size, until - t_from, count, lat))
        return out

    def run_size(self, size: int, time_ns: int) -> list[SizeStats]:
        """Run all pairs at ``size`` for ``time_ns`` each; return per-pair stats."""
        self.size = size
        eng = self.engine
        starts = []
        for p in self.pairs:
            starts.append(_counters(p))
            # qperf's per-size negotiation lands at an arbitrary phase of the tick
            t0 = eng.now + 1 + int(self.rng.integers(0, p.client.k.TICK_NSEC))
            p.t_end = t0 + time_ns
            p.done = False
            eng.at(t0, p.client.k.wake_up_process, p.client.task)
        pairs = self.pairs
        if len(pairs) == 1:   # the stop test runs after every event: keep it cheap
            (only,) = pairs
            eng.run(stop=lambda: only.done)
        else:
            eng.run(stop=lambda: all(p.done for p in pairs))
        return [_size_stats(p, start, size, p.elapsed, p.size_rts,
                            p.elapsed / (2 * p.size_rts) if p.size_rts else float("nan"))
                for p, start in zip(self.pairs, starts)]


def steady_round_trip(platform: "Platform", *, preempt: str, size: int,
                      learned: QperfLearned | None = None) -> int:
    """The undisturbed round trip (ns) of ``size``-byte messages between two
    ``platform`` hosts with ``preempt``: the steady round trip the fast-forward
    measures, here from a short run of its own (once per machine and size
    for a ``learned``; every call without one, every round trip simulated), so
    that what a run reports against it does not depend on when that run got
    to measure it."""
    key = _machine_key(platform.nic, platform.extra["qperf_host"], platform.sched, platform.hz, preempt,
                       platform.nr_cpus) + (size,)

    def measure() -> int:
        wl = QperfTcpLat(platform, random_factory=irq_randomness_factory(platform), preempt=preempt,
                         rng=np.random.default_rng(0), mode="exact" if learned is None else "aggregated",
                         learned=learned)
        pair = wl.pairs[0]
        for _ in range(1000):   # a millisecond at a time, until it is measured (at most 1 s)
            wl.run_slice(size, wl.engine.now + NSEC_PER_MSEC)
            if pair.steady is not None:
                return pair.steady[0]
        # pragma: no cover - two clean round trips alike come within a few
        raise RuntimeError(f"qperf: no steady round trip at {size} bytes on {platform.name}")

    return measure() if learned is None else learned.steady_rtt(key, measure)


def _counters(pair: "QperfPair") -> tuple[int, int, int, int]:
    """The client's mixes and interrupts, and the pair's detailed round trips and fast-forwards, so far."""
    fp = pair.client.host.random.fast_pool(pair.cpu)
    return fp.mixes, fp.irqs, pair.detailed, pair.jumps


def _size_stats(pair: "QperfPair", start: tuple, size: int, elapsed: int, count: int,
                latency_ns: float) -> SizeStats:
    """``pair``'s SizeStats since its counters were ``start`` (:func:`_counters`)."""
    m0, i0, d0, j0 = start
    m1, i1, d1, j1 = _counters(pair)
    return SizeStats(size, elapsed, count, latency_ns, mixes_client=m1 - m0, irqs_client=i1 - i0,
                     detailed_round_trips=d1 - d0, jumps=j1 - j0)


def _credit(pair: "QperfPair", t_from: int, t_to: int) -> tuple[int, int]:
    """Round trips of ``pair`` that completed in (t_from, t_to], and their total duration."""
    count = total = 0
    keep = []
    for end, dur in pair.completed:
        if end <= t_to:
            if end > t_from:
                count += 1
                total += dur
                pair.last_completion = max(pair.last_completion, end)
        else:
            keep.append((end, dur))
    pair.completed = keep
    left = []
    for t0, rtt, k in pair.skipped:
        lo = min(k, max(0, (t_from - t0) // rtt))
        hi = min(k, max(0, (t_to - t0) // rtt))
        if hi > lo:
            count += hi - lo
            total += (hi - lo) * rtt
            pair.last_completion = max(pair.last_completion, t0 + hi * rtt)
        if hi < k:
            left.append((t0, rtt, k))
    pair.skipped = left
    return count, total


def parse_size(text: str) -> int:
    """qperf size syntax: ``4K`` = 4096, ``1M`` = 1048576, plain bytes otherwise."""
    t = text.strip().upper()
    mult = 1
    if t.endswith("K"):
        mult, t = 1024, t[:-1]
    elif t.endswith("M"):
        mult, t = 1024 * 1024, t[:-1]
    if not t.isdigit():
        raise ValueError(text)
    return int(t) * mult


def parse_sizes(spec: str) -> list[int]:
    """``"4K:1024K"`` -> 4K, 8K, ... 1024K (qperf's ``msg_size:4K:1024K:*2``);
    ``"64K"`` -> [64K]; ``"4K:1024K:*4"`` multiplies by 4."""
    allowed = "SIZE or START:END[:*F] with K/M suffixes, e.g. 4K:1024K (x2 steps), 1 B .. 64M"
    if not isinstance(spec, str):
        raise ConfigError("sizes", spec, allowed)
    parts = spec.split(":")
    try:
        if len(parts) == 1:
            sizes = [parse_size(parts[0])]
        elif len(parts) in (2, 3):
            lo, hi = parse_size(parts[0]), parse_size(parts[1])
            factor = 2
            if len(parts) == 3:
                f = parts[2].strip()
                if not f.startswith("*") or not f[1:].isdigit() or int(f[1:]) < 2:
                    raise ValueError(f)
                factor = int(f[1:])
            if lo <= 0 or hi < lo:
                raise ValueError(spec)
            sizes = []
            s = lo
            while s <= hi:
                sizes.append(s)
                s *= factor
        else:
            raise ValueError(spec)
    except ValueError:
        raise ConfigError("sizes", spec, allowed) from None
    if not sizes or sizes[0] <= 0 or sizes[-1] > 64 * 1024 * 1024:
        raise ConfigError("sizes", spec, allowed)
    return sizes


def format_size(n: int) -> str:
    if n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    if n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} bytes"


__all__ = [
    "HostStackParams", "NicParams", "QperfEndpoint", "QperfHost", "QperfLearned", "QperfPair", "QperfTcpLat",
    "RxMessage", "SizeStats", "format_size", "irq_randomness_factory", "parse_size", "parse_sizes",
    "steady_round_trip",
]
