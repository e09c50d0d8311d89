"""``kenv reproduce``: every published figure of the seeds, simulated vs published."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from . import ReproRow, experiments


@dataclass
class ReproduceResult:
    rows: list[ReproRow] = field(default_factory=list)
    wall_s: float = 0.0

    def to_dict(self) -> dict:
        return {"rows": [r.to_dict() for r in self.rows], "wall_s": self.wall_s}

    def format_text(self) -> str:
        lines = []
        seed = None
        for r in self.rows:
            if r.seed != seed:
                seed = r.seed
                lines += ["", f"seed {seed}",
                          f"  {'figure':<56} {'simulated':>12} {'published':>12} {'rel.err':>8}  {'band':<17} unit"]
            band = "" if r.low is None else f"[{r.low:g}, {r.high:g}]" + (
                " ok" if r.low <= r.simulated <= r.high else " OUT")
            rel = f"{r.rel_error:>+8.1%}" if r.published else f"{'-':>8}"
            lines.append(f"  {r.figure:<56} {r.simulated:>12.6g} {r.published:>12.6g} "
                         f"{rel}  {band:<17} {r.unit}")
            if r.note:
                lines.append(f"  {'':<56}   note: {r.note}")
        lines.append(f"\n({len(self.rows)} figures, {self.wall_s:.1f} s wall)")
        return "\n".join(lines).lstrip("\n")


def run_reproduce(seed: int = 0, fast_forward: bool = True) -> ReproduceResult:
    """Every experiment's seed figures (``fast_forward=False``: every
    experiment simulated in full detail; the same figures, much slower)."""
    t0 = time.perf_counter()
    rows: list[ReproRow] = []
    for mod in experiments().values():
        rows.extend(mod.reproduce_rows(seed, fast_forward=fast_forward))
    return ReproduceResult(rows, time.perf_counter() - t0)
