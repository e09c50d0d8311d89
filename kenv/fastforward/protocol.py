"""The jump rule of the fast-forwards, written once.

Every fast-forward skips the same way: at a *boundary* of a component's life
it takes a *key* from the component's state (or declines: the boundary is not
clean), looks up the *stretch* it learned to follow that key (stretches
simulated in detail: qperf's found alike twice,
:class:`~kenv.sim.learner.TwiceAlike`; hwrng's checked against the
generator's landings) up to the component's own horizon,
then asks its *guards* how far that stretch can be committed to -- the first
event scheduled in scope (:meth:`~kenv.sim.engine.Engine.quiet_limit`), the
engine's ``until``, a driver rule's threshold, a FIFO landing, a timer expiry
-- counts the *repetitions* that end before a guard is crossed, and *applies*
them: same key, nothing scheduled in scope, no guard crossed => same stretch.

A fast-forward implements :class:`JumpRule`'s five steps; :meth:`JumpRule.jump_at`
is the loop, here only.  Each step that gives the boundary back to the
detailed simulation says why (``declines.decline(Reason.X)``,
kenv.fastforward.declines) and returns None; the loop then returns the rule's
``nothing``.  :func:`quiet_horizon` is the guard "nothing scheduled in
scope"; :func:`commit_skip` is the commit every skip shares: the
landing event at the stretch's end, the fence of the CPUs in scope, the
block (or the spin) through it.

The rules: :class:`~kenv.fastforward.hwrng.PollRule` (a poller's wait
cycles), :class:`~kenv.fastforward.hwrng.SpinRule` (a reader's ``cpu_relax()``
reads) and :class:`~kenv.fastforward.qperf.QperfFastForward` (qperf's round
trips).  The hwrng rules' guard is :func:`quiet_horizon` over the CPUs of
the rng's users; qperf's is the slice's bound (run_slice ends it at the
rare events), and its repetitions take in the pending events they can
compute (a mix timer firing on an idle CPU, kenv.fastforward.qperf_guards)
instead of stopping at them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Callable, Generator, NamedTuple

from ..kernel.core import BLOCK
from ..kernel.observe import SkipFence
from .declines import Reason

if TYPE_CHECKING:  # pragma: no cover
    from ..kernel.core import Kernel
    from ..sim.engine import Engine, Event
    from .declines import Declines


class Horizon(NamedTuple):
    """What the guards allow: commit nothing past ``limit`` (ns); ``scopes``:
    the CPUs whose events could touch the stretch, to fence while it is
    skipped (None: nothing else runs before ``limit``)."""

    limit: int
    scopes: Any = None


class JumpRule(ABC):
    """One fast-forward's jump rule: the five steps :meth:`jump_at` runs.

    ``at`` is whatever names the boundary (the task at it, or its time)."""

    __slots__ = ()

    #: what :meth:`jump_at` returns when it skips nothing
    nothing: Any = None

    @abstractmethod
    def key(self, at: Any) -> Any:
        """At the boundary: learn the stretch that ended here; the key (or
        boundary) of the one that starts, or None (not clean: declined)."""

    @abstractmethod
    def stretch(self, at: Any, key: Any) -> Any:
        """The repetitions learned to follow ``key``, up to the component's own
        horizon, or None (nothing learned: declined)."""

    @abstractmethod
    def guards(self, at: Any, stretch: Any) -> Horizon | None:
        """How far ``stretch`` may be committed: the first event scheduled in
        scope and the guards it could cross; None if not even now (declined)."""

    @abstractmethod
    def repetitions(self, at: Any, key: Any, stretch: Any, horizon: Horizon) -> int:
        """How many repetitions of ``stretch`` end by ``horizon`` without
        crossing a guard (below 1: declined)."""

    @abstractmethod
    def apply(self, at: Any, key: Any, stretch: Any, horizon: Horizon, k: int) -> Any:
        """Commit ``k`` repetitions: what the caller runs (or returns)."""

    def jump_at(self, at: Any) -> Any:
        """Same key, nothing scheduled in scope, no guard crossed => same
        stretch: the skip from the boundary ``at`` (``nothing``: none)."""
        key = self.key(at)
        if key is None:
            return self.nothing
        stretch = self.stretch(at, key)
        if stretch is None:
            return self.nothing
        horizon = self.guards(at, stretch)
        if horizon is None:
            return self.nothing
        k = self.repetitions(at, key, stretch, horizon)
        if k < 1:
            return self.nothing
        return self.apply(at, key, stretch, horizon, k)


def quiet_horizon(engine: "Engine", scopes: Any, declines: "Declines") -> Horizon | None:
    """Nothing scheduled in scope: a :class:`Horizon` up to the first pending
    event that may act on ``scopes`` (:meth:`~kenv.sim.engine.Engine.quiet_limit`;
    None: every event counts), or None (not even now: declined
    ``NO_QUIET_TIME``).  Asked last: the engine may look at every pending event."""
    limit = engine.quiet_limit(scopes)
    if limit is None:
        return declines.decline(Reason.NO_QUIET_TIME)
    return Horizon(limit, scopes)


def commit_skip(k: "Kernel", end: int, wait: Any = BLOCK, land: Callable[..., Any] | None = None,
                args: tuple = (), scope: Any = None, fence: Any = None,
                what: str = "a skip") -> Generator[Any, Any, "tuple[Event | None, SkipFence | None]"]:
    """The commit of a skip to ``end``: ``land(*args)`` then, if given (an
    event on ``scope``: what it acts on, :meth:`~kenv.sim.engine.Engine.at_on`),
    the CPUs ``fence`` fenced up to ``end`` (no fence if None: nothing else runs
    meanwhile), and the task waits: ``wait`` is BLOCK (it sleeps through the
    stretch) or a RunUntil (it spins through it).  Returns, once it runs again,
    the landing event and the fence (the caller lifts it when the skipped
    stretch is over)."""
    ev = None if land is None else k.engine.at_on(scope, end, land, *args)
    lock = None if fence is None else SkipFence.put(k, fence, end, what)
    yield wait
    return ev, lock
