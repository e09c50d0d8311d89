"""jiffies, HZ and the tick (include/linux/jiffies.h, kernel/time/time.c).

The tick is not simulated as an event per jiffy: jiffies is a function of the
clock, ``jiffies = INITIAL_JIFFIES + t // TICK_NSEC``, and only the ticks at
which something happens (a timer bucket expires, a scheduler slice ends, an
RCU stall check is due) become events.  That is what NO_HZ does on an idle
CPU, and it keeps the event count proportional to wakeups.
"""

from __future__ import annotations

from ..schema import check_choice
from ..sim.engine import NSEC_PER_MSEC, NSEC_PER_SEC, NSEC_PER_USEC

#: Kconfig choices for HZ (kernel/Kconfig.hz).
ALLOWED_HZ = (100, 250, 300, 1000)


def initial_jiffies(hz: int) -> int:
    """INITIAL_JIFFIES: jiffies start 300 s before wrapping (include/linux/jiffies.h).

    ``((unsigned long)(unsigned int) (-300*HZ))`` -- a multiple of 8 for every
    allowed HZ, so timer-wheel bucket alignment does not depend on it.
    """
    return (1 << 32) - 300 * hz


def check_hz(hz: int) -> int:
    return check_choice(hz, "hz", ALLOWED_HZ, f"one of {', '.join(map(str, ALLOWED_HZ))} (kernel/Kconfig.hz)")


def tick_nsec(hz: int) -> int:
    """TICK_NSEC: nanoseconds per jiffy (rounded as in include/linux/jiffies.h)."""
    return (NSEC_PER_SEC + hz // 2) // hz


def msecs_to_jiffies(m: int, hz: int) -> int:
    """msecs_to_jiffies(): rounds *up*, so a sleep is never shorter than asked.

    At HZ=250: 1000 ms -> 250 jiffies, 20 ms -> 5, 1 ms -> 1.
    """
    if m < 0:
        return 0
    return -(-m * hz // 1000)


def usecs_to_jiffies(u: int, hz: int) -> int:
    if u < 0:
        return 0
    return -(-u * hz // 1_000_000)


def jiffies_to_msecs(j: int, hz: int) -> float:
    return j * 1000.0 / hz


__all__ = [
    "ALLOWED_HZ",
    "NSEC_PER_MSEC",
    "NSEC_PER_SEC",
    "NSEC_PER_USEC",
    "check_hz",
    "initial_jiffies",
    "jiffies_to_msecs",
    "msecs_to_jiffies",
    "tick_nsec",
    "usecs_to_jiffies",
]
