"""The callbacks of ``kenv train``: seeded evaluation and atomic checkpoints.

:class:`SeededEvalCallback` evaluates the deterministic policy on the same seeded
episodes (seeds ``EVAL_SEED + i``) every ``eval_freq`` env steps, writes the learning
curve (``evaluations.csv``) and the best model; :class:`AtomicCheckpointCallback` takes
the checkpoints a resume continues from, at rollout boundaries only.  Both are SB3
``BaseCallback`` classes, usable with any SB3 model.
"""

from __future__ import annotations

import os
import time

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from .baselines import run_episode
from .checkpoints import save_checkpoint, write_evaluations
from .config import TrainConfig, make_env
from .evaluate import ci95
from .files import save_model_atomic
from .policy import EVAL_SEED, ModelPolicy


class SeededEvalCallback(BaseCallback):
    """Every ``eval_freq`` env steps, the deterministic policy on the same seeded
    episodes (seeds ``EVAL_SEED + i``); the history goes to evaluations.csv (atomic),
    the best model to best_model.zip, the mean to the logger as ``eval/mean_reward``."""

    def __init__(self, cfg: TrainConfig, run_dir: str, eval_freq: int, episodes: int,
                 history: list[dict], best: float):
        super().__init__()
        self.cfg, self.run_dir, self.eval_freq, self.episodes = cfg, run_dir, eval_freq, episodes
        self.history = history
        self.best = best
        self.env = make_env(cfg)
        last = history[-1]["timesteps"] if history else None
        self._next = (last // eval_freq + 1) * eval_freq if last is not None else 0

    def evaluate_now(self) -> None:
        pol = ModelPolicy(self.model)
        rets = [run_episode(self.env, pol, EVAL_SEED + i)[0] for i in range(self.episodes)]
        mean = float(np.mean(rets))
        row = {"timesteps": int(self.model.num_timesteps), "mean_return": mean, "ci95": ci95(rets),
               "min": float(np.min(rets)), "max": float(np.max(rets))}
        self.history.append(row)
        write_evaluations(self.run_dir, self.history)
        self.logger.record("eval/mean_reward", mean)
        self.logger.record("eval/ci95", row["ci95"])
        if mean > self.best:
            self.best = mean
            save_model_atomic(self.model, os.path.join(self.run_dir, "best_model.zip"))

    def _on_training_start(self) -> None:
        if not self.history:
            self.evaluate_now()
            self._next = self.eval_freq

    def _on_step(self) -> bool:
        if self.num_timesteps >= self._next:
            self.evaluate_now()
            self._next = (self.num_timesteps // self.eval_freq + 1) * self.eval_freq
        return True

    def _on_training_end(self) -> None:
        if not self.history or self.history[-1]["timesteps"] < self.num_timesteps:
            self.evaluate_now()
        self.env.close()

class AtomicCheckpointCallback(BaseCallback):
    """Checkpoints (see :func:`save_checkpoint`) at the start of the first rollout at or
    after every ``save_freq`` env steps, and at the end of training.

    Only there: at a rollout's start the previous rollout has been trained on and the
    next has not begun, so the weights, the optimiser, the step counter, the
    environments (mid-episode) and the random generators are the whole state of the
    run.  A resumed run continues from it exactly as the uninterrupted run did (same
    rollouts, same updates, same final model); a checkpoint inside a rollout would
    lose the part of the rollout collected so far and shift every later rollout."""

    def __init__(self, ckpt_dir: str, save_freq: int, wall_offset: float, t_start: float):
        super().__init__()
        self.ckpt_dir, self.save_freq = ckpt_dir, save_freq
        self.wall_offset, self.t_start = wall_offset, t_start
        self._next = None

    def _on_training_start(self) -> None:
        self._next = (self.num_timesteps // self.save_freq + 1) * self.save_freq

    def _save(self) -> None:
        save_checkpoint(self.model, self.ckpt_dir, self.wall_offset + time.perf_counter() - self.t_start)

    def _on_rollout_start(self) -> None:
        if self.num_timesteps >= self._next:
            self._save()
            self._next = (self.num_timesteps // self.save_freq + 1) * self.save_freq

    def _on_step(self) -> bool:
        return True

    def _on_training_end(self) -> None:
        self._save()
