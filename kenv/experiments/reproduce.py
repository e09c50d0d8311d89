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
        head = f"{'seed':<6} {'figure':<52} {'simulated':>12} {'published':>12} {'rel.err':>8}  note"
        lines = [head, "-" * len(head)]
        for r in self.rows:
            lines.append(f"{r.seed:<6} {r.figure:<52} {r.simulated:>12.4g} {r.published:>12.4g} "
                         f"{r.rel_error:>+8.1%}  {r.unit}{'; ' + r.note if r.note else ''}")
        lines.append(f"({len(self.rows)} figures, {self.wall_s:.1f} s wall)")
        return "\n".join(lines)


def run_reproduce(seed: int = 0) -> ReproduceResult:
    t0 = time.perf_counter()
    rows: list[ReproRow] = []
    for mod in experiments().values():
        rows.extend(mod.reproduce_rows(seed))
    return ReproduceResult(rows, time.perf_counter() - t0)
