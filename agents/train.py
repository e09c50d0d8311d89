"""``kenv train``: an SB3 agent on a kenv environment, from an RL-Zoo-style YAML config.

    kenv train --config ppo [--env kenv/Raid6Bench-v0] [--seed 0] [--out DIR] [--resume]
    kenv train --config configs/train/ppo.yaml --algo a2c ...

The script reads top to bottom, as CleanRL's do: the arguments (:class:`TrainArgs`),
the config file (:func:`load_train_config`), the environments (:func:`make_env`), the
callbacks (evaluation on fixed seeded episodes, atomic checkpoints), the loop
(:func:`train`) and the policy summary (:func:`policy_summary`).

Config files
    ``configs/train/<algo>.yaml`` in the RL Baselines3 Zoo format: one block per env id
    with ``n_envs``, ``n_timesteps``, ``policy``, ``policy_kwargs`` (a ``"dict(...)"``
    string, as the Zoo evaluates it, or a mapping), schedules as ``lin_<value>``,
    ``env_wrapper``, and every other key passed to the algorithm's constructor.  The
    algorithm comes from ``--algo`` or the file name (``ppo.yaml`` -> PPO), so
    ``python -m rl_zoo3.train --algo ppo --gym-packages kenv --env kenv/Raid6Bench-v0
    --conf-file configs/train/ppo.yaml`` reads the same file.  One kenv extension:
    ``env_kwargs`` (a mapping given to ``gym.make``), which the Zoo does not know (it
    takes ``--env-kwargs`` on its command line); the shipped files do not use it.
    Zoo keys kenv does not implement (``normalize``, ``frame_stack``,
    ``vec_env_wrapper``, ``callback``, ``monitor_kwargs``) are refused with a
    :class:`ConfigError`.

Run directory (``--out``; default ``runs/<env>__<algo>__<seed>``, e.g.
``runs/kenv_Raid6Bench-v0__ppo__0``: no timestamp, so that ``--resume`` finds it)
    ``run.yaml``               the resolved configuration and its fingerprint
    ``logs/progress*.csv``     SB3 scalars (``progress.csv``; a resumed segment writes
                               ``progress_resumed_<steps>.csv``)
    ``logs/tb/``               TensorBoard event files, only when the ``tensorboard``
                               package is importable (it is optional; CSV is always written)
    ``monitor/<rank>.monitor.csv``  training episodes (return, length, time)
    ``evaluations.csv``        the learning curve: deterministic policy on the same
                               seeded episodes (seeds ``EVAL_SEED + i``) every ``eval_freq`` steps
    ``checkpoints/model_<steps>_steps.zip`` (+ ``.json``: steps and wall time so far;
                               DQN also ``replay_buffer_<steps>_steps.pkl``)
    ``best_model.zip``         the best model on the evaluation episodes
    ``model.zip``              the final model
    ``policy_summary.json``    the action taken per scenario context (deterministic policy,
                               each context forced with ``reset(options={"scenario": ctx})``)
    ``result.json``            written last: its presence marks a finished run

Every file written whole (models, checkpoints, evaluations.csv, the JSON and YAML files)
is written atomically (a temporary ``.tmp-*`` file in the same directory, then
``os.replace``; ``--resume`` deletes the temporary files a kill left behind), so an
interrupted run never leaves a half-written checkpoint or result.  The append-only logs
(``logs/progress*.csv``, ``monitor/``) are SB3's own, written line by line.

Resume
    ``--resume`` continues from the newest loadable checkpoint (weights, optimiser state,
    step counter; the replay buffer for DQN), reseeding the training environments with
    ``seed + steps`` so that a resumed run is itself reproducible.  It is not bit-identical
    to an uninterrupted run: the environments restart fresh episodes at the checkpoint.
    A finished run (``result.json``) is reported, not retrained.  ``--resume`` refuses a
    run directory made with a different configuration.

Determinism
    ``torch.set_num_threads(1)``, SB3 ``seed=``, environment seeds ``seed + rank``, and
    evaluation on fixed seeds: the same command gives the same model and numbers.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import importlib
import importlib.util
import inspect
import io
import json
import math
import os
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping

import gymnasium as gym
import numpy as np
import yaml

import kenv
from kenv.envs.config import load_yaml, packaged_names
from kenv.errors import ConfigError

from .baselines import Policy, run_episode
from .evaluate import ci95

#: first seed of the evaluation episodes (episode i resets with EVAL_SEED + i); the same
#: for every training seed, so that learning curves and baselines share their episodes
EVAL_SEED = 1_000_000
#: first seed of the per-context policy summary episodes
SUMMARY_SEED = 2_000_000
#: Zoo keys that kenv train does not implement
UNSUPPORTED_ZOO_KEYS = ("normalize", "frame_stack", "vec_env_wrapper", "callback", "monitor_kwargs")
#: constructor arguments that kenv train sets itself
RESERVED_KEYS = ("self", "policy", "env", "seed", "tensorboard_log", "verbose", "device", "_init_setup_model")


def algorithms() -> dict[str, type]:
    from stable_baselines3 import A2C, DQN, PPO

    return {"ppo": PPO, "a2c": A2C, "dqn": DQN}


ALGO_NAMES = ("ppo", "a2c", "dqn")


# ----------------------------------------------------------------------------- files
def atomic_write_bytes(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=os.path.basename(path), dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def remove_stale_tmp(root: str) -> int:
    """Delete the temporary files an interrupted atomic write left under ``root``."""
    n = 0
    for dp, _, fs in os.walk(root):
        for f in fs:
            if f.startswith(".tmp-"):
                try:
                    os.unlink(os.path.join(dp, f))
                    n += 1
                except OSError:
                    pass
    return n


def atomic_write_text(path: str, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def _json_default(o: Any):
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def read_json(path: str) -> Any | None:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def save_model_atomic(model, path: str) -> None:
    buf = io.BytesIO()
    model.save(buf)
    atomic_write_bytes(path, buf.getvalue())


def env_slug(env_id: str) -> str:
    return env_id.replace("/", "_")


def default_out_dir(env_id: str, algo: str, seed: int) -> str:
    """``runs/<env>__<algo>__<seed>``: deterministic, so ``--resume`` finds it."""
    return os.path.join("runs", f"{env_slug(env_id)}__{algo}__{seed}")


# ---------------------------------------------------------------------------- config
@dataclass
class TrainConfig:
    """One env's block of a training config file, validated."""

    env_id: str
    algo: str
    source: str
    n_timesteps: int
    n_envs: int
    policy: str
    #: the keyword arguments of the algorithm's constructor (schedules and
    #: policy_kwargs still in their YAML form; see :meth:`model_kwargs`)
    hyperparams: dict
    env_kwargs: dict = field(default_factory=dict)
    env_wrapper: Any = None

    def raw(self) -> dict:
        """The block as it would be written back to YAML (for run.yaml and fingerprints)."""
        d = {"n_envs": self.n_envs, "n_timesteps": self.n_timesteps, "policy": self.policy}
        d.update(self.hyperparams)
        if self.env_kwargs:
            d["env_kwargs"] = dict(self.env_kwargs)
        if self.env_wrapper is not None:
            d["env_wrapper"] = self.env_wrapper
        return d

    def model_kwargs(self) -> dict:
        """Constructor keyword arguments with schedules and policy_kwargs resolved."""
        out = {}
        for k, v in self.hyperparams.items():
            if k == "policy_kwargs":
                out[k] = parse_policy_kwargs(f"{self.source}: {self.env_id}.policy_kwargs", v)
            elif k in ("learning_rate", "clip_range", "clip_range_vf") and isinstance(v, str):
                out[k] = _linear_schedule(float(v.split("_", 1)[1]))
            elif k == "train_freq" and isinstance(v, list):
                out[k] = tuple(v)
            else:
                out[k] = v
        return out

    def wrapper(self) -> Callable[[gym.Env], gym.Env] | None:
        return resolve_wrapper(f"{self.source}: {self.env_id}.env_wrapper", self.env_wrapper)


class _LinearSchedule:
    """``lin_<v>``: from v at the start down to 0 (the Zoo's ``linear_schedule``); picklable."""

    def __init__(self, initial: float):
        self.initial = initial

    def __call__(self, progress_remaining: float) -> float:
        return progress_remaining * self.initial


def _linear_schedule(initial: float) -> _LinearSchedule:
    return _LinearSchedule(initial)


def packaged_train_configs() -> list[str]:
    return packaged_names("train")


def read_config_file(config: str | os.PathLike) -> tuple[dict, str]:
    """The mapping in a config file (a path, or a packaged name such as ``ppo``)."""
    data, label = load_yaml("train", config, field="--config")
    if not data:
        raise ConfigError(label, "{}", "a YAML mapping of env id -> hyperparameters (RL Zoo format)")
    return data, label


def registered_env_ids() -> list[str]:
    return sorted(i for i in gym.registry if i.startswith("kenv/"))


def check_env_id(env_id: Any) -> str:
    ids = registered_env_ids()
    if not isinstance(env_id, str) or env_id not in ids:
        raise ConfigError("env", env_id, ", ".join(ids))
    return env_id


def config_env_ids(data: Mapping) -> list[str]:
    """The keys of a config file that are env ids (``Name-vN``); others hold YAML anchors."""
    return [k for k in data if isinstance(k, str) and re.fullmatch(r".+-v\d+", k)]


def load_train_config(config: str | os.PathLike, env_id: str | None = None,
                      algo: str | None = None) -> TrainConfig:
    """Read and validate the block of ``env_id`` in ``config``.

    ``algo`` defaults to the file's name (``ppo.yaml`` -> ``ppo``), as in the Zoo.
    ``env_id`` may be omitted when the file has a single block.
    """
    data, label = read_config_file(config)
    if algo is None:
        stem = os.path.splitext(os.path.basename(os.fspath(config)))[0].lower()
        if stem not in ALGO_NAMES:
            raise ConfigError("algo", stem, ", ".join(ALGO_NAMES)
                              + " (pass --algo, or name the file <algo>.yaml as RL Zoo's hyperparams/<algo>.yml)")
        algo = stem
    algo = str(algo).lower()
    if algo not in ALGO_NAMES:
        raise ConfigError("algo", algo, ", ".join(ALGO_NAMES))
    blocks = config_env_ids(data)
    if env_id is None:
        if len(blocks) != 1:
            raise ConfigError("--env", None, f"one of the env ids in {label}: " + ", ".join(blocks))
        env_id = blocks[0]
    check_env_id(env_id)
    _check_algo_space(algo, env_id, {})
    if env_id not in data:
        raise ConfigError(f"{label}: env", env_id, "an env id with a block in this file: " + ", ".join(blocks))
    return validate_block(data[env_id], env_id, algo, label)


def validate_block(block: Any, env_id: str, algo: str, label: str) -> TrainConfig:
    where = f"{label}: {env_id}"
    if not isinstance(block, dict):
        raise ConfigError(where, block, "a mapping of hyperparameters (n_envs, n_timesteps, policy, ...)")
    block = dict(block)
    for k in UNSUPPORTED_ZOO_KEYS:
        if k in block:
            raise ConfigError(f"{where}.{k}", block[k], f"not set: kenv train does not implement the Zoo's {k!r}")
    n_timesteps = _check_number(f"{where}.n_timesteps", block.pop("n_timesteps", None), integer=True, minimum=1,
                                required=True)
    n_envs = _check_number(f"{where}.n_envs", block.pop("n_envs", 1), integer=True, minimum=1)
    cls = algorithms()[algo]
    policy = block.pop("policy", "MlpPolicy")
    aliases = sorted(getattr(cls, "policy_aliases", {}) or {"MlpPolicy": None})
    if policy not in aliases:
        raise ConfigError(f"{where}.policy", policy, ", ".join(aliases))
    env_kwargs = block.pop("env_kwargs", None) or {}
    if not isinstance(env_kwargs, dict):
        raise ConfigError(f"{where}.env_kwargs", env_kwargs, "a mapping of gym.make keyword arguments")
    env_wrapper = block.pop("env_wrapper", None)
    params = inspect.signature(cls.__init__).parameters
    allowed = sorted(p for p in params if p not in RESERVED_KEYS and params[p].kind == params[p].POSITIONAL_OR_KEYWORD)
    for k, v in block.items():
        if k not in allowed:
            raise ConfigError(f"{where}.{k}", k, f"a {algo.upper()} argument or a Zoo key: "
                              + ", ".join(["n_envs", "n_timesteps", "policy", "env_wrapper", "env_kwargs"] + allowed))
        _check_value(f"{where}.{k}", k, v, params[k].default)
    cfg = TrainConfig(env_id, algo, label, n_timesteps, n_envs, policy, block, env_kwargs, env_wrapper)
    cfg.model_kwargs()  # policy_kwargs and schedules parse
    cfg.wrapper()  # the wrapper imports
    _check_algo_space(algo, env_id, env_kwargs)
    return cfg


def _check_algo_space(algo: str, env_id: str, env_kwargs: Mapping) -> None:
    if algo == "dqn":
        space = _action_space(env_id, env_kwargs)
        if not isinstance(space, gym.spaces.Discrete):
            raise ConfigError("algo", algo, f"ppo, a2c ({env_id} has a {type(space).__name__} action space; "
                              "DQN needs Discrete)")


def _action_space(env_id: str, env_kwargs: Mapping) -> gym.Space:
    env = gym.make(env_id, **dict(env_kwargs))
    try:
        return env.action_space
    finally:
        env.close()


def _check_number(where: str, value: Any, integer: bool = False, minimum: float | None = None,
                  required: bool = False) -> Any:
    if value is None and required:
        raise ConfigError(where, None, "a number (required)")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and not math.isfinite(value)):
        raise ConfigError(where, value, "an integer" if integer else "a number")
    if integer:
        if float(value) != int(value):
            raise ConfigError(where, value, "an integer")
        value = int(value)
    if minimum is not None and value < minimum:
        raise ConfigError(where, value, f"a number >= {minimum}")
    return value


def _check_value(where: str, key: str, value: Any, default: Any) -> None:
    """Type checks from the constructor's defaults; schedules and kwargs strings by form."""
    if key in ("learning_rate", "clip_range", "clip_range_vf") and isinstance(value, str):
        head, _, tail = value.partition("_")
        try:
            ok = head == "lin" and math.isfinite(float(tail))
        except ValueError:
            ok = False
        if not ok:
            raise ConfigError(where, value, "a number or 'lin_<number>' (a linear schedule, as in RL Zoo)")
        return
    if key == "policy_kwargs":
        if not isinstance(value, (str, dict)):
            raise ConfigError(where, value, "a 'dict(...)' string (RL Zoo) or a mapping")
        return
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(where, value, "true or false")
    elif isinstance(default, int) and key not in ("train_freq",):
        _check_number(where, value, integer=True)
    elif isinstance(default, float):
        _check_number(where, value)


_SAFE_NODES = (ast.Expression, ast.Call, ast.Name, ast.Attribute, ast.Load, ast.keyword, ast.Constant,
               ast.List, ast.Tuple, ast.Dict, ast.UnaryOp, ast.USub)


def parse_policy_kwargs(where: str, value: Any) -> dict:
    """``"dict(net_arch=[32, 32], activation_fn=nn.Tanh)"`` (the Zoo's form) or a mapping.

    The string is evaluated with only ``dict`` and ``torch.nn`` (``nn``) in scope, after
    checking that it contains nothing but calls, names, attributes and literals.
    """
    if isinstance(value, dict):
        value = dict(value)
        if isinstance(value.get("activation_fn"), str):
            value["activation_fn"] = _nn_attr(where, value["activation_fn"].split(".")[-1])
        return value
    import torch.nn as nn

    try:
        tree = ast.parse(value, mode="eval")
    except SyntaxError as e:
        raise ConfigError(where, value, f"a Python 'dict(...)' expression ({e.msg})") from None
    for node in ast.walk(tree):
        if not isinstance(node, _SAFE_NODES):
            raise ConfigError(where, value, f"dict(...) of literals and nn.<Activation> (found {type(node).__name__})")
        if isinstance(node, ast.Name) and node.id not in ("dict", "nn"):
            raise ConfigError(where, value, f"only the names dict and nn (found {node.id!r})")
    try:
        out = eval(compile(tree, where, "eval"), {"__builtins__": {}}, {"dict": dict, "nn": nn})  # noqa: S307
    except Exception as e:  # noqa: BLE001 - report any evaluation error as a config error
        raise ConfigError(where, value, f"a valid dict(...) expression ({type(e).__name__}: {e})") from None
    if not isinstance(out, dict):
        raise ConfigError(where, value, "an expression that gives a dict")
    return out


def _nn_attr(where: str, name: str):
    import torch.nn as nn

    if not hasattr(nn, name):
        raise ConfigError(where, name, "a torch.nn activation such as Tanh or ReLU")
    return getattr(nn, name)


def resolve_wrapper(where: str, spec: Any) -> Callable[[gym.Env], gym.Env] | None:
    """The Zoo's ``env_wrapper``: ``"module.Class"``, ``{"module.Class": {kwargs}}`` or a list of those."""
    if spec is None:
        return None
    items = spec if isinstance(spec, list) else [spec]
    wrappers = []
    for item in items:
        if isinstance(item, str):
            name, kwargs = item, {}
        elif isinstance(item, dict) and len(item) == 1:
            name, kwargs = next(iter(item.items()))
            kwargs = kwargs or {}
        else:
            raise ConfigError(where, item, "'module.Class' or {'module.Class': {kwargs}} or a list of those")
        module, _, cls_name = str(name).rpartition(".")
        try:
            cls = getattr(importlib.import_module(module), cls_name)
        except (ImportError, AttributeError, ValueError) as e:
            raise ConfigError(where, name, f"an importable wrapper class 'module.Class' ({e})") from None
        wrappers.append((cls, dict(kwargs)))

    def wrap(env: gym.Env) -> gym.Env:
        for cls, kwargs in wrappers:
            env = cls(env, **kwargs)
        return env

    return wrap


# ------------------------------------------------------------------------------- envs
def make_env(cfg: TrainConfig) -> gym.Env:
    """One evaluation environment: ``gym.make`` with the config's kwargs and wrapper."""
    env = gym.make(cfg.env_id, **dict(cfg.env_kwargs))
    w = cfg.wrapper()
    return w(env) if w is not None else env


def make_train_vec_env(cfg: TrainConfig, seed: int, monitor_dir: str | None, append: bool):
    """``n_envs`` copies in a DummyVecEnv (the envs step at 4k-13k steps/s: processes
    would cost more than they save), seeded ``seed + rank``, each behind a Monitor."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv

    # A callable, not the id: given an id, make_vec_env sets render_mode="rgb_array";
    # training never renders.
    spec = gym.spec(cfg.env_id)
    return make_vec_env(lambda **kw: spec.make(**kw), n_envs=cfg.n_envs, seed=seed, monitor_dir=monitor_dir,
                        wrapper_class=cfg.wrapper(), env_kwargs=dict(cfg.env_kwargs), vec_env_cls=DummyVecEnv,
                        monitor_kwargs={"override_existing": not append})


# ----------------------------------------------------------------------------- policy
class ModelPolicy(Policy):
    """A trained SB3 model as a :class:`agents.baselines.Policy` (deterministic)."""

    def __init__(self, model, name: str = "learned", deterministic: bool = True):
        self.model = model
        self.name = name
        self.deterministic = deterministic

    def act(self, obs, info):
        action, _ = self.model.predict(obs, deterministic=self.deterministic)
        return action


def load_model(path: str, algo: str | None = None):
    """A saved model (``model.zip`` of a run dir, or any SB3 zip); ``algo`` read from
    the run's ``run.yaml`` when omitted."""
    if os.path.isdir(path):
        run = read_run_yaml(path)
        algo = algo or (run or {}).get("algo")
        path = os.path.join(path, "model.zip")
    if algo is None:
        d = os.path.dirname(os.path.abspath(path))
        algo = (read_run_yaml(d) or read_run_yaml(os.path.dirname(d)) or {}).get("algo")
    if algo not in ALGO_NAMES:
        raise ConfigError("algo", algo, ", ".join(ALGO_NAMES) + " (no run.yaml beside the model)")
    if not os.path.isfile(path):
        raise ConfigError("model", path, "an existing SB3 .zip file")
    return algorithms()[algo].load(path, device="cpu")


def read_run_yaml(run_dir: str) -> dict | None:
    try:
        with open(os.path.join(run_dir, "run.yaml"), encoding="utf-8") as f:
            return yaml.safe_load(f)
    except (OSError, yaml.YAMLError):
        return None


def varying_fields(env: gym.Env) -> list[str]:
    """The scenario fields that take more than one value in the env's mix."""
    mix = env.unwrapped.mix
    return [f for f, dist in mix.fields.items() if sum(1 for w in dist.values() if w > 0) > 1]


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


# -------------------------------------------------------------------------- callbacks
def _callbacks():
    from stable_baselines3.common.callbacks import BaseCallback

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
        """Every ``save_freq`` env steps: checkpoints/model_<steps>_steps.zip (atomic),
        its .json (steps, wall time so far) and, for off-policy algorithms, the replay buffer."""

        def __init__(self, ckpt_dir: str, save_freq: int, wall_offset: float, t_start: float):
            super().__init__()
            self.ckpt_dir, self.save_freq = ckpt_dir, save_freq
            self.wall_offset, self.t_start = wall_offset, t_start
            self._next = None

        def _on_training_start(self) -> None:
            self._next = (self.num_timesteps // self.save_freq + 1) * self.save_freq

        def _on_step(self) -> bool:
            if self.num_timesteps >= self._next:
                save_checkpoint(self.model, self.ckpt_dir, self.wall_offset + time.perf_counter() - self.t_start)
                self._next = (self.num_timesteps // self.save_freq + 1) * self.save_freq
            return True

    return SeededEvalCallback, AtomicCheckpointCallback


def save_checkpoint(model, ckpt_dir: str, wall_s: float) -> str:
    n = int(model.num_timesteps)
    path = os.path.join(ckpt_dir, f"model_{n}_steps.zip")
    if hasattr(model, "replay_buffer") and getattr(model, "replay_buffer", None) is not None:
        buf = io.BytesIO()
        import pickle

        pickle.dump(model.replay_buffer, buf)
        atomic_write_bytes(os.path.join(ckpt_dir, f"replay_buffer_{n}_steps.pkl"), buf.getvalue())
    save_model_atomic(model, path)
    # the .json is written last: a checkpoint counts only when it is there
    atomic_write_json(path[:-4] + ".json", {"steps": n, "wall_s": wall_s})
    return path


def list_checkpoints(ckpt_dir: str) -> list[tuple[int, str]]:
    """Complete checkpoints (zip + json), newest first."""
    out = []
    try:
        names = os.listdir(ckpt_dir)
    except OSError:
        return []
    for name in names:
        if name.startswith("model_") and name.endswith("_steps.json"):
            try:
                n = int(name[len("model_"):-len("_steps.json")])
            except ValueError:
                continue
            z = os.path.join(ckpt_dir, name[:-5] + ".zip")
            if os.path.isfile(z):
                out.append((n, z))
    return sorted(out, reverse=True)


def write_evaluations(run_dir: str, history: list[dict]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=["timesteps", "mean_return", "ci95", "min", "max"], lineterminator="\n")
    w.writeheader()
    for row in history:
        w.writerow(row)
    atomic_write_text(os.path.join(run_dir, "evaluations.csv"), buf.getvalue())


def read_evaluations(run_dir: str) -> list[dict]:
    try:
        with open(os.path.join(run_dir, "evaluations.csv"), encoding="utf-8") as f:
            return [{"timesteps": int(r["timesteps"]), "mean_return": float(r["mean_return"]),
                     "ci95": float(r["ci95"]), "min": float(r["min"]), "max": float(r["max"])}
                    for r in csv.DictReader(f)]
    except (OSError, ValueError, KeyError):
        return []


# ------------------------------------------------------------------------------ train
@dataclass
class TrainArgs:
    config: str = "ppo"
    env: str | None = None
    algo: str | None = None
    seed: int = 0
    out: str | None = None
    resume: bool = False
    n_timesteps: int | None = None  # override the config's budget
    eval_freq: int | None = None  # env steps; default n_timesteps / 8
    eval_episodes: int = 10
    checkpoint_freq: int | None = None  # env steps; default n_timesteps / 4
    summary_episodes: int = 3
    progress_bar: bool = False
    verbose: int = 0


@dataclass
class TrainResult:
    run_dir: str
    env_id: str
    algo: str
    seed: int
    steps: int
    wall_s: float
    eval_return: float
    eval_ci95: float
    summary: list[dict]
    tensorboard: bool
    resumed_from: int | None = None
    files: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainResult":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    def format_text(self) -> str:
        lines = [f"{self.env_id}  {self.algo.upper()}  seed={self.seed}  steps={self.steps}  wall={self.wall_s:.1f}s"
                 + (f"  (resumed from step {self.resumed_from})" if self.resumed_from is not None else ""),
                 f"final evaluation: {self.eval_return:.3f} ± {self.eval_ci95:.3f} (deterministic, 95% CI)",
                 "", "policy per scenario context (deterministic):", format_summary(self.summary), "",
                 f"run dir: {self.run_dir}",
                 "logs: CSV (logs/progress*.csv, monitor/, evaluations.csv)"
                 + ("; TensorBoard (logs/tb)" if self.tensorboard else "; no TensorBoard (package not installed)")]
        return "\n".join(lines)


def fingerprint(cfg: TrainConfig, seed: int, args: TrainArgs) -> str:
    doc = {"env": cfg.env_id, "algo": cfg.algo, "seed": seed, "hyperparams": cfg.raw(),
           "eval_episodes": args.eval_episodes, "kenv": kenv.__version__}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def tensorboard_available() -> bool:
    return importlib.util.find_spec("tensorboard") is not None


def configure_torch() -> None:
    """One thread: reproducible, and faster for small networks on a 2-core machine."""
    import torch

    torch.set_num_threads(1)


def train(args: TrainArgs, cfg: TrainConfig | None = None, log: Callable[[str], None] | None = None) -> TrainResult:
    """Train (or resume, or report a finished run) as described in the module docstring."""
    from stable_baselines3.common.callbacks import CallbackList
    from stable_baselines3.common.logger import Logger, make_output_format

    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    cfg = cfg or load_train_config(args.config, args.env, args.algo)
    if args.n_timesteps is not None:
        cfg.n_timesteps = _check_number("--n-timesteps", args.n_timesteps, integer=True, minimum=1)
    seed = int(args.seed)
    run_dir = args.out or default_out_dir(cfg.env_id, cfg.algo, seed)
    fp = fingerprint(cfg, seed, args)
    ckpt_dir = os.path.join(run_dir, "checkpoints")

    # ------------------------------------------------------------- the run dir
    existing = os.path.isdir(run_dir) and bool(os.listdir(run_dir))
    if existing and not args.resume:
        raise ConfigError("--out", run_dir, "a new or empty directory (pass --resume to continue the run in it)")
    if existing:
        run = read_run_yaml(run_dir)
        if run is None or run.get("fingerprint") != fp:
            raise ConfigError("--resume", run_dir, "a run dir made with the same config, env, algo and seed "
                              f"(its run.yaml has fingerprint {None if run is None else run.get('fingerprint')}, "
                              f"this config gives {fp}); use another --out")
        remove_stale_tmp(run_dir)
        done = read_json(os.path.join(run_dir, "result.json"))
        if done is not None:
            log(f"{run_dir}: finished run, nothing to do")
            return TrainResult.from_dict(done)
    os.makedirs(run_dir, exist_ok=True)
    run_doc = {"env": cfg.env_id, "algo": cfg.algo, "seed": seed, "config": cfg.source, "n_timesteps": cfg.n_timesteps,
               "hyperparams": cfg.raw(), "eval_episodes": args.eval_episodes, "eval_seed": EVAL_SEED,
               "kenv": kenv.__version__, "fingerprint": fp}
    if not existing:
        atomic_write_text(os.path.join(run_dir, "run.yaml"), yaml.safe_dump(run_doc, sort_keys=False))

    # ------------------------------------------------------------- model
    configure_torch()
    algo_cls = algorithms()[cfg.algo]
    ckpts = list_checkpoints(ckpt_dir)
    model, start_steps, wall_offset = None, 0, 0.0
    for n, path in ckpts:  # newest loadable checkpoint
        try:
            venv = make_train_vec_env(cfg, seed + n, os.path.join(run_dir, "monitor"), append=True)
            model = algo_cls.load(path, env=venv, device="cpu")
        except Exception as e:  # noqa: BLE001 - a damaged checkpoint: try the one before
            log(f"checkpoint {path} unreadable ({type(e).__name__}: {e}); trying an older one")
            model = None
            continue
        rb = os.path.join(ckpt_dir, f"replay_buffer_{n}_steps.pkl")
        if hasattr(model, "load_replay_buffer") and os.path.isfile(rb):
            model.load_replay_buffer(rb)
        model.set_random_seed(seed + n)
        start_steps = n
        wall_offset = float((read_json(path[:-4] + ".json") or {}).get("wall_s", 0.0))
        log(f"resuming {run_dir} from {path} ({n} steps)")
        break
    if model is None:
        venv = make_train_vec_env(cfg, seed, os.path.join(run_dir, "monitor"), append=False)
        try:
            model = algo_cls(cfg.policy, venv, seed=seed, device="cpu", verbose=args.verbose, **cfg.model_kwargs())
        except (TypeError, ValueError, AssertionError) as e:
            raise ConfigError(f"{cfg.source}: {cfg.env_id}", "hyperparameters",
                              f"values {cfg.algo.upper()} accepts ({type(e).__name__}: {e})") from None
    tb = tensorboard_available()
    suffix = "" if start_steps == 0 else f"_resumed_{start_steps}"
    log_dir = os.path.join(run_dir, "logs")
    os.makedirs(log_dir, exist_ok=True)
    formats = [make_output_format("csv", log_dir, suffix)]
    if tb:
        formats.append(make_output_format("tensorboard", os.path.join(log_dir, "tb"), suffix))
    if args.verbose:
        formats.append(make_output_format("stdout", log_dir, suffix))
    model.set_logger(Logger(folder=log_dir, output_formats=formats))

    # ------------------------------------------------------------- callbacks
    SeededEvalCallback, AtomicCheckpointCallback = _callbacks()
    eval_freq = args.eval_freq or max(1, cfg.n_timesteps // 8)
    ckpt_freq = args.checkpoint_freq or max(1, cfg.n_timesteps // 4)
    history = [h for h in read_evaluations(run_dir) if h["timesteps"] <= start_steps]
    best = max([h["mean_return"] for h in history], default=-math.inf)
    t0 = time.perf_counter()
    callbacks = [SeededEvalCallback(cfg, run_dir, eval_freq, args.eval_episodes, history, best),
                 AtomicCheckpointCallback(ckpt_dir, ckpt_freq, wall_offset, t0)]

    # ------------------------------------------------------------- the loop
    remaining = cfg.n_timesteps - start_steps
    if remaining > 0:
        model.learn(total_timesteps=remaining, callback=CallbackList(callbacks), reset_num_timesteps=start_steps == 0,
                    progress_bar=args.progress_bar)
    else:
        callbacks[0].init_callback(model)
        callbacks[0]._on_training_end()
    wall_s = wall_offset + time.perf_counter() - t0
    save_model_atomic(model, os.path.join(run_dir, "model.zip"))
    model.get_env().close()

    # ------------------------------------------------------------- summary
    env = make_env(cfg)
    summary = policy_summary(env, ModelPolicy(model), episodes=args.summary_episodes)
    env.close()
    atomic_write_json(os.path.join(run_dir, "policy_summary.json"), summary)
    final = history[-1] if history else {"mean_return": float("nan"), "ci95": float("nan")}
    files = sorted(os.path.relpath(os.path.join(dp, f), run_dir) for dp, _, fs in os.walk(run_dir) for f in fs
                   if not f.startswith(".tmp-"))
    result = TrainResult(run_dir, cfg.env_id, cfg.algo, seed, int(model.num_timesteps), wall_s,
                         final["mean_return"], final["ci95"], summary, tb,
                         resumed_from=start_steps or None, files=files + ["result.json"])
    atomic_write_json(os.path.join(run_dir, "result.json"), result.to_dict())
    # as a rerun would read it back (JSON: e.g. dict keys become strings)
    return TrainResult.from_dict(json.loads(json.dumps(result.to_dict(), default=_json_default)))


# -------------------------------------------------------------------------------- CLI
def add_arguments(p) -> None:
    p.add_argument("--config", required=True,
                   help="RL-Zoo-style YAML (path, or a packaged name: ppo, a2c, dqn)")
    p.add_argument("--env", default=None, help="env id (default: the only block in the config file)")
    p.add_argument("--algo", default=None, help="ppo, a2c or dqn (default: the config file's name)")
    p.add_argument("--out", default=None, help="run directory (default runs/<env>__<algo>__<seed>)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its newest checkpoint")
    p.add_argument("--n-timesteps", type=int, default=None, help="override the config's n_timesteps")
    p.add_argument("--eval-freq", type=int, default=None, help="env steps between evaluations (default n_timesteps/8)")
    p.add_argument("--eval-episodes", type=int, default=10, help="seeded episodes per evaluation (default 10)")
    p.add_argument("--checkpoint-freq", type=int, default=None,
                   help="env steps between checkpoints (default n_timesteps/4)")
    p.add_argument("--progress", dest="progress", action="store_true", default=None, help="show a progress bar")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    p.add_argument("--verbose", type=int, default=0, help="SB3 verbosity (0, 1, 2)")


def run_from_args(args) -> TrainResult:
    progress = args.progress
    if progress is None:
        progress = sys.stdout.isatty() and not args.json
    if progress and (importlib.util.find_spec("tqdm") is None or importlib.util.find_spec("rich") is None):
        progress = False  # SB3's progress bar needs both
    ta = TrainArgs(config=args.config, env=args.env, algo=args.algo, seed=args.seed, out=args.out, resume=args.resume,
                   n_timesteps=args.n_timesteps, eval_freq=args.eval_freq, eval_episodes=args.eval_episodes,
                   checkpoint_freq=args.checkpoint_freq, progress_bar=bool(progress), verbose=args.verbose)
    if ta.eval_episodes < 2:
        raise ConfigError("--eval-episodes", ta.eval_episodes, "an integer >= 2 (for a 95% interval)")
    for name in ("eval_freq", "checkpoint_freq", "n_timesteps"):
        v = getattr(ta, name)
        if v is not None and v < 1:
            raise ConfigError(f"--{name.replace('_', '-')}", v, "an integer >= 1")
    try:
        return train(ta)
    except KeyboardInterrupt:
        run = ta.out or "the run dir"
        print(f"\nkenv train: interrupted; continue with the same command and --resume (run dir: {run})",
              file=sys.stderr)
        raise SystemExit(130) from None


if __name__ == "__main__":  # pragma: no cover
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    r = run_from_args(a)
    print(json.dumps(r.to_dict(), indent=2) if a.json else r.format_text())
