"""The seed experiments: a platform, a workload and a policy, run end to end.

Each experiment module defines:

* ``NAME``: the CLI name (``kenv experiment NAME``);
* ``HELP``: one line for ``--help``;
* ``add_arguments(parser)``: its flags (argparse);
* ``run_from_args(args)``: runs it and returns a result object with
  ``to_dict()`` (the ``--json`` output) and ``format_text()``;
* ``reproduce_rows(seed, fast_forward=True)``: the published figures this
  experiment reproduces, as :class:`ReproRow` (used by ``kenv reproduce``;
  ``fast_forward=False`` simulates everything in detail, the same figures).

Published figures appear only in ``reproduce_rows`` and in tests, never in the
simulator.
"""

from __future__ import annotations

import argparse
import importlib
from dataclasses import asdict, dataclass
from types import MappingProxyType, ModuleType
from typing import Any, Callable

#: experiment name -> module, in the order ``kenv reproduce`` runs them
_MODULES = MappingProxyType({
    "qperf-tcp-lat": "qperf_tcp_lat",
    "hwrng-dd": "hwrng_dd",
    "raid6-cyclictest": "raid6_cyclictest",
})


@dataclass
class ReproRow:
    """One published figure next to its simulated value."""

    seed: str            # e.g. "001 hwrng: bcm2835: Fix hwrng throughput regression"
    figure: str          # what was measured, e.g. "dd bs=10000, hwrng_yield"
    unit: str
    published: float
    simulated: float
    low: float | None = None   # acceptance band, when the seed's figure is a bound or disputed
    high: float | None = None
    note: str = ""

    @property
    def rel_error(self) -> float:
        if self.published == 0:
            return float("inf") if self.simulated else 0.0
        return (self.simulated - self.published) / abs(self.published)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["rel_error"] = self.rel_error
        return d


def experiments() -> dict[str, ModuleType]:
    """The experiment modules that exist, by CLI name."""
    out = {}
    for name, mod in _MODULES.items():
        try:
            out[name] = importlib.import_module(f"{__name__}.{mod}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{mod}":
                raise
    return out


def add_experiment_parsers(subparsers: Any,
                           configure: Callable[[argparse.ArgumentParser, str, ModuleType], None]) -> None:
    """One subparser per experiment with its own flags; ``configure(parser, name,
    module)`` adds what the calling command needs (common flags, what to run)."""
    for name, mod in experiments().items():
        p = subparsers.add_parser(name, help=mod.HELP, description=mod.__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(p)
        configure(p, name, mod)


__all__ = ["ReproRow", "add_experiment_parsers", "experiments"]
