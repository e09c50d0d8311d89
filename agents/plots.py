"""PNG figures for ``kenv rediscover``: learning curves and reward components.

matplotlib's object API with the Agg canvas (no pyplot, no display, no global
backend switch); every figure is written atomically (temporary file in the same
directory, then ``os.replace``).
"""

from __future__ import annotations

import io
from typing import Mapping, Sequence

#: colours of the fixed baselines (horizontal lines) and the learned policy
COLOURS = {"learned": "#1f77b4", "patched": "#2ca02c", "oracle": "#000000", "pre_patch": "#d62728",
           "original": "#ff7f0e", "random": "#7f7f7f"}
STYLES = {"patched": "-", "oracle": ":", "pre_patch": "--", "original": "-.", "random": (0, (1, 3))}


def _figure(w: float = 7.0, h: float = 4.2):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def save_png(fig, path: str) -> None:
    """Render ``fig`` to PNG in memory, then write it atomically."""
    from .files import atomic_write_bytes

    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    atomic_write_bytes(path, buf.getvalue())


def learning_curves(path: str, title: str, curves: Mapping[str, Sequence[Mapping]],
                    baselines: Mapping[str, float]) -> None:
    """Evaluation return vs env steps, one line (with its 95% band) per training seed;
    the fixed baselines as horizontal lines.

    ``curves``: label -> rows with ``timesteps``, ``mean_return``, ``ci95``
    (``evaluations.csv``); ``baselines``: policy name -> mean return on the same episodes.
    """
    import numpy as np

    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    for i, (label, rows) in enumerate(curves.items()):
        if not rows:
            continue
        x = np.array([r["timesteps"] for r in rows], dtype=float)
        y = np.array([r["mean_return"] for r in rows], dtype=float)
        ci = np.nan_to_num(np.array([r["ci95"] for r in rows], dtype=float))
        (line,) = ax.plot(x, y, lw=1.6, label=label, alpha=0.9)
        ax.fill_between(x, y - ci, y + ci, color=line.get_color(), alpha=0.12, lw=0)
    for name, value in baselines.items():
        if value is None or value != value:  # NaN: baseline unavailable
            continue
        ax.axhline(value, color=COLOURS.get(name, "#333333"), ls=STYLES.get(name, "--"), lw=1.2,
                   label=f"{name} ({value:.2f})")
    ax.set_xlabel("env steps")
    ax.set_ylabel("mean return, same seeded episodes")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best", ncol=2)
    save_png(fig, path)


def reward_components(path: str, title: str, contributions: Mapping[str, Mapping[str, float]]) -> None:
    """Grouped bars: per policy, each reward component's contribution to the mean return
    (weight x sign x component, so the bars of a policy add up to its return)."""
    import numpy as np

    policies = list(contributions)
    comps = [c for c in dict.fromkeys(c for p in policies for c in contributions[p])
             if any(abs(contributions[p].get(c, 0.0)) > 1e-12 for p in policies)] or ["(none)"]
    fig = _figure(max(6.0, 1.2 * len(policies) + 2), 4.2)
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / len(comps)
    x = np.arange(len(policies))
    for j, c in enumerate(comps):
        vals = [contributions[p].get(c, 0.0) for p in policies]
        ax.bar(x + (j - (len(comps) - 1) / 2) * width, vals, width, label=c)
    totals = [sum(contributions[p].values()) for p in policies]
    ax.scatter(x, totals, color="black", marker="D", s=18, zorder=3, label="return")
    ax.axhline(0, color="black", lw=0.6)
    ax.set_xticks(x)
    ax.set_xticklabels(policies, fontsize=8)
    ax.set_ylabel("contribution to the episode return")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    save_png(fig, path)
