"""What the qperf fast-forward records and keeps: the round trips it learns
(the steady one, a refill one, a trigger one, a busy tick's), the plan a
boundary makes and the jump in progress, and :class:`QperfLearned`, the
memory of one simulation (kenv.fastforward.qperf says what each is for).
Shared by the core (kenv.fastforward.qperf) and its extensions."""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import sub
from typing import TYPE_CHECKING, NamedTuple

from ..errors import ConfigError
from ..kernel.core import Task
from ..sim.lru import LruTable
from .declines import Declines

if TYPE_CHECKING:  # pragma: no cover
    from ..workloads.qperf import QperfEndpoint


#: the most round trips one fast-forward skips (the HZ rule bounds them anyway:
#: a mix at least every second)
MAX_JUMP_ROUND_TRIPS = 1 << 32
#: QperfFastForward.refills_owed() of a clean state: no endpoint owes a refill
NO_REFILLS = ((False, False), (False, False))

#: tables kept per QperfLearned (one per machine, CPU and message size; the
#: steady round trips of steady_round_trip() likewise): past this many the
#: least recently used one is forgotten (measured again when it comes back).
#: RandomMix-v2's and Kernel-v3's scenario fields allow 4 preemption models
#: x 4 HZ x 9 sizes = 144 machines and sizes on x86-ib40g.
MAX_QPERF_TABLES = 64


# --------------------------------------------------------------------- records
class SchedCounters(NamedTuple):
    """What a round trip changes of one host's qperf task and runqueue (the
    values, or a round trip's deltas of them), and of its ``irq/N-mlx4-ib0``
    thread on PREEMPT_RT with the interrupt threads simulated (0 without)."""
    vruntime: int
    sum_exec_runtime: int
    nvcsw: int
    nivcsw: int
    nr_switches: int
    busy_ns: int
    min_vruntime: int
    irq_exec: int = 0
    irq_nvcsw: int = 0
    irq_runs: int = 0


class RoundTrip(NamedTuple):
    """A round trip learned (steady or refill), per host (client, server) where a pair."""
    rtt: int
    deltas: tuple[SchedCounters, SchedCounters]
    irqs: tuple[int, int]              # interrupts counted in it
    last_irq: tuple[int, int]          # offset of the last one from its start


class KworkerRun(NamedTuple):
    """A kworker's run in a trigger round trip."""
    place: int        # its vruntime at the wakeup above the round trip's floor
    run: int          # vruntime gained from the wakeup to the round trip's end
    exec_ns: int
    nvcsw: int
    nivcsw: int


class TriggerRoundTrip(NamedTuple):
    """The round trip holding the interrupt(s) that schedule a workqueue mix, per host."""
    rtt: int
    deltas: tuple[SchedCounters, SchedCounters]
    last_irq: tuple[int, int]
    mix_at: tuple                      # offset of the kworker's mix (None: no mix on that host)
    kworkers: tuple                    # KworkerRun (None: no mix on that host)
    owed_after: tuple                  # refills owed at its end (cold_qperf, cold_netrx)
    refills: tuple[int, int]           # refills paid in it
    disturbs: tuple[int, int]          # rare events in it


class WqTrigger(NamedTuple):
    """One host's trigger and kworker in a replayed trigger round trip."""
    ep: "QperfEndpoint"
    host: int
    index: int                 # the trigger interrupt's index from the fast-forward's start
    t_trigger: int
    t_before: int              # the interrupt before it
    t_mix: int
    kworker: Task
    vruntime_end: int


class TriggerPlan(NamedTuple):
    """A trigger round trip replayed as a fast-forward's last one."""
    record: TriggerRoundTrip
    hosts: list                        # WqTrigger per host that mixes in it
    refill_after: RoundTrip | None     # the refill round trip replayed right after it


class TimerTrigger(NamedTuple):
    """An interrupt inside a fast-forward that schedules a timer mix."""
    ep: "QperfEndpoint"
    index: int
    t_trigger: int
    t_before: int


class BusyTick(NamedTuple):
    """A mix timer firing while its CPU is busy, in the last round trip of a fast-forward."""
    host: int
    round_trip: int
    offset: int
    delay: int                 # what follows the tick, this much later
    shifts: tuple[int, int]    # of each endpoint's last interrupt


class KworkerStart(NamedTuple):
    """A host's kworker and counters at the start of a trigger round trip measured."""
    kworker: Task
    floor: int
    exec_ns: int
    nvcsw: int
    nivcsw: int
    mixes: int
    next_expiry: int | None
    refills: int
    disturb: int


class Jump(NamedTuple):
    """A fast-forward in progress."""
    start: int
    k: int                          # round trips of ``record``, the last maybe ``trigger``'s or ``tick``'s
    record: RoundTrip
    trigger: TriggerPlan | None
    tick: BusyTick | None
    tail: int                       # steady round trips after the rare last one


@dataclass(slots=True)
class Snapshot:
    t: int
    state: tuple
    irqs: tuple
    disturb: int


@dataclass(slots=True)
class FastForwardStats:
    """What the fast-forward replayed (statistics, tests; QperfPair.jumps counts the fast-forwards)."""
    trigger_replays: int = 0           # trigger round trips replayed
    trigger_refill_replays: int = 0    # ... with the refill round trip after it (Refills.after_trigger)
    own_placement_replays: int = 0     # ... with a kworker placed at its own vruntime (WqTriggers)
    tail_rts: int = 0                  # steady round trips taken on after a rare one (SteadyTails)
    tick_replays: int = 0              # busy ticks replayed
    near_end_plans: int = 0            # ... with a softirq near its round trip's end (_plan_jump)


@dataclass(slots=True)
class TickCheck:
    """A busy tick's model to check (or learn) against a round trip in detail."""
    key: tuple | None
    host: int
    offset: int
    delay: int | None
    shifts: tuple | None
    snap: Snapshot | None = None
    mixes: tuple = ()
    disturb: int = 0


@dataclass(slots=True)
class Plan:
    """What the next jump() skips, made at a boundary: ``record`` (the steady
    round trip, or one refill round trip) ``k`` times, the last one maybe a
    trigger round trip (``trigger``) or the steady one with a busy tick
    (``tick``), then ``tail`` steady round trips."""
    record: RoundTrip
    # may a mix timer's softirq end near a round trip's end (_plan_jump), and did one
    near_end_ok: bool = False
    near_end: bool = field(default=False, init=False)
    # the rest the planners fill in (a plan is made at nearly every boundary:
    # its constructor takes only the two above)
    trigger: TriggerPlan | None = field(default=None, init=False)
    tick: BusyTick | None = field(default=None, init=False)
    tail: int = field(default=0, init=False)
    timer_triggers: list = field(default_factory=list, init=False)   # TimerTrigger: interrupts scheduling a timer mix
    mix_in: dict = field(default_factory=dict, init=False)           # host -> the tick of its mix timer in the plan
    idle_ticks: list = field(default_factory=list, init=False)       # mix timers taken in while their CPU is idle
    tick_candidate: TickCheck | None = field(default=None, init=False)   # a busy tick to check (_start_tick_measure)


def new_table() -> dict:
    """What QperfLearned keeps per machine, CPU and size: per learner
    (:class:`~kenv.sim.learner.TwiceAlike`) its records by key, and the busy
    stretches and (threaded) the min_vruntime lags measured with the steady
    round trip; the busy ticks' first measurements too (a later run confirms
    them)."""
    return {"steady": {}, "busy": {}, "vr_lag": {}, "refill": {}, "trigger": {}, "tick": {},
            "tick_candidates": {}}


#: the steady learner's one key
STEADY = "steady"
#: the key (QperfFastForward.key) of the boundary where the steady round trip
#: was just learned: clean, but no extension starts measuring there
LEARNED = "learned"

#: the qperf fast-forward's optional take-ins (QperfLearned.extensions): ``busy_ticks``
#: a mix timer's softirq on a busy CPU (kenv/fastforward/qperf_ticks.py), ``tails``
#: the steady round trips after a rare one in the same fast-forward (qperf_tails.py),
#: ``refills`` the round trip paying the refills a kworker left owed (qperf_refills.py),
#: ``wq_triggers`` the round trip holding a workqueue mix's trigger (qperf_triggers.py)
EXTENSIONS = ("busy_ticks", "wq_triggers", "refills", "tails")


class QperfLearned:
    """The round trips one simulation has measured (the steady one with its
    busy stretches, the refill, trigger and tick round trips), per machine,
    CPU and message size (:func:`machine_key`): they are a function of those,
    so a later run of the same machine starts with them instead of measuring
    them again; and :func:`~kenv.workloads.qperf.steady_round_trip`'s answers.
    Owned by whoever runs the simulation (an environment keeps one across its
    episodes, an experiment run makes its own) and passed down to
    :class:`~kenv.workloads.qperf.QperfTcpLat`; at most ``max_tables`` of
    each, the least recently used forgotten first.  ``extensions``: the
    fast-forward's take-ins that learn into it and replay from it
    (:data:`EXTENSIONS`; all by default, fewer only to measure what one
    earns: benchmarks/ff_extensions.py)."""

    __slots__ = ("_tables", "_steady_rtt", "max_tables", "declines", "extensions")

    def __init__(self, max_tables: int = MAX_QPERF_TABLES, extensions: tuple = EXTENSIONS):
        self._tables: LruTable[dict] = LruTable(max_tables)
        self._steady_rtt: LruTable[int] = LruTable(max_tables)
        self.max_tables = max_tables
        for x in extensions:
            if x not in EXTENSIONS:
                raise ConfigError("extensions", x, ", ".join(EXTENSIONS))
        self.extensions = frozenset(extensions)
        #: why the fast-forwards using this memory declined, counted (kenv.fastforward.declines)
        self.declines = Declines()

    def table(self, key: tuple) -> dict:
        """The round trips learned for ``key`` (new, empty tables if none)."""
        return self._tables.get(key, new_table)

    def tables(self) -> list[dict]:
        """The tables kept, least recently used first."""
        return self._tables.values()

    def steady_rtt(self, key: tuple, measure) -> int:
        """The steady round trip of ``key``: the one kept, else ``measure()``'s."""
        return self._steady_rtt.get(key, measure)

    def clear(self) -> None:
        """Forget everything learned."""
        self._tables.clear()
        self._steady_rtt.clear()


def machine_key(nic, stack, costs, hz: int, preempt: str, nr_cpus: int, irq_threads: bool = False) -> tuple:
    """What a qperf round trip depends on besides the CPU and the message size:
    both hosts' NIC, stack and scheduler costs, HZ, preemption model, CPU count
    and whether the forced interrupt threads are simulated."""
    return nic, stack, costs, hz, preempt, nr_cpus, bool(irq_threads)


def deltas_of(before: tuple, after: tuple) -> tuple:
    """Per host, ``after - before`` of two :meth:`QperfFastForward.state` values."""
    (client0, server0), (client1, server1) = before, after
    return SchedCounters(*map(sub, client1, client0)), SchedCounters(*map(sub, server1, server0))
