"""What the subsystems and the environments share: the decisions an action
makes, info entries and the latency scale."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..schema import check_action_names, check_choice


@dataclass(frozen=True)
class Decision:
    """A kernel decision an env's action makes: its choices (``default``, and
    ``extended`` that ``actions=`` may add) and the choice of each kernel
    version (the fixed baselines, agents/baselines.py)."""

    default: tuple[str, ...]
    extended: tuple[str, ...]
    #: the kernel before the regressions the patch answered
    original: str
    #: the state the patch fixed
    pre_patch: str
    #: the patch
    patched: str
    #: the canonical spelling of a choice, or a ConfigError naming the field
    #: given (None: the names above, spelled as they are)
    spell: Callable[[str, str], str] | None = None
    #: what the simulated kernel takes for a choice (None: its name)
    parse: Callable[[str], Any] | None = None

    def check(self, actions: Sequence[str] | None, field: str = "actions") -> tuple[str, ...]:
        """The action names (kenv.schema.check_action_names): the default
        choices for None, else a non-empty list, each name normalised, no two
        alike; a ConfigError names ``field`` (``actions.wait`` on kenv/Kernel-*)."""
        if actions is None:
            return self.default
        return check_action_names(actions, lambda a: self.normalise(a, field), field,
                                  allowed=", ".join(self.default + self.extended))

    def kernel_form(self, name: str) -> Any:
        """What the simulation takes for the choice ``name``."""
        return name if self.parse is None else self.parse(name)

    def normalise(self, a: str, field: str = "actions") -> str:
        """The canonical spelling of action name ``a``, or a ConfigError naming ``field``."""
        if self.spell is not None:
            return self.spell(a, field)
        return check_choice(a, field, self.default + self.extended)

#: info's value of a float that has none yet (a time, rate or share that is never
#: negative); not NaN: Gymnasium's check_env compares infos with ==, and
#: Tianshou's buffer rejects NaN as it does None
NO_VALUE = -1.0


def kernel_reports_info(stall_kernels: Sequence, bug_kernels: Sequence) -> dict:
    """The RCU stall and BUG reports of the kernels so far, as fixed-shape info
    entries (a vector env stacks them; the reports themselves stay on the kernels):
    ``bugs`` and ``rcu_stalls`` count them; ``last_bug`` ("" before any),
    ``last_rcu_stall_t_s`` (NO_VALUE, -1.0, before any) and ``last_rcu_stall_cpu`` (-1 before
    any) describe the last one, of the last kernel in the given order that has one."""
    bugs, last_bug = 0, ""
    for k in bug_kernels:
        if k.bugs:
            bugs += len(k.bugs)
            last_bug = k.bugs[-1]
    stalls, t_s, cpu = 0, NO_VALUE, -1
    for k in stall_kernels:
        if k.rcu_stalls:
            stalls += len(k.rcu_stalls)
            last = k.rcu_stalls[-1]
            t_s, cpu = float(last.t_s), int(last.cpu)
    return {"bugs": bugs, "last_bug": last_bug, "rcu_stalls": stalls,
            "last_rcu_stall_t_s": t_s, "last_rcu_stall_cpu": cpu}


def log_latency(us: float) -> float:
    """Latency cost on a log scale: log10(1 + us) / 6 (1 s -> 1.0, 10 us -> 0.17)."""
    return math.log10(1.0 + max(0.0, us)) / 6.0
