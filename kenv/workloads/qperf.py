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
arrived so that it credits them.  Between rare events
whole round trips are skipped arithmetically by the pair's fast-forward
(:mod:`kenv.fastforward.qperf`, which says what it learns and when it
declines).  ``mode="exact"`` turns it off (every round trip is simulated); the
tests and the benchmark check that both modes give the same figures.
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ..drivers.random import FAST_POOL_MIX_THRESHOLD, IrqRandomness
from ..errors import ConfigError
from ..schema import check_choice
from ..kernel.core import BLOCK, Kernel, Run, Task, TaskBody
from ..sim.engine import NSEC_PER_MSEC, Engine
from ..fastforward.qperf import QperfFastForward
from ..fastforward.qperf_records import QperfLearned, machine_key

if TYPE_CHECKING:  # pragma: no cover
    from ..platforms.base import Platform

#: run_slice(): the client's t_end (it never stops)
NEVER = 1 << 62


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

    def napi_batch(self, overhead_ns: int | None = None) -> int | None:
        """Packets per interrupt once NAPI races the wire (None: the poll never
        empties).  ``overhead_ns``: the CPU time of one interrupt besides its
        packets, during which the next ones arrive (default ``irq_ns``; with
        forced interrupt threads, also the thread's switch in and out)."""
        gain = self.wire_ns - self.rx_pkt_ns
        if gain <= 0:
            return None
        return max(1, math.ceil((self.irq_ns if overhead_ns is None else overhead_ns) / gain))


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

class MessageShape(NamedTuple):
    """A message's packets and NAPI interrupts at one CPU (:func:`_message_shape`)."""
    packets: int
    batch: int            # packets per interrupt (B)
    n_irq: int
    mss: int
    offsets: tuple        # of each interrupt from the first packet's arrival
    head_bytes: int       # payload of batches 0 .. n_irq - 2: full-MSS packets
    last_bytes: int       # payload of the last batch: the remainder in its last packet
    last_packets: int     # packets of the last batch


@functools.lru_cache(maxsize=256)
def _message_shape(nic: NicParams, size: int, overhead_ns: int | None = None) -> MessageShape:
    """The shape of a ``size``-byte message: interrupt ``j`` (0-based) is taken
    when batch ``j`` is complete, ``min((j + 1) * B, packets) * wire_ns``
    after the first packet's arrival would start (``overhead_ns``:
    NicParams.napi_batch)."""
    packets = nic.packets(size)
    b = nic.napi_batch(overhead_ns)
    batch = packets if b is None else min(b, packets)
    n_irq = -(-packets // batch)
    wire_ns = nic.wire_ns
    offsets = tuple(int(min((j + 1) * batch, packets) * wire_ns) for j in range(n_irq))
    head_packets = (n_irq - 1) * batch      # (fewer than packets: the last batch has some)
    head_bytes = min(size, head_packets * nic.mss)
    return MessageShape(packets, batch, n_irq, nic.mss, offsets, head_bytes, size - head_bytes,
                        packets - head_packets)


class RxMessage:
    """The NAPI interrupt stream of one message arriving at one CPU
    (``shape``: :func:`_message_shape`).

    Interrupt ``j`` (0-based) is taken when batch ``j`` is complete:
    ``t0 + min((j + 1) * B, packets) * wire_ns``.
    """

    __slots__ = ("size", "t0", "shape", "batch", "packets", "n_irq", "offsets", "next_irq", "trigger_ev")

    def __init__(self, size: int, t0: int, shape: MessageShape):
        self.size = size
        self.t0 = t0
        self.shape = shape
        self.packets, self.batch, self.n_irq = shape.packets, shape.batch, shape.n_irq
        self.offsets = shape.offsets
        self.next_irq = 0          # interrupts [0, next_irq) have been counted
        self.trigger_ev = None

    def irq_time(self, j: int) -> int:
        return self.t0 + self.offsets[j]


# ---------------------------------------------------------------------------
# a host and a qperf endpoint on it
# ---------------------------------------------------------------------------

class QperfHost:
    """One machine: a kernel, its random.c interrupt state, its qperf endpoints."""

    def __init__(self, engine: Engine, platform: "Platform", role: str, *, random_factory,
                 preempt: str, rng, load_balance: bool = False, irq_threads: bool = False):
        self.role = role
        self.platform = platform
        self.k = Kernel(engine, nr_cpus=platform.nr_cpus, hz=platform.hz, preempt=preempt,
                        costs=platform.sched, rng=rng, name=role, load_balance=load_balance,
                        kernel_version=platform.kernel_version, irq_threads=irq_threads)
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
            ff = ep.pair.ff if ep.pair is not None else None
            if ff is not None and ff.jumping is not None:
                ff.sync_jump(ep)   # a mix timer inside a fast-forward

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
        self._shape: MessageShape | None = None
        # an interrupt's CPU time besides its packets (NicParams.napi_batch): on
        # PREEMPT_RT with the threads simulated, the hard part and the switch to
        # irq/N-mlx4-ib0 and back (a middle batch's, charged in the lump)
        self.irq_overhead_ns = nic.irq_ns + (2 * self.k.costs.context_switch_ns if self.k.irq else 0)
        # request_irq() at the driver's probe: with forced threading its thread
        # exists (and sleeps) before qperf starts, as on a booted machine
        self.irq_thread = self.k.irq.irq_thread(cpu, "mlx4-ib0") if self.k.irq else None
        host.endpoints[cpu] = self
        host.boot_kworkers(cpu)
        self.task: Task = self.k.kthread_run(self._body, f"qperf-{role}", cpu=cpu)
        #: the runqueue of its CPU (per_cpu(runqueues, cpu))
        self.rq = self.k.cpus[cpu]

    # ---------------------------------------------------------- receive side
    def start_message(self, size: int, t0: int) -> None:
        """The first packet of a message leaves the sender's HCA at ``t0 - wire_latency``."""
        msg = RxMessage(size, t0, self.message_shape(size))
        self.rx = msg
        eng = self.k.engine
        if msg.n_irq == 1:
            eng.at(msg.irq_time(0), self._irq_single)
        else:
            eng.at(msg.irq_time(0), self._irq_first)
            eng.at(msg.irq_time(msg.n_irq - 1), self._irq_last)

    def message_shape(self, size: int) -> MessageShape:
        """:func:`_message_shape` of a ``size``-byte message arriving here (one
        size at a time: looked up once per size)."""
        if size != self._shape_size:
            self._shape_size, self._shape = size, _message_shape(self.nic, size, self.irq_overhead_ns)
        return self._shape

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
        cost = packets * self.nic.rx_pkt_ns + extra_irqs * self.irq_overhead_ns
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
        self._net_rx(self._netrx_cost(msg.packets), msg.size)

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
        self._net_rx(self._netrx_cost(pk, last - 1), msg.shape.head_bytes)
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
        self._net_rx(self._netrx_cost(msg.shape.last_packets), msg.shape.last_bytes)

    def _net_rx(self, cost_ns: int, nbytes: int) -> None:
        """The NAPI poll that napi_schedule() raised (NET_RX), ``cost_ns`` of CPU,
        delivering ``nbytes``: on the way out of the hard IRQ, or with forced
        interrupt threads in irq/N-mlx4-ib0 (irq_forced_thread_fn(): the
        handler, then NET_RX at its local_bh_enable())."""
        if self.irq_thread is None:
            self.k.run_softirq(self.cpu, "NET_RX", cost_ns, self._deliver, nbytes)
        else:   # __irq_wake_thread()
            self.irq_thread.wake(cost_ns, self._deliver, nbytes)

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


class QperfPair:
    """One qperf client on host A and its server on host B, CPU ``cpu`` on both;
    ``ff`` its fast-forward (:class:`~kenv.fastforward.qperf.QperfFastForward`,
    None when every round trip is simulated)."""

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
        #: run_slice(): the client waits for traffic to resume (next_size 0)
        self.paused = False
        #: run_slice(hold=T): the traffic may change at T, a fast-forward
        #: skips no round trip that starts at or after it
        self.t_hold = NEVER
        self.done = True
        self.rts = 0
        self.elapsed = 0
        self.size_rts = 0
        # run_slice() (no pause between slices): round trips completed in detail,
        # as (end, duration), and fast-forwards as (start, rtt, k), until credited
        self.completed: list[tuple[int, int]] = []
        self.skipped: list[tuple[int, int, int]] = []
        self.last_completion = 0
        self.detailed = 0
        self.jumps = 0
        self.ff: QperfFastForward | None = QperfFastForward(self) if wl.fast_forward else None

    @property
    def t_limit(self) -> int:
        """No fast-forward skips a round trip that starts at or after this."""
        return min(self.t_end, self.t_hold)

    def irq_arrivals(self) -> tuple:
        """Offsets of a message's interrupts from its first packet's arrival, at the current size."""
        return self.client.message_shape(self.wl.size).offsets

    def start_run(self, size: int) -> None:
        """qperf starts (again) at ``size``."""
        if self.ff is not None:
            self.ff.start_run(size)

    def boundary(self, t: int) -> int:
        """At the top of the client loop: how many round trips the fast-forward
        skips from ``t`` (0: simulate the next one in detail)."""
        return 0 if self.ff is None else self.ff.boundary(t)


class QperfTcpLat:
    """The seed's qperf run on two hosts: ``pairs`` client/server pairs, one size at a time.

    ``random_factory(kernel)`` builds each host's :class:`IrqRandomness`.
    ``mode``: ``"aggregated"`` fast-forwards steady round trips, ``"exact"``
    simulates every one (the same figures, slower).  ``learned``: what the
    fast-forward learns goes there and is taken from there (the simulation's
    :class:`QperfLearned`, shared by its runs); None: this run's own.
    """

    def __init__(self, platform: "Platform", *, random_factory, preempt: str, rng,
                 instances: int = 1, mode: str = "aggregated", learned: QperfLearned | None = None,
                 load_balance: bool = False, irq_threads: bool = False):
        check_choice(mode, "mode", QPERF_MODES)
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
                                preempt=preempt, rng=rng, load_balance=load_balance,
                                irq_threads=irq_threads)
                      for role in ("client", "server")]
        self.size = 0
        #: run_slice(): the size (0: none, a pause) the clients take at their
        #: next round trip (qperf's next test of a sweep; an environment's phases)
        self.next_size = 0
        self.pairs = [QperfPair(self, cpu) for cpu in range(instances)]
        # let the endpoints reach their first read()/wait
        self.engine.run(stop=lambda: all(p.client.task.state == "S" and p.server.waiting
                                         for p in self.pairs))

    # the client loop lives here because it needs the pair
    def client_body(self, ep: QperfEndpoint, task: Task) -> TaskBody:
        pair = next(p for p in self.pairs if p.client is ep)
        eng = self.engine        # (the time: both hosts')
        while True:
            yield BLOCK                      # until run_size() starts us
            size = self.size
            t0 = eng.now
            pair.t_first = t0
            pair.start_run(size)
            rts0 = pair.rts
            while True:
                t = eng.now
                if t >= pair.t_end:
                    break
                if self.next_size != size and self.continuous:
                    # run_slice asked for another size, or a pause: the
                    # message in flight has ended; qperf starts its next test
                    if self.next_size == 0:
                        while self.next_size == 0:
                            pair.paused = True
                            yield BLOCK          # woken by run_slice
                            pair.paused = False
                        pair.last_completion = eng.now   # (the ping-pong starts again)
                    self.size = size = self.next_size
                    pair.start_run(size)
                    continue
                k = pair.boundary(t)
                if k > 0:
                    pair.jumps += 1
                    yield from pair.ff.jump(task, t, k)
                    continue
                pair.detailed += 1
                yield from ep._send_message(task, size)
                yield from ep._recv_message(task)
                pair.rts += 1
                yield Run(ep.stack.user_ns, user=True)
                if self.continuous:
                    now = eng.now
                    pair.completed.append((now, now - t))
            pair.elapsed = eng.now - t0
            pair.size_rts = pair.rts - rts0
            pair.done = True

    def run_slice(self, size: int, until: int, min_rtt_ns: int = 0, hold: int | None = None) -> list[SizeStats]:
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

        A later call may change ``size`` (qperf's next test, as a sweep does:
        the round trip in flight ends at the old size, the next is at the
        new one) or pass 0: the traffic pauses (the client sleeps after its
        round trip in flight) until a call with a size resumes it.  ``hold``:
        the time of the next such change (no fast-forward skips a round trip
        that starts at or after it); a change that the previous call's
        ``hold`` did not announce for this call's start is a ConfigError.
        """
        eng = self.engine
        if not self.continuous:
            if not size:
                raise ConfigError("msg_size", size, "a size > 0 for the first slice (0 pauses a running qperf)")
            self.continuous = True
            self.size = self.next_size = size
            for p in self.pairs:
                t0 = eng.now + 1 + int(self.rng.integers(0, p.client.k.TICK_NSEC))
                p.t_end = NEVER
                p.done = False
                p.last_completion = t0
                eng.at(t0, p.client.k.wake_up_process, p.client.task)
        else:
            if size != self.next_size and any(p.t_hold > eng.now for p in self.pairs):
                # (a fast-forward planned without it may run on at the old size)
                raise ConfigError("msg_size", size, f"{self.next_size}, or another size announced by the "
                                  "previous run_slice's hold= (the time of the change)")
            # a new size (0: a pause) from the clients' next round trip on
            self.next_size = size
        t_hold = NEVER if hold is None else hold
        for p in self.pairs:
            if size and p.paused:    # (none is before the first slice)
                p.client.k.wake_up_process(p.client.task)
            p.t_hold = t_hold
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
                      learned: QperfLearned | None = None, irq_threads: bool = False) -> int:
    """The undisturbed round trip (ns) of ``size``-byte messages between two
    ``platform`` hosts with ``preempt``: the steady round trip the fast-forward
    measures, here from a short run of its own (once per machine and size
    for a ``learned``; every call without one), so that what a run reports
    against it does not depend on when that run got to measure it.  (The
    fast-forward measures it in detail before it skips anything, so the
    answer is that of every round trip simulated.)"""
    key = machine_key(platform.nic, platform.extra["qperf_host"], platform.sched, platform.hz, preempt,
                       platform.nr_cpus, irq_threads and preempt == "rt") + (size,)

    def measure() -> int:
        wl = QperfTcpLat(platform, random_factory=irq_randomness_factory(platform), preempt=preempt,
                         rng=np.random.default_rng(0), irq_threads=irq_threads,
                         learned=learned if learned is not None else QperfLearned())
        pair = wl.pairs[0]
        for _ in range(1000):   # a millisecond at a time, until it is measured (at most 1 s)
            wl.run_slice(size, wl.engine.now + NSEC_PER_MSEC)
            if pair.ff.steady is not None:
                return pair.ff.steady.rtt
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
                if end > pair.last_completion:
                    pair.last_completion = end
        else:
            keep.append((end, dur))
    pair.completed = keep
    left = []
    for t0, rtt, k in pair.skipped:
        # of the k round trips from t0, those completed by t_from and by t_to
        # (clamped to 0 .. k without min() and max(): this runs every step)
        lo = (t_from - t0) // rtt
        lo = 0 if lo < 0 else k if lo > k else lo
        hi = (t_to - t0) // rtt
        hi = 0 if hi < 0 else k if hi > k else hi
        if hi > lo:
            count += hi - lo
            total += (hi - lo) * rtt
            end = t0 + hi * rtt
            if end > pair.last_completion:
                pair.last_completion = end
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
    "HostStackParams", "MessageShape", "NicParams", "QperfEndpoint", "QperfHost", "QperfLearned", "QperfPair",
    "QperfTcpLat", "RxMessage", "SizeStats", "format_size", "irq_randomness_factory", "parse_size", "parse_sizes",
    "steady_round_trip",
]
