"""rgb_array frames explain themselves (issue #32): a title (env, step, simulated
time, action), the action band's choices named, and a legend naming every colour.
Frames keep their shape and dtype (RecordVideo stitches them)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import kenv  # noqa: F401  (registers the ids)
from kenv.envs import registration
from kenv.trace.render import BG, HEIGHT, LEGEND, LEGEND_ENTRIES, TITLE, WIDTH, draw_text, task_color, task_label

ENV_IDS = sorted(registration.ENV_IDS)   # (the old ids, RENAMED, are the same envs)


def _title_strip(title: str) -> np.ndarray:
    """The title rows as the frame should draw them: ``title`` on the background."""
    img = np.empty((HEIGHT, WIDTH, 3), dtype=np.uint8)
    img[:] = BG
    scale = 2 if 4 * 2 * len(title) - 2 <= WIDTH - 4 else 1
    draw_text(img, 2, (TITLE - 5 * scale) // 2, title, scale=scale, x_max=WIDTH - 2)
    return img[:TITLE]


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_frame_has_a_title_naming_env_step_time_and_action(env_id):
    env = gym.make(env_id, render_mode="rgb_array")
    base = env.unwrapped
    env.reset(seed=0)
    env.render()
    env.action_space.seed(0)
    titles = []
    for step in (1, 2):
        a = env.action_space.sample()
        env.step(a)
        frame = env.render()
        assert frame.shape == (HEIGHT, WIDTH, 3) and frame.dtype == np.uint8
        title = f"{env_id}  step {step}  t={base._episode.now_s:.3f} s  action {base.action_label(a)}"
        assert np.array_equal(frame[:TITLE], _title_strip(title))
        assert (frame[:TITLE] != np.array(BG, dtype=np.uint8)).any()
        titles.append(frame[:TITLE])
    assert not np.array_equal(*titles)  # the step number (and the time) changed
    env.close()


def test_the_title_is_not_a_blank_strip_for_another_text():
    assert not np.array_equal(_title_strip("kenv/RandomMix-v2  step 1"), _title_strip("kenv/RandomMix-v2  step 2"))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_legend_names_every_colour_drawn(env_id):
    env = gym.make(env_id, render_mode="rgb_array")
    env.reset(seed=1)
    env.render()
    env.action_space.seed(1)
    tl = env.unwrapped._timeline
    for _ in range(20):  # to a step in which some task ran
        env.step(env.action_space.sample())
        frame = env.render()
        tasks = sorted({task_label(n) for cat, _, n, _, _ in tl._spans() if cat == "task"})
        if tasks:
            break
    assert tasks
    entries = tl.legend(tasks)
    assert entries[:len(LEGEND_ENTRIES)] == list(LEGEND_ENTRIES)
    assert [n for n, _ in entries[len(LEGEND_ENTRIES):]] == [f"task {t}" for t in tasks]
    legend = frame[HEIGHT - LEGEND:]
    for name, color in entries:
        # a 7x5 swatch of the entry's colour in the legend area
        mask = (legend == np.array(color, dtype=np.uint8)).all(axis=2)
        assert any(mask[y:y + 5, x:x + 7].all() for y in range(LEGEND - 4) for x in range(WIDTH - 6)
                   if mask[y, x]), name
    assert dict(entries)[f"task {tasks[0]}"] == task_color(tasks[0])
    env.close()


@pytest.mark.parametrize("env_id", ["kenv/RandomMix-v2", "kenv/HwrngWait-v2", "kenv/Raid6Bench-v3", "kenv/Kernel-v3"])
def test_frame_is_readable_time_axis_named_rows_and_mostly_drawn(env_id):
    """Issue #39: the frame had no time axis, rows labelled "0 / 0" and mostly empty space."""
    from kenv.trace.render import AXIS, AXIS_COLOR, TOP, text_width

    env = gym.make(env_id, render_mode="rgb_array")
    env.reset(seed=0)
    env.render()
    env.action_space.seed(0)
    for _ in range(3):
        env.step(env.action_space.sample())
    frame = env.render()
    tl = env.unwrapped._timeline
    assert frame.shape == (HEIGHT, WIDTH, 3) and frame.dtype == np.uint8
    # not mostly empty: the page background is under half of the frame
    assert (frame == np.array(BG, dtype=np.uint8)).all(axis=2).mean() < 0.5
    # every row named by machine and CPU, drawn right-aligned in the left margin
    rows = sorted(tl.rows)
    names = [tl.row_name(k) for k in rows]
    assert all(n.startswith(tl.kernels[k[0]].name) and n.endswith(f"cpu{k[1]}") for n, k in zip(names, rows))
    left = max(16, max(text_width(n) for n in names) + 6)
    assert len(set(names)) == len(names)
    margin = frame[TOP:HEIGHT - LEGEND - AXIS, :left]
    for n in names:   # the name's pixels appear in the margin
        probe = np.zeros((5, text_width(n), 3), dtype=np.uint8)
        draw_text(probe, 0, 0, n, color=(255, 255, 255))
        mask = (probe == 255).all(axis=2)
        x = left - 3 - 4 * len(n) + 1
        ys = [y for y in range(margin.shape[0] - 4)
              if (margin[y:y + 5, x:x + mask.shape[1]][mask] == np.array((200, 200, 200), np.uint8)).all()]
        assert ys, n
    # the time axis: a line across the plot under the rows, round ticks, a caption with the unit
    axis = (frame[:, left:] == np.array(AXIS_COLOR, dtype=np.uint8)).all(axis=2)
    line_rows = [y for y in range(HEIGHT) if axis[y].all()]
    assert line_rows and TOP < line_rows[0] < HEIGHT - LEGEND
    unit, unit_ns, ticks = tl.time_ticks()
    span = tl.t1 - tl.t0
    assert unit in ("us", "ms", "s") and unit_ns <= span and 4 <= len(ticks) <= 11
    assert ticks[0] == 0 and ticks[-1] <= span
    y = line_rows[0]
    assert axis[y + 1:y + 4].any(axis=0).sum() >= len(ticks) - 1   # the tick marks below the line
    caption = f"time since the step began ({unit})"
    probe = np.zeros((5, text_width(caption), 3), dtype=np.uint8)
    draw_text(probe, 0, 0, caption, color=(255, 255, 255))
    mask = (probe == 255).all(axis=2)
    strip = frame[y + 13:y + 18, left:left + mask.shape[1]]
    assert (strip[mask] == np.array((225, 225, 225), np.uint8)).all()
    env.close()
