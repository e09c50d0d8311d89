"""rgb_array frames explain themselves (issue #32): a title (env, step, simulated
time, action), the action band's choices named, and a legend naming every colour.
Frames keep their shape and dtype (RecordVideo stitches them)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import kenv  # noqa: F401  (registers the ids)
from kenv.trace.render import BG, HEIGHT, LEGEND, LEGEND_ENTRIES, TITLE, WIDTH, draw_text, task_color, task_label

ENV_IDS = sorted(i for i in gym.registry if i.startswith("kenv/"))


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
    assert not np.array_equal(_title_strip("kenv/RandomMix-v0  step 1"), _title_strip("kenv/RandomMix-v0  step 2"))


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
