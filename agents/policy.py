"""A trained model as a policy, and what it does per scenario context.

:class:`ModelPolicy` wraps an SB3 model as a :class:`kenv.agents.baselines.Policy`;
:func:`load_model` reads one back (a run directory's ``model.zip`` or any SB3 zip);
:func:`policy_summary` plays the deterministic policy in every context of the env's
scenario mix (each forced with ``reset(options={"scenario": ctx})``) and reports the
action it takes there and the share of steps it takes it.
"""

from __future__ import annotations

import os
import zipfile
from collections import Counter
from typing import Any, Mapping

import gymnasium as gym
import numpy as np

from kenv.envs.config import read_yaml_file
from kenv.errors import ConfigError

from . import models
from .baselines import Policy
from .config import ALGO_NAMES, algorithms
from .models import zip_algo_hint

#: first seed of the evaluation episodes (episode i resets with EVAL_SEED + i); the same
#: for every training seed, so that learning curves and baselines share their episodes
EVAL_SEED = 1_000_000
#: first seed of the per-context policy summary episodes
SUMMARY_SEED = 2_000_000


class ModelPolicy(Policy):
    """A trained SB3 model as a :class:`kenv.agents.baselines.Policy` (deterministic)."""

    def __init__(self, model, name: str = "learned", deterministic: bool = True):
        self.model = model
        self.name = name
        self.deterministic = deterministic

    def act(self, obs, info):
        action, _ = self.model.predict(obs, deterministic=self.deterministic)
        return action


def load_model(path: str, algo: str | None = None, *, env: gym.Env | None = None, trust: bool = False,
               label: str = "--model"):
    """A saved model (``model.zip`` of a run dir, or any SB3 zip) to act in ``env``
    (default: the env the run's ``run.yaml`` names).

    ``algo`` is read from ``run.yaml`` when omitted, else each algorithm is tried, the
    likeliest first.  Nothing in the file is unpickled unless ``trust``
    (:mod:`kenv.agents.models`); a file that does not load is a ConfigError naming
    ``label``."""
    if os.path.isdir(path):
        path = os.path.join(path, "model.zip")
    d = os.path.dirname(os.path.abspath(path))
    run = read_run_yaml(d) or read_run_yaml(os.path.dirname(d)) or {}
    algo = algo or run.get("algo")
    if env is None:
        env = _env_of_run(run, label, path)
    else:
        _check_action_set(run, env, label, path)
    if not os.path.isfile(path):
        raise ConfigError(label, path, "an existing SB3 model .zip (kenv train's model.zip, or model.save())")
    if not zipfile.is_zipfile(path):
        raise ConfigError(label, path, "an SB3 model .zip (this file is not a zip archive)")
    tried = [algo] if algo in ALGO_NAMES else zip_algo_hint(path)
    errors = []
    for name in tried:
        try:
            return models.load_model(path, algorithms()[name], env, trust=trust, label=label)
        except ConfigError as e:
            errors.append(e)
        except Exception as e:  # noqa: BLE001 - a trusted load that fails: a bad --model
            errors.append(ConfigError(label, path, f"an SB3 model .zip of {name} "
                                      f"({type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''})"))
    raise errors[0] if len(errors) == 1 else ConfigError(label, path, "an SB3 model .zip of " + ", ".join(tried)
                                                         + f" (as {tried[0]}: {errors[0].allowed})")


def _env_of_run(run: dict, label: str, path: str) -> gym.Env:
    """The env a run's ``run.yaml`` names (its id and ``env_kwargs``), to load its model for."""
    import kenv  # noqa: F401  (registers the ids)

    from kenv.envs.registration import ENV_IDS, RENAMED

    env_id = run.get("env")
    hyper = run.get("hyperparams")
    kwargs = (hyper.get("env_kwargs") if isinstance(hyper, dict) else None) or {}
    if env_id not in ENV_IDS + tuple(RENAMED) or not isinstance(kwargs, dict) \
            or not all(isinstance(k, str) for k in kwargs):
        # (a kenv id only: run.yaml comes with the model, from wherever the model came)
        raise ConfigError(label, path, "a model in a kenv train run directory (its run.yaml names the env), "
                                       "or an env to load it for")
    try:
        return gym.make(env_id, **kwargs)
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - kwargs Gymnasium's make refuses (max_episode_steps, render_mode)
        why = f"{type(e).__name__}: {e}".splitlines()[0][:160]
        raise ConfigError(label, path, f"a model whose run.yaml names an env that can be made ({env_id} with "
                                       f"env_kwargs {kwargs!r}: {why})") from None


def _check_action_set(run: dict, env: gym.Env, label: str, path: str) -> None:
    """A model's actions are indices into the action set of the env it trained on: the
    same number of actions in another order (``actions=``, ``kenv evaluate --actions``)
    would pass the spaces check and play other choices.  The action names the zip carries
    (kenv's saves: models.ACTIONS_ENTRY), else those of the env its run's ``run.yaml``
    names, must be ``env``'s (a zip saved elsewhere, outside a run, says only its spaces)."""
    ours = getattr(env.unwrapped, "actions", None)
    if ours is None:
        return
    theirs = models.read_action_names(path) if os.path.isfile(path) else None
    if theirs is None and run:
        try:
            trained = _env_of_run(run, label, path)
        except ConfigError:
            return      # run.yaml does not name a kenv env: only the spaces can be checked
        theirs = trained.unwrapped.actions
        trained.close()
    if theirs is not None and _as_lists(theirs) != _as_lists(ours):
        raise ConfigError(label, path, f"a model trained on this env's actions ({_names(ours)}); "
                                       f"it trained on {_names(theirs)}")


def _as_lists(actions) -> list:
    """An action set as JSON reads it back: lists of names (per decision: lists of lists)."""
    return [_as_lists(a) if isinstance(a, (list, tuple)) else a for a in actions]


#: the most characters of an action set an error shows (a zip's kenv_actions.json may name
#: up to models.MAX_ACTIONS_BYTES of them; a kenv env's set is well under this)
MAX_NAMES_SHOWN = 400


def _names(actions) -> str:
    """An action set as one line: ``a, b`` or, per decision, ``[a, b] [c, d]`` (cut
    after :data:`MAX_NAMES_SHOWN` characters)."""
    if actions and isinstance(actions[0], (tuple, list)):
        line = " ".join("[" + ", ".join(names) + "]" for names in actions)
    else:
        line = ", ".join(actions)
    return line if len(line) <= MAX_NAMES_SHOWN else line[:MAX_NAMES_SHOWN] + " ..."


def read_run_yaml(run_dir: str) -> dict | None:
    path = os.path.join(run_dir, "run.yaml")
    if not os.path.isfile(path):
        return None
    try:
        run = read_yaml_file(path, "run.yaml")
    except ConfigError:
        return None
    return run if isinstance(run, dict) else None


def varying_fields(env: gym.Env) -> list[str]:
    """The scenario fields that take more than one value in the env's mix and
    make its contexts (not the phase schedules drawn within every context:
    ScenarioMix.within_episode)."""
    return env.unwrapped.mix.context_fields()


def context_label(ctx: Mapping, fields: list[str]) -> str:
    return " ".join(f"{f}={ctx[f]}" for f in fields) or "(single context)"


def action_key(action: Any) -> tuple[int, ...]:
    return tuple(int(x) for x in np.atleast_1d(np.asarray(action)).ravel())


def policy_summary(env: gym.Env, policy: Policy, episodes: int = 3, seed: int = SUMMARY_SEED) -> list[dict]:
    """Which action ``policy`` takes in each scenario context of the env's mix.

    Each context is forced with ``reset(options={"scenario": ctx})`` for ``episodes``
    seeded episodes (seeds ``seed + i``); every step's action is counted.  Per context:
    ``action``, the label of the most frequent value of each action dimension (for a
    Discrete env: the most frequent action); ``shares``, each dimension's share of the
    steps taken by that value, and ``share``, the smallest of them; ``dim_counts``, per
    dimension the steps per value index; ``counts``, the steps per action label; and the
    episodes' ``returns``.
    """
    base = env.unwrapped
    fields = varying_fields(env)
    discrete = isinstance(env.action_space, gym.spaces.Discrete)
    out = []
    for ctx in base.mix.contexts():
        counts: Counter = Counter()
        labels: dict[tuple, str] = {}
        rets = []
        for i in range(episodes):
            obs, info = env.reset(seed=seed + i, options={"scenario": ctx})
            policy.reset(env, obs, info)
            total = 0.0
            while True:
                a = policy.act(obs, info)
                k = action_key(a)
                counts[k] += 1
                if k not in labels:
                    labels[k] = base.action_label(a)
                obs, r, term, trunc, info = env.step(a)
                total += r
                if term or trunc:
                    break
            rets.append(float(total))
        n = sum(counts.values())
        ndim = len(next(iter(counts)))
        dim_counts, modes, shares = [], [], []
        for d in range(ndim):
            c: Counter = Counter()
            for k, v in counts.items():
                c[k[d]] += v
            dim_counts.append({int(i): int(v) for i, v in sorted(c.items())})
            value, m = max(c.items(), key=lambda t: (t[1], -t[0]))
            modes.append(int(value))
            shares.append(m / n)
        mode_action = modes[0] if discrete else np.array(modes, dtype=np.int64)
        out.append({
            "context": context_label(ctx, fields),
            "scenario": {f: ctx[f] for f in fields},
            "action": base.action_label(mode_action),
            "action_index": modes,
            "shares": shares,
            "share": min(shares),
            "dim_counts": dim_counts,
            "counts": {labels[k]: int(v) for k, v in counts.most_common()},
            "steps": n,
            "returns": rets,
            "return_mean": float(np.mean(rets)),
        })
    return out


def format_summary(rows: list[dict]) -> str:
    w = max([len(r["context"]) for r in rows] + [7])
    lines = [f"{'context':<{w}}  {'action (share of steps)':<36} return"]
    for r in rows:
        act = f"{r['action']} ({r['share']:.0%})"
        lines.append(f"{r['context']:<{w}}  {act:<36} {r['return_mean']:.3f}")
    return "\n".join(lines)
