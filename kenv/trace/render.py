"""A per-CPU timeline of one environment step as an RGB image (numpy only).

What an env with ``render_mode="rgb_array"`` returns from ``render()``:
a ``uint8`` array of shape ``(HEIGHT, WIDTH, 3)``, the same size on every
call, so Gymnasium's ``RecordVideo`` can stitch frames into a video.

Layout: a title line (env id, step, simulated time, action; :attr:`StepTimeline.title`);
a band in the colour of the action taken (one colour per action index; one
segment per dimension of a MultiDiscrete action, each with its choice's name);
below,
one row per CPU (every CPU of machines with 16 CPUs or fewer in all, else the
CPUs that have run something since the episode began), in machine order with
a gap between machines, time running left to right over the last step; the
rows share the height between the band and the time axis.  In
a row: tasks in a colour per task name (idle is the dark row background),
hard IRQs red, softirqs orange, timer callbacks yellow (lower half), a
magenta bar along the top while the CPU is non-preemptible, aggregated qperf
round trips grey with stripes.  Each row is named in the left margin
(``CLIENT CPU0``: the machine and the CPU) when rows are tall enough.  Below the
rows, a time axis: ticks at round times since the step began, labelled in the
unit that suits the step's length (us, ms or s), and a caption naming the
axis, its unit and when the step ended.  A legend along the bottom
names every colour: the fixed categories, then each task drawn in the frame.
Text is drawn in a 3x5 capital-letter pixel font (lower case is drawn in capitals).
"""

from __future__ import annotations

import zlib
from types import MappingProxyType
from typing import Any, Sequence

import numpy as np

from ..sim.engine import Recorder

WIDTH = 640
HEIGHT = 360
TITLE = 14        # title line (text at twice the font size)
BAND = 12         # action band, below the title
TOP = TITLE + BAND  # the CPU rows start here
LEGEND = 26       # legend lines at the bottom (up to three)
AXIS = 20         # the time axis under the rows: line, ticks, tick labels, caption
LEFT = 16         # the least left margin (row names widen it)
MAX_ROWS = 160
NONPREEMPT_BAR = 6   # the most height of the non-preemptible bar along a row's top (rows are tall)
#: the time axis's units: (name, nanoseconds), the first whose ten fits a step's length
TIME_UNITS = (("us", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000))

BG = (18, 18, 22)
ROW = ((38, 38, 46), (44, 44, 54))
HARDIRQ = (235, 45, 45)
SOFTIRQ = (255, 150, 20)
TIMER = (255, 225, 40)
NONPREEMPT = (225, 40, 225)
AGGREGATED = (150, 150, 150)
SEPARATOR = (90, 90, 120)
AXIS_COLOR = (170, 170, 185)
TEXT = (225, 225, 225)
BAND_TEXT = (20, 20, 24)
TASK_PALETTE = ((70, 140, 255), (60, 200, 120), (150, 110, 240), (40, 190, 200), (120, 200, 60),
                (230, 120, 180), (90, 170, 170), (200, 180, 120), (110, 130, 200), (170, 220, 150))
ACTION_PALETTE = ((80, 160, 255), (80, 220, 120), (240, 200, 60), (230, 100, 100), (190, 120, 240),
                  (100, 220, 220), (240, 150, 80), (200, 200, 200))

#: the 3x5 font (digits, capitals, punctuation): rows top to bottom, 3 bits each (MSB = left column)
_FONT = MappingProxyType({
    "0": (7, 5, 5, 5, 7), "1": (2, 6, 2, 2, 7), "2": (7, 1, 7, 4, 7), "3": (7, 1, 7, 1, 7),
    "4": (5, 5, 7, 1, 1), "5": (7, 4, 7, 1, 7), "6": (7, 4, 7, 5, 7), "7": (7, 1, 1, 1, 1),
    "8": (7, 5, 7, 5, 7), "9": (7, 5, 7, 1, 7),
    "A": (2, 5, 7, 5, 5), "B": (6, 5, 6, 5, 6), "C": (3, 4, 4, 4, 3), "D": (6, 5, 5, 5, 6),
    "E": (7, 4, 6, 4, 7), "F": (7, 4, 6, 4, 4), "G": (3, 4, 5, 5, 3), "H": (5, 5, 7, 5, 5),
    "I": (7, 2, 2, 2, 7), "J": (1, 1, 1, 5, 2), "K": (5, 5, 6, 5, 5), "L": (4, 4, 4, 4, 7),
    "M": (5, 7, 7, 5, 5), "N": (6, 5, 5, 5, 5), "O": (2, 5, 5, 5, 2), "P": (6, 5, 6, 4, 4),
    "Q": (2, 5, 5, 6, 3), "R": (6, 5, 6, 5, 5), "S": (3, 4, 2, 1, 6), "T": (7, 2, 2, 2, 2),
    "U": (5, 5, 5, 5, 7), "V": (5, 5, 5, 5, 2), "W": (5, 5, 7, 7, 5), "X": (5, 5, 2, 5, 5),
    "Y": (5, 5, 2, 2, 2), "Z": (7, 1, 2, 4, 7),
    ".": (0, 0, 0, 0, 2), ":": (0, 2, 0, 2, 0), "=": (0, 7, 0, 7, 0), "-": (0, 0, 7, 0, 0),
    "_": (0, 0, 0, 0, 7), "/": (1, 1, 2, 4, 4), "(": (1, 2, 2, 2, 1), ")": (4, 2, 2, 2, 4),
    ",": (0, 0, 0, 2, 4), "|": (2, 2, 2, 2, 2), "+": (0, 2, 7, 2, 0), "%": (5, 1, 2, 4, 5),
    "[": (3, 2, 2, 2, 3), "]": (6, 2, 2, 2, 6),
})
#: the font's columns, left to right, as bits of a row
_BITS = (4, 2, 1)
#: the fixed colours of the legend, in its order (tasks follow, one entry per name drawn)
LEGEND_ENTRIES = (("hard IRQ", HARDIRQ), ("softirq", SOFTIRQ), ("timer callback", TIMER),
                  ("non-preemptible", NONPREEMPT), ("qperf round trips (aggregated)", AGGREGATED),
                  ("idle", ROW[0]))


def task_color(comm: str) -> tuple[int, int, int]:
    base = comm.split("/", 1)[0]  # every kworker/N:M alike
    return TASK_PALETTE[zlib.crc32(base.encode()) % len(TASK_PALETTE)]


def task_label(comm: str) -> str:
    """The legend's name of a task: every kworker/N:M alike, as in :func:`task_color`."""
    return comm.split("/", 1)[0]


def text_width(s: str, scale: int = 1) -> int:
    return 4 * scale * len(s) - scale if s else 0


def _text(img: np.ndarray, x_right: int, y: int, s: str, color=(200, 200, 200)) -> None:
    """Right-aligned at ``x_right`` (the CPU numbers)."""
    draw_text(img, x_right - 4 * len(s) + 1, y, s, color)


def draw_text(img: np.ndarray, x: int, y: int, s: str, color=TEXT, scale: int = 1, x_max: int | None = None,
              glyphs: dict | None = None) -> int:
    """``s`` from (x, y) (top left) in the 3x5 font, ``scale`` pixels per font pixel,
    clipped at ``x_max``; returns the x after the last character drawn.  ``glyphs``:
    the caller's memo of the characters' masks (a StepTimeline keeps one)."""
    glyphs = {} if glyphs is None else glyphs
    H, W = img.shape[:2]
    x_max = W if x_max is None else min(x_max, W)
    if y < 0 or y + 5 * scale > H:
        return x
    for ch in s.upper():
        if x + 3 * scale > x_max:
            break
        mask = glyphs.get((ch, scale), False)
        if mask is False:
            mask = glyphs[(ch, scale)] = _glyph(ch, scale)
        if mask is not None and x >= 0:
            img[y:y + 5 * scale, x:x + 3 * scale][mask] = color
        x += 4 * scale
    return x


def _glyph(ch: str, scale: int) -> np.ndarray | None:
    """The (5 scale, 3 scale) mask of a character of the font; None for a blank or unknown one."""
    rows = _FONT.get(ch)
    if rows is None:
        return None
    mask = (np.array(rows)[:, None] & _BITS) != 0
    return mask if scale == 1 else mask.repeat(scale, axis=0).repeat(scale, axis=1)


class StepTimeline:
    """Records the kernels of one episode and draws the last step.

    Attaches a :class:`Recorder` to every engine of ``kernels`` that has
    none; :meth:`begin_step` drops what the previous step recorded, so memory
    holds one step.
    """

    def __init__(self, kernels: Sequence[Any], width: int = WIDTH, height: int = HEIGHT):
        self.kernels = list(kernels)
        self.width, self.height = width, height
        self.rec = Recorder()
        self.engines = []
        for k in self.kernels:
            if k.engine not in self.engines:
                self.engines.append(k.engine)
        for eng in self.engines:
            if eng.recorder is None:
                self.rec.attach(eng)
        self.machine_index = {k.name: i for i, k in enumerate(self.kernels)}
        # rows: every CPU on small machines; on big ones, the CPUs that have run something
        self.rows: set[tuple[int, int]] = set()
        self.all_rows = sum(k.nr_cpus for k in self.kernels) <= 16
        if self.all_rows:
            self.rows = {(i, c) for i, k in enumerate(self.kernels) for c in range(k.nr_cpus)}
        self.t0 = self.t1 = self.now()
        self.action: Any = None
        #: the title line and the names of the action's dimensions, set by the env
        #: before each frame (KenvEnv._render_rgb)
        self.title = ""
        self.action_labels: Sequence[str] = ()
        self._glyphs: dict = {}  # draw_text's masks, by (character, scale)

    def now(self) -> int:
        return self.engines[0].now if self.engines else 0

    def begin_step(self) -> None:
        r = self.rec
        r.slices.clear()
        r.instants.clear()
        r.counters.clear()
        r._refs.clear()
        self.t0 = self.now()

    def end_step(self, action: Any = None) -> None:
        self.t1 = self.now()
        self.action = action
        if not self.all_rows:
            # every step's CPUs, drawn or not: a frame's rows do not depend on
            # which earlier steps were drawn
            self._note_rows(self._spans())

    def _note_rows(self, spans) -> None:
        for _, tr, _, _, _ in spans:
            mi = self.machine_index.get(tr[0])
            if mi is not None:
                self.rows.add((mi, tr[1]))

    def _spans(self) -> list[tuple[str, tuple, str, int, int]]:
        t0, t1 = self.t0, self.t1
        out = [(cat, tr, name, max(s, t0), min(e, t1)) for cat, tr, name, s, e, _ in self.rec.slices
               if isinstance(tr, tuple) and e >= t0 and s <= t1]
        # still running at the end of the step: not recorded yet
        for k in self.kernels:
            for rq in k.cpus:
                p = rq.curr
                if p is not None and p._switched_in <= t1:
                    out.append(("task", (k.name, rq.id), p.comm, max(p._switched_in, t0), t1))
                if rq.qs_stretch_start is not None and rq.qs_stretch_start <= t1:
                    s = rq.qs_stretch_start
                    if rq.trace_np_start is not None:
                        s = max(s, rq.trace_np_start)
                    out.append(("nonpreempt", (k.name, rq.id), "", max(s, t0), t1))
        return out

    def frame(self) -> np.ndarray:
        W, H = self.width, self.height
        img = np.empty((H, W, 3), dtype=np.uint8)
        img[:] = BG
        if self.title:
            scale = 2 if text_width(self.title, 2) <= W - 4 else 1
            draw_text(img, 2, (TITLE - 5 * scale) // 2, self.title, TEXT, scale, W - 2, self._glyphs)
        spans = self._spans()
        self._note_rows(spans)
        rows = sorted(self.rows)[:MAX_ROWS]
        names = {key: self.row_name(key) for key in rows}
        left = max([LEFT] + [text_width(n) + 6 for n in names.values()])   # the rows' names fit
        if self.action is not None:
            # one segment per action dimension (MultiDiscrete), coloured by its index, named
            acts = [int(a) for a in np.asarray(self.action).reshape(-1)]
            seg = (W - 1 - left) // len(acts)
            for i, a in enumerate(acts):
                x0, x1 = left + i * seg, left + (i + 1) * seg - 2
                img[TITLE + 1:TOP - 2, x0:x1] = ACTION_PALETTE[a % len(ACTION_PALETTE)]
                if i < len(self.action_labels):
                    draw_text(img, x0 + 2, TITLE + 3, self.action_labels[i], BAND_TEXT, 1, x1 - 1, self._glyphs)
            draw_text(img, 2, TITLE + 3, "action", TEXT, 1, left - 2, self._glyphs)
        self._legend(img, sorted({task_label(name) for cat, _, name, _, _ in spans if cat == "task"}))
        if not rows:
            return img
        n_sep = len({m for m, _ in rows}) - 1
        avail = H - TOP - AXIS - LEGEND - 1 - 2 * n_sep
        rh = max(1, avail // len(rows))
        y_of: dict[tuple[int, int], int] = {}
        y = TOP
        prev_m = rows[0][0]
        for i, key in enumerate(rows):
            if key[0] != prev_m:
                img[y:y + 1, left:W] = SEPARATOR
                y += 2
                prev_m = key[0]
            y_of[key] = y
            img[y:y + rh, left:W] = ROW[i % 2]
            if rh >= 6:
                _text(img, left - 3, y + (rh - 5) // 2, names[key])
            y += rh
        self._time_axis(img, y + 1, left)
        plot_w = W - left
        t0, t1 = self.t0, self.t1
        span = max(1, t1 - t0)
        order = {"aggregated": 0, "task": 1, "timer": 4, "softirq": 3, "hardirq": 2, "nonpreempt": 5}
        for cat, tr, name, s, e in sorted(spans, key=lambda x: order.get(x[0], 9)):
            key = (self.machine_index.get(tr[0]), tr[1])
            y0 = y_of.get(key)
            if y0 is None:
                continue
            x0 = left + int((s - t0) * plot_w // span)
            x1 = max(x0 + 1, left + int((e - t0) * plot_w // span))
            x0, x1 = min(max(x0, left), W - 1), min(max(x1, left + 1), W)
            if cat == "task":
                img[y0:y0 + rh, x0:x1] = task_color(name)
            elif cat == "hardirq":
                img[y0:y0 + rh, x0:x1] = HARDIRQ
            elif cat == "softirq":
                img[y0:y0 + rh, x0:x1] = SOFTIRQ
            elif cat == "timer":
                img[y0 + rh // 2:y0 + rh, x0:x1] = TIMER
            elif cat == "nonpreempt":
                img[y0:y0 + max(1, min(NONPREEMPT_BAR, rh // 5)), x0:x1] = NONPREEMPT
            elif cat == "aggregated":
                block = img[y0:y0 + rh, x0:x1]
                block[:] = AGGREGATED
                block[:, ::4] = (110, 110, 110)
        return img

    def row_name(self, key: tuple[int, int]) -> str:
        """The name of a CPU row in the left margin: the machine and the CPU (``client cpu0``)."""
        return f"{self.kernels[key[0]].name} cpu{key[1]}"

    def time_ticks(self) -> tuple[str, int, list[int]]:
        """The time axis of the last step: its unit's name, the unit in ns, and the ticks
        (ns since the step began; round values, 1, 2 or 5 times a power of ten, 4 to 10 of them)."""
        span = max(1, self.t1 - self.t0)
        unit, unit_ns = TIME_UNITS[0]
        for name, ns in TIME_UNITS:
            if span >= ns:
                unit, unit_ns = name, ns
        return unit, unit_ns, self._round_ticks(span)

    @staticmethod
    def _round_ticks(span: int) -> list[int]:
        """0 and every multiple of the round step (1, 2 or 5 times 10**k ns) up to ``span``,
        the step the smallest that gives at most 10 intervals."""
        k = 1
        while True:
            for m in (1, 2, 5):
                step = m * k
                if span // step <= 10:
                    return list(range(0, span + 1, step))
            k *= 10

    def _time_axis(self, img: np.ndarray, y: int, left: int) -> None:
        """The axis under the rows (top at ``y``): a line, a tick and a label at each round
        time since the step began, and the caption naming the axis and its unit."""
        W = self.width
        plot_w = W - left
        span = max(1, self.t1 - self.t0)
        unit, unit_ns, _ = self.time_ticks()
        img[y:y + 1, left:W] = AXIS_COLOR
        for t in self._round_ticks(span):
            x = min(W - 1, left + int(t * plot_w // span))
            img[y:y + 4, x:x + 1] = AXIS_COLOR
            label = f"{t / unit_ns:g}"
            lx = min(max(left, x - text_width(label) // 2), W - text_width(label) - 1)
            draw_text(img, lx, y + 6, label, AXIS_COLOR, glyphs=self._glyphs)
        caption = (f"time since the step began ({unit}); the step ran {span / unit_ns:.4g} {unit}, "
                   f"to t={self.t1 / 1e9:.3f} s")
        draw_text(img, left, y + 13, caption, TEXT, x_max=W - 1, glyphs=self._glyphs)

    def legend(self, tasks: Sequence[str]) -> list[tuple[str, tuple[int, int, int]]]:
        """The legend's entries: the fixed colours, then each task name with its colour."""
        return list(LEGEND_ENTRIES) + [(f"task {t}", task_color(t)) for t in tasks]

    def _legend(self, img: np.ndarray, tasks: Sequence[str]) -> None:
        """The entries of :meth:`legend` flowed over the bottom LEGEND pixels: a 7x5
        swatch, then the name; an entry that does not fit on the last line is left out."""
        W, H = self.width, self.height
        x, y = 2, H - LEGEND + 2
        for name, color in self.legend(tasks):
            w = 10 + text_width(name) + 8
            if x + w > W and x > 2:
                x, y = 2, y + 8
            if y + 5 > H:
                break
            img[y:y + 5, x:x + 7] = color
            draw_text(img, x + 10, y, name, TEXT, glyphs=self._glyphs)
            x += w


__all__ = ["HEIGHT", "LEGEND_ENTRIES", "StepTimeline", "WIDTH", "draw_text", "task_color", "task_label"]
