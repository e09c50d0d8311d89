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
    string, as the Zoo writes it, or a mapping), schedules as ``lin_<value>``,
    ``env_wrapper``, and every other key passed to the algorithm's constructor.  A config
    file is data: ``policy_kwargs`` is parsed (``ast``), never evaluated, and may name
    only allow-listed activation functions and optimisers; ``env_wrapper`` only the
    wrappers of :data:`ALLOWED_WRAPPERS`, with plain-data arguments.  The
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
                               ``state_<steps>_steps.pkl``: the training envs and random
                               generators; DQN also ``replay_buffer_<steps>_steps.pkl``)
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
    Checkpoints are taken at rollout boundaries (the start of the first rollout at or after
    every ``--checkpoint-freq`` steps, and the end of training), where the weights,
    the optimiser state, the step counter, the training environments (mid-episode;
    ``state_<steps>_steps.pkl``) and the random generators are the whole state of the
    run.  ``--resume`` continues from the newest checkpoint with all of that restored,
    so a resumed run is the uninterrupted run: the same rollouts, the same model, the
    same evaluations, bit for bit (only wall times differ; the Monitor CSVs are cut back
    to the checkpoint and the episodes after it written again).  A finished run
    (``result.json``) is reported, not retrained.  ``--resume`` refuses a run directory
    made with a different configuration, and every run file it reads is checked: a
    damaged or foreign one (``run.yaml``, a checkpoint, ``evaluations.csv``,
    ``result.json``) is an error naming it.  A run directory holds pickles (SB3's zips,
    the state files, DQN's replay buffer): resume only run directories you trust, as
    you would load only models you trust; config files, in contrast, are only data.
    ``<out>/.lock`` (``flock``) keeps a second run from writing the same directory.

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
from dataclasses import MISSING, asdict, dataclass, field
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
#: bounds of a config's n_timesteps and n_envs (and --n-timesteps): far beyond any kenv run,
#: low enough that nothing overflows or allocates without end
MAX_TIMESTEPS = 10**12
MAX_ENVS = 1024
#: seeds: SB3 seeds numpy's global generator, which takes 0 .. 2**32 - 1
MAX_SEED = 2**32 - 1
#: the largest magnitude of a numeric hyperparameter (no kenv value comes near; an int
#: of 400 digits or 1e300 would overflow a buffer size or a float32 on the way)
MAX_HYPERPARAMETER = 1e15
#: bound of --eval-episodes
MAX_EVAL_EPISODES = 10_000
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
    try:
        data, label = load_yaml("train", config, field="--config")
    except UnicodeDecodeError as e:
        raise ConfigError("--config", os.fspath(config), f"a UTF-8 YAML file ({e.reason} at byte {e.start})") from None
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
                                required=True, maximum=MAX_TIMESTEPS)
    n_envs = _check_number(f"{where}.n_envs", block.pop("n_envs", 1), integer=True, minimum=1, maximum=MAX_ENVS)
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
        _check_value(f"{where}.{k}", k, v, params[k])
    cfg = TrainConfig(env_id, algo, label, n_timesteps, n_envs, policy, block, env_kwargs, env_wrapper)
    cfg.model_kwargs()  # policy_kwargs and schedules parse
    try:  # the env accepts env_kwargs
        env = gym.make(env_id, **env_kwargs)
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - gym.make's own check of the kwargs
        raise ConfigError(f"{where}.env_kwargs", env_kwargs,
                          f"keyword arguments of {env_id}'s constructor ({type(e).__name__}: {e})") from None
    try:  # the wrapper accepts its arguments on this env
        wrap = cfg.wrapper()
        if wrap is not None:
            env = wrap(env)
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - the wrapper's own check of its kwargs
        raise ConfigError(f"{where}.env_wrapper", env_wrapper,
                          f"a wrapper and arguments that fit {env_id} ({type(e).__name__}: {e})") from None
    finally:
        env.close()
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
                  required: bool = False, maximum: float | None = None) -> Any:
    if value is None and required:
        raise ConfigError(where, None, "a number (required)")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and not math.isfinite(value)):
        hint = ""
        if isinstance(value, str):
            try:
                float(value)
                hint = f" (YAML reads {value} as a string: write it with a dot, 1.0e-5, or as !!float {value})"
            except ValueError:
                pass
        raise ConfigError(where, value, ("an integer" if integer else "a number") + hint)
    if integer:
        if isinstance(value, float) and float(value) != int(value):
            raise ConfigError(where, value, "an integer")
        value = int(value)
    if abs(value) > MAX_HYPERPARAMETER:
        raise ConfigError(where, value, f"a number of magnitude at most {MAX_HYPERPARAMETER:.0e}")
    if minimum is not None and value < minimum:
        raise ConfigError(where, value, f"a number >= {minimum}")
    if maximum is not None and value > maximum:
        raise ConfigError(where, value, f"a number in {minimum}..{maximum}")
    return value


#: ranges of the algorithms' numeric arguments (closed intervals; None: unbounded),
#: from their meaning in SB3's docs: a discount or a probability in [0, 1], a count >= 1, ...
HYPERPARAMETER_RANGES: dict[str, tuple[float | None, float | None]] = {
    "learning_rate": (0.0, None), "n_steps": (1, None), "batch_size": (1, None), "n_epochs": (1, None),
    "gamma": (0.0, 1.0), "gae_lambda": (0.0, 1.0), "clip_range": (0.0, None), "clip_range_vf": (0.0, None),
    "ent_coef": (0.0, None), "vf_coef": (0.0, None), "max_grad_norm": (0.0, None), "sde_sample_freq": (-1, None),
    "target_kl": (0.0, None), "stats_window_size": (1, None), "rms_prop_eps": (0.0, None),
    "buffer_size": (1, None), "learning_starts": (0, None), "tau": (0.0, 1.0), "gradient_steps": (-1, None),
    "target_update_interval": (1, None), "train_freq": (1, None), "exploration_fraction": (0.0, 1.0),
    "exploration_initial_eps": (0.0, 1.0), "exploration_final_eps": (0.0, 1.0),
}


#: arguments whose lower bound is excluded (0 divides or stalls: A2C's RMSprop with eps 0
#: gave NaN logits in the fuzz run)
POSITIVE = ("learning_rate", "rms_prop_eps", "clip_range")


def _check_value(where: str, key: str, value: Any, param: inspect.Parameter) -> None:
    """A value for an algorithm's constructor argument, checked against its annotation
    (bool, int, float, schedule, mapping; classes cannot be set from a file) and its range."""
    ann = str(param.annotation)
    given = value
    lo, hi = HYPERPARAMETER_RANGES.get(key, (None, None))
    rng = ("a number" + (f" > {lo}" if key in POSITIVE else f" >= {lo}" if lo is not None and hi is None else "")
           + (f" in {lo}..{hi}" if lo is not None and hi is not None else ""))
    if key == "policy_kwargs":
        if not isinstance(value, (str, dict)):
            raise ConfigError(where, value, "a 'dict(...)' string (RL Zoo) or a mapping")
        return
    if value is None and "None" in ann:
        return
    if ann.startswith("type["):
        raise ConfigError(where, value, "not set from a config file (a class; kenv train uses SB3's default)")
    if "Callable" in ann and isinstance(value, str):
        head, _, tail = value.partition("_")
        try:
            ok = head == "lin" and math.isfinite(float(tail))
        except ValueError:
            ok = False
        if not ok:
            raise ConfigError(where, value, "a number or 'lin_<number>' (a linear schedule, as in RL Zoo)")
        value = float(tail)
    if ann.startswith("dict"):
        if not isinstance(value, dict):
            raise ConfigError(where, value, "a mapping")
        _check_data(where, value)
        return
    if ann == str(bool):
        if not isinstance(value, bool):
            raise ConfigError(where, value, "true or false")
        return
    if ann.startswith("int | tuple") and isinstance(value, list):  # train_freq: [4, step]
        if len(value) != 2 or value[1] not in ("step", "episode"):
            raise ConfigError(where, value, "an integer or [<integer>, step|episode]")
        value = value[0]
    if ann == str(int) or ann.startswith("int |"):
        v = _check_number(where, value, integer=True)
    elif "float" in ann:
        v = _check_number(where, value)
    else:
        _check_data(where, value)
        return
    if (lo is not None and (v < lo or (v == lo and key in POSITIVE))) or (hi is not None and v > hi):
        raise ConfigError(where, given, rng)


#: torch.nn activation functions a config may name, as ``nn.X``, ``th.nn.X`` or
#: ``torch.nn.X`` (the Zoo's spellings; a mapping may also give the bare ``X``)
NN_ACTIVATIONS = ("ReLU", "Tanh", "ELU", "LeakyReLU", "GELU", "SiLU", "Sigmoid", "Softplus", "Mish", "SELU",
                  "CELU", "Hardtanh", "Hardswish", "ReLU6", "Softsign", "Identity")
#: torch.optim optimisers a config may name, as ``th.optim.X``, ``torch.optim.X`` or ``optim.X``
TORCH_OPTIMIZERS = ("Adam", "AdamW", "RMSprop", "SGD", "Adagrad", "Adamax", "NAdam", "RAdam")
#: SB3's TF-like RMSprop (the Zoo's A2C configs use it)
RMSPROP_TF_LIKE = "stable_baselines3.common.sb2_compat.rmsprop_tf_like.RMSpropTFLike"


def _allowed_names() -> dict[str, tuple[str, str]]:
    """dotted name in a config -> (module, attribute): the only non-literals policy_kwargs may hold."""
    out = {}
    for x in NN_ACTIVATIONS:
        for prefix in ("nn.", "th.nn.", "torch.nn."):
            out[prefix + x] = ("torch.nn", x)
    for x in TORCH_OPTIMIZERS:
        for prefix in ("th.optim.", "torch.optim.", "optim."):
            out[prefix + x] = ("torch.optim", x)
    mod, _, cls = RMSPROP_TF_LIKE.rpartition(".")
    out["RMSpropTFLike"] = out[RMSPROP_TF_LIKE] = (mod, cls)
    return out


_POLICY_NAMES = _allowed_names()
_POLICY_ALLOWED = ("a 'dict(...)' string (RL Zoo) or a mapping, of literals (numbers, strings, true/false, "
                   "lists, dict(...)) and, as values, the activation functions nn.<X> (X: "
                   + ", ".join(NN_ACTIVATIONS) + ") and optimisers th.optim.<X> (X: " + ", ".join(TORCH_OPTIMIZERS)
                   + ") or RMSpropTFLike; nothing is evaluated")


def _resolve_name(where: str, value: Any, name: str):
    """The class of an allow-listed dotted name (imported only from the allow-list)."""
    target = _POLICY_NAMES.get(name)
    if target is None:
        raise ConfigError(where, value, _POLICY_ALLOWED + f" (found {name!r})")
    return getattr(importlib.import_module(target[0]), target[1])


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` of a Name/Attribute chain; None for anything else (calls, subscripts, ...)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _literal(where: str, value: Any, node: ast.AST) -> Any:
    """The value of one node of a ``dict(...)`` string: literals, ``dict(k=v, ...)``,
    lists, tuples, ``{...}`` with string keys, negated numbers and allow-listed names.
    Nothing is evaluated, and no attribute of anything is looked up."""
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (bool, int, float, str))):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _literal(where, value, node.operand)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ConfigError(where, value, _POLICY_ALLOWED + " (a sign before a non-number)")
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_literal(where, value, e) for e in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values):
            key = _literal(where, value, k) if k is not None else None
            if not isinstance(key, str):
                raise ConfigError(where, value, _POLICY_ALLOWED + " (a {...} key that is not a string)")
            out[key] = _literal(where, value, v)
        return out
    if isinstance(node, ast.Call):
        if not (isinstance(node.func, ast.Name) and node.func.id == "dict") or node.args \
                or any(k.arg is None for k in node.keywords):
            raise ConfigError(where, value, _POLICY_ALLOWED + " (a call other than dict(key=value, ...))")
        return {k.arg: _literal(where, value, k.value) for k in node.keywords}
    name = _dotted(node)
    if name is not None:
        return _resolve_name(where, value, name)
    raise ConfigError(where, value, _POLICY_ALLOWED + f" (found {type(node).__name__})")


def parse_policy_kwargs(where: str, value: Any) -> dict:
    """``"dict(net_arch=[32, 32], activation_fn=nn.Tanh)"`` (the Zoo's form) or a mapping.

    The string is parsed (``ast``), never evaluated: it may hold literals, ``dict(...)``
    calls with keyword arguments, and, as values, the activation functions and optimisers
    of an allow-list (:data:`NN_ACTIVATIONS`, :data:`TORCH_OPTIMIZERS`, RMSpropTFLike),
    each resolved by name.  In a mapping, ``activation_fn`` and ``optimizer_class`` may
    name those classes as strings (``Tanh``, ``nn.Tanh``, ``th.optim.Adam``, ...).
    """
    if isinstance(value, dict):
        return _policy_mapping(where, value)
    if not isinstance(value, str):
        raise ConfigError(where, value, _POLICY_ALLOWED)
    try:
        tree = ast.parse(value.strip(), mode="eval")
    except (SyntaxError, ValueError) as e:
        raise ConfigError(where, value, f"a Python 'dict(...)' expression ({getattr(e, 'msg', e)})") from None
    except RecursionError:
        raise ConfigError(where, value[:80] + "...", "a 'dict(...)' expression nested less deeply") from None
    try:
        out = _literal(where, value, tree.body)
    except RecursionError:
        raise ConfigError(where, value[:80] + "...", "a 'dict(...)' expression nested less deeply") from None
    if not isinstance(out, dict):
        raise ConfigError(where, value, "an expression that gives a dict: 'dict(...)' or '{...}'")
    return out


def _policy_mapping(where: str, value: dict) -> dict:
    out = {}
    for k, v in value.items():
        if not isinstance(k, str):
            raise ConfigError(f"{where}.{k}", k, "string keys (policy keyword arguments)")
        if k in ("activation_fn", "optimizer_class") and isinstance(v, str):
            name = v
            if "." not in name:
                name = ("nn." if k == "activation_fn" else "th.optim.") + name
                if v == "RMSpropTFLike":
                    name = v
            out[k] = _resolve_name(f"{where}.{k}", v, name)
        else:
            out[k] = _check_data(f"{where}.{k}", v)
    return out


def _check_data(where: str, v: Any, depth: int = 0) -> Any:
    """``v`` if it is plain data (numbers, strings, booleans, null, lists and mappings of those)."""
    if depth > 20:
        raise ConfigError(where, "...", "data nested at most 20 levels deep")
    if v is None or isinstance(v, (bool, int, str)) or (isinstance(v, float) and math.isfinite(v)):
        return v
    if isinstance(v, float):
        raise ConfigError(where, v, "a finite number")
    if isinstance(v, (list, tuple)):
        return [_check_data(f"{where}[{i}]", x, depth + 1) for i, x in enumerate(v)]
    if isinstance(v, dict):
        for k in v:
            if not isinstance(k, str):
                raise ConfigError(f"{where}.{k}", k, "string keys")
        return {k: _check_data(f"{where}.{k}", x, depth + 1) for k, x in v.items()}
    raise ConfigError(where, v, "plain data: numbers, strings, true/false, null, lists, mappings")


def _nn_attr(where: str, name: str):
    """An allow-listed torch.nn activation by name (``Tanh``, ``nn.Tanh``, ``torch.nn.Tanh``)."""
    return _resolve_name(where, name, name if "." in name else "nn." + name)


#: the wrappers ``env_wrapper`` may name (Gymnasium's and sb3-contrib's TimeFeatureWrapper,
#: the one the Zoo's configs use); nothing else is imported
ALLOWED_WRAPPERS = (
    "gymnasium.wrappers.TimeLimit", "gymnasium.wrappers.FlattenObservation",
    "gymnasium.wrappers.NormalizeObservation", "gymnasium.wrappers.NormalizeReward",
    "gymnasium.wrappers.ClipReward", "gymnasium.wrappers.TimeAwareObservation",
    "gymnasium.wrappers.FrameStackObservation", "gymnasium.wrappers.RecordEpisodeStatistics",
    "gymnasium.wrappers.DelayObservation", "gymnasium.wrappers.StickyAction",
    "sb3_contrib.common.wrappers.TimeFeatureWrapper",
)


def resolve_wrapper(where: str, spec: Any) -> Callable[[gym.Env], gym.Env] | None:
    """The Zoo's ``env_wrapper``: ``"module.Class"``, ``{"module.Class": {kwargs}}`` or a list
    of those, the classes from :data:`ALLOWED_WRAPPERS` only, the kwargs plain data naming
    the class's own arguments."""
    if spec is None:
        return None
    items = spec if isinstance(spec, list) else [spec]
    if not items:
        raise ConfigError(where, spec, "a wrapper name, {name: {kwargs}} or a non-empty list of those")
    wrappers = []
    for item in items:
        if isinstance(item, str):
            name, kwargs = item, {}
        elif isinstance(item, dict) and len(item) == 1:
            name, kwargs = next(iter(item.items()))
            kwargs = {} if kwargs is None else kwargs
        else:
            raise ConfigError(where, item, "'module.Class' or {'module.Class': {kwargs}} or a list of those")
        if not isinstance(name, str) or name not in ALLOWED_WRAPPERS:
            raise ConfigError(where, name, "one of the allowed wrappers: " + ", ".join(ALLOWED_WRAPPERS))
        if not isinstance(kwargs, dict):
            raise ConfigError(f"{where}.{name}", kwargs, "a mapping of the wrapper's keyword arguments")
        module, _, cls_name = name.rpartition(".")
        try:
            cls = getattr(importlib.import_module(module), cls_name)
        except (ImportError, AttributeError) as e:
            raise ConfigError(where, name, f"a wrapper whose package is installed ({e})") from None
        params = inspect.signature(cls.__init__).parameters
        names = [p for p in params if p not in ("self", "env")
                 and params[p].kind in (params[p].POSITIONAL_OR_KEYWORD, params[p].KEYWORD_ONLY)]
        for k, v in kwargs.items():
            if k not in names:
                raise ConfigError(f"{where}.{name}.{k}", k, f"an argument of {cls_name}: " + (", ".join(names) or "none"))
            _check_data(f"{where}.{name}.{k}", v)
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
            run = yaml.safe_load(f)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    return run if isinstance(run, dict) else None


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

    return SeededEvalCallback, AtomicCheckpointCallback


def save_checkpoint(model, ckpt_dir: str, wall_s: float) -> str:
    """``model_<n>_steps.zip`` (SB3's save: weights, optimiser, step counter, last
    observations), ``state_<n>_steps.pkl`` (:func:`run_state`: the training environments
    and the random generators), for DQN ``replay_buffer_<n>_steps.pkl``, and last
    ``model_<n>_steps.json`` (steps, wall time): a checkpoint counts only when that is there."""
    import pickle

    n = int(model.num_timesteps)
    path = os.path.join(ckpt_dir, f"model_{n}_steps.zip")
    if hasattr(model, "replay_buffer") and getattr(model, "replay_buffer", None) is not None:
        atomic_write_bytes(os.path.join(ckpt_dir, f"replay_buffer_{n}_steps.pkl"), pickle.dumps(model.replay_buffer))
    atomic_write_bytes(os.path.join(ckpt_dir, f"state_{n}_steps.pkl"), pickle.dumps(run_state(model)))
    save_model_atomic(model, path)
    atomic_write_json(path[:-4] + ".json", {"steps": n, "wall_s": wall_s})
    return path


def _monitor(env):
    """The SB3 Monitor in a training env's wrapper chain (an env_wrapper may sit above it)."""
    from stable_baselines3.common.monitor import Monitor

    e = env
    while not isinstance(e, Monitor):
        e = e.env
    return e


def run_state(model) -> dict:
    """What SB3's model zip leaves out and a resumed run needs to continue exactly: each
    training environment with its wrappers (pickled: a kenv env pickles as its seed state
    and the actions of its current episode, see kenv/envs/base.py; the Monitor keeps its
    episode accumulators, and the size of its CSV is noted), and the state of every random
    generator training draws from (Python's, numpy's global one, torch's, the model's
    action space)."""
    import pickle
    import random

    import torch

    envs = []
    for env in model.get_env().envs:  # a DummyVecEnv (make_train_vec_env)
        mon = _monitor(env)
        writer, mon.results_writer = mon.results_writer, None  # an open file: not pickled
        try:
            blob = pickle.dumps(env)
        finally:
            mon.results_writer = writer
        size = name = None
        if writer is not None:
            writer.file_handler.flush()
            name = os.path.basename(writer.file_handler.name)
            size = os.path.getsize(writer.file_handler.name)
        envs.append({"env": blob, "monitor_file": name, "monitor_bytes": size})
    return {"version": 1, "steps": int(model.num_timesteps), "envs": envs,
            "rng": {"random": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
                    "action_space": model.action_space.np_random.bit_generator.state}}


def read_run_state(path: str, n: int, n_envs: int) -> dict:
    """A checkpoint's state file, checked (ConfigError naming the file if it is not one)."""
    import pickle

    try:
        with open(path, "rb") as f:
            state = pickle.load(f)  # noqa: S301 - written by save_checkpoint, beside SB3's own pickled zip
    except OSError as e:
        raise ConfigError(path, "unreadable", f"a checkpoint state file ({e.strerror})") from None
    except Exception as e:  # noqa: BLE001 - any unpickling failure is a damaged file
        raise ConfigError(path, "not a checkpoint state", f"a file written by kenv train ({type(e).__name__}); "
                          "delete this checkpoint's files to resume from an older one") from None
    ok = (isinstance(state, dict) and state.get("version") == 1 and state.get("steps") == n
          and isinstance(state.get("envs"), list) and len(state["envs"]) == n_envs
          and all(isinstance(e, dict) and isinstance(e.get("env"), bytes) for e in state["envs"])
          and isinstance(state.get("rng"), dict))
    if not ok:
        raise ConfigError(path, "not a checkpoint state of this run",
                          f"the state at step {n} of {n_envs} training environments, written by kenv train")
    return state


def restore_envs(venv, state: dict, path: str) -> None:
    """Put the checkpoint's environments (mid-episode, with their Monitors' accumulators)
    into a fresh DummyVecEnv, each Monitor writing on to the fresh one's CSV."""
    import pickle

    for i, st in enumerate(state["envs"]):
        fresh = venv.envs[i]
        try:
            env = pickle.loads(st["env"])  # noqa: S301 - see read_run_state
            mon = _monitor(env)
        except Exception as e:  # noqa: BLE001 - a damaged or foreign state
            raise ConfigError(path, f"environment {i}", f"a pickled training environment ({type(e).__name__}: {e})") \
                from None
        mon.results_writer = _monitor(fresh).results_writer
        env.unwrapped.spec = fresh.unwrapped.spec
        venv.envs[i] = env


def truncate_monitors(state: dict, monitor_dir: str) -> None:
    """Cut each Monitor CSV back to its size at the checkpoint: the episodes after it are
    run again (and written again) by the resumed run."""
    for st in state["envs"]:
        if st.get("monitor_file") and isinstance(st.get("monitor_bytes"), int):
            p = os.path.join(monitor_dir, os.path.basename(st["monitor_file"]))
            if os.path.isfile(p) and os.path.getsize(p) > st["monitor_bytes"]:
                os.truncate(p, st["monitor_bytes"])


def restore_rng(model, state: dict) -> None:
    import random

    import torch

    rng = state["rng"]
    random.setstate(rng["random"])
    np.random.set_state(rng["numpy"])
    torch.set_rng_state(rng["torch"])
    model.action_space.np_random.bit_generator.state = rng["action_space"]


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


EVAL_FIELDS = ["timesteps", "mean_return", "ci95", "min", "max"]


def read_evaluations(run_dir: str) -> list[dict]:
    """evaluations.csv of a run dir ([] when there is none); a file that is not the one
    kenv train writes is a ConfigError naming it (not a silently shortened curve)."""
    path = os.path.join(run_dir, "evaluations.csv")
    if not os.path.lexists(path):
        return []
    allowed = "the CSV kenv train writes (" + ",".join(EVAL_FIELDS) + "; one row per evaluation, steps increasing)"
    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise ConfigError(path, "unreadable", f"{allowed} ({e})") from None
    if header != EVAL_FIELDS:
        raise ConfigError(path, f"header {header}", allowed)
    out = []
    for i, r in enumerate(rows, start=2):
        try:
            if len(r) != len(EVAL_FIELDS):
                raise ValueError(f"{len(r)} fields")
            row = {"timesteps": int(r[0]), **{k: float(v) for k, v in zip(EVAL_FIELDS[1:], r[1:])}}
            if row["timesteps"] < 0 or (out and row["timesteps"] <= out[-1]["timesteps"]):
                raise ValueError("steps not increasing")
        except ValueError as e:
            raise ConfigError(f"{path} line {i}", ",".join(r), f"{allowed} ({e})") from None
        out.append(row)
    return out


def check_seed(flag: str, seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) <= MAX_SEED:
        raise ConfigError(flag, seed, f"an integer in 0..{MAX_SEED}")
    return int(seed)


def make_out_dir(path: str, flag: str = "--out") -> None:
    """Create the output directory, or a ConfigError naming ``flag`` (a file, under a file, unwritable)."""
    if os.path.lexists(path) and not os.path.isdir(path):
        raise ConfigError(flag, path, "a directory (this path is a file)")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise ConfigError(flag, path, f"a directory that can be created ({e.strerror})") from None


#: the lock file of a run or output directory (flock: released when its process ends, even by SIGKILL)
LOCK_NAME = ".lock"


class DirLock:
    """An exclusive ``flock`` on ``<path>/.lock`` while a run writes ``path``: a second
    run on the same directory is refused, naming the PID that holds it."""

    def __init__(self, path: str, flag: str = "--out"):
        self.path, self.flag, self.fd = path, flag, None

    def __enter__(self) -> "DirLock":
        lock = os.path.join(self.path, LOCK_NAME)
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as e:
            raise ConfigError(self.flag, self.path, f"a writable directory ({e.strerror}: {lock})") from None
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock
            fcntl = None
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                try:
                    pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
                except OSError:
                    pid = "?"
                os.close(fd)
                raise ConfigError(self.flag, self.path, f"a directory no other kenv run is writing: PID {pid} "
                                  f"holds {lock} (wait for it to end, or stop it)") from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass
        self.fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)  # releases the flock
            self.fd = None


def read_run_yaml_checked(run_dir: str) -> dict | None:
    """run.yaml of a run dir to resume: None when absent, a ConfigError naming it when it is
    not the mapping kenv train writes."""
    path = os.path.join(run_dir, "run.yaml")
    if not os.path.lexists(path):
        return None
    allowed = "the YAML mapping kenv train writes (env, algo, seed, fingerprint, ...)"
    try:
        with open(path, encoding="utf-8") as f:
            run = yaml.safe_load(f)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ConfigError(path, "unreadable", f"{allowed} ({type(e).__name__})") from None
    if not isinstance(run, dict) or not isinstance(run.get("fingerprint"), str):
        raise ConfigError(path, type(run).__name__ if not isinstance(run, dict) else "no fingerprint", allowed)
    return run


def read_result(path: str) -> TrainResult:
    """result.json of a finished run, checked: a ConfigError naming it when it is not one."""
    allowed = ("the JSON object kenv train writes last (" + ", ".join(TrainResult.__dataclass_fields__)
               + "); delete it to finish the run again from its last checkpoint")
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        raise ConfigError(path, "unreadable", f"{allowed} ({type(e).__name__})") from None
    if not isinstance(d, dict):
        raise ConfigError(path, type(d).__name__, allowed)
    missing = [k for k, f in TrainResult.__dataclass_fields__.items()
               if k not in d and f.default is MISSING and f.default_factory is MISSING]
    if missing:
        raise ConfigError(path, "missing " + ", ".join(missing), allowed)
    if not (isinstance(d["steps"], int) and isinstance(d["summary"], list) and isinstance(d["run_dir"], str)):
        raise ConfigError(path, "wrong types", allowed)
    return TrainResult.from_dict(d)


def load_checkpoint(cfg: TrainConfig, algo_cls, seed: int, ckpt_dir: str, ckpt: tuple[int, str], monitor_dir: str,
                    log: Callable[[str], None]):
    """(model, steps, wall time so far) from a checkpoint, with the training environments
    and random generators as they were (:func:`run_state`): training goes on exactly as
    the uninterrupted run did.  Every file of the checkpoint is checked; a damaged or
    foreign one is a ConfigError naming it."""
    n, path = ckpt
    meta_path = path[:-4] + ".json"
    meta = read_json(meta_path)
    if not (isinstance(meta, dict) and meta.get("steps") == n and isinstance(meta.get("wall_s"), (int, float))
            and not isinstance(meta.get("wall_s"), bool) and math.isfinite(meta["wall_s"])):
        raise ConfigError(meta_path, "not a checkpoint record", f'the JSON object kenv train writes '
                          f'({{"steps": {n}, "wall_s": <seconds>}}); delete this checkpoint\'s files '
                          "to resume from an older one")
    state_path = os.path.join(ckpt_dir, f"state_{n}_steps.pkl")
    state = read_run_state(state_path, n, cfg.n_envs) if os.path.lexists(state_path) else None
    if state is not None:
        truncate_monitors(state, monitor_dir)
    venv = make_train_vec_env(cfg, seed if state is not None else seed + n, monitor_dir, append=True)
    if state is not None:
        restore_envs(venv, state, state_path)
    try:
        model = algo_cls.load(path, env=venv, device="cpu", force_reset=state is None)
    except Exception as e:  # noqa: BLE001 - a damaged or foreign zip
        venv.close()
        raise ConfigError(path, "unreadable", f"an SB3 {cfg.algo.upper()} model written by kenv train "
                          f"({type(e).__name__}: {e}); delete this checkpoint's files to resume from an older one") \
            from None
    if hasattr(model, "load_replay_buffer"):
        rb = os.path.join(ckpt_dir, f"replay_buffer_{n}_steps.pkl")
        try:
            model.load_replay_buffer(rb)
        except Exception as e:  # noqa: BLE001
            raise ConfigError(rb, "unreadable", f"the replay buffer kenv train saved with {path} "
                              f"({type(e).__name__})") from None
    if state is not None:
        restore_rng(model, state)
    else:  # a checkpoint from before state files: fresh episodes, generators reseeded
        model.set_random_seed(seed + n)
        log(f"{path}: no state file; the environments restart fresh episodes (seeds {seed + n}+), "
            "so the resumed run is not identical to an uninterrupted one")
    return model, n, float(meta["wall_s"])


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
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    cfg = cfg or load_train_config(args.config, args.env, args.algo)
    if args.n_timesteps is not None:
        cfg.n_timesteps = _check_number("--n-timesteps", args.n_timesteps, integer=True, minimum=1,
                                        maximum=MAX_TIMESTEPS)
    seed = check_seed("--seed", args.seed)
    run_dir = args.out or default_out_dir(cfg.env_id, cfg.algo, seed)
    make_out_dir(run_dir, "--out")
    with DirLock(run_dir, "--out"):
        return _train_locked(args, cfg, seed, run_dir, log)


def _train_locked(args: TrainArgs, cfg: TrainConfig, seed: int, run_dir: str, log: Callable[[str], None]):
    from stable_baselines3.common.callbacks import CallbackList
    from stable_baselines3.common.logger import Logger, make_output_format

    fp = fingerprint(cfg, seed, args)
    ckpt_dir = os.path.join(run_dir, "checkpoints")
    monitor_dir = os.path.join(run_dir, "monitor")

    # ------------------------------------------------------------- the run dir
    existing = any(f != LOCK_NAME for f in os.listdir(run_dir))
    if existing and not args.resume:
        raise ConfigError("--out", run_dir, "a new or empty directory (pass --resume to continue the run in it)")
    if existing:
        run = read_run_yaml_checked(run_dir)
        if run is None or run.get("fingerprint") != fp:
            raise ConfigError("--resume", run_dir, "a run dir made with the same config, env, algo and seed "
                              f"(its run.yaml has fingerprint {None if run is None else run.get('fingerprint')}, "
                              f"this config gives {fp}); use another --out")
        remove_stale_tmp(run_dir)
        for d in ("checkpoints", "logs", "monitor"):
            p = os.path.join(run_dir, d)
            if os.path.lexists(p) and not os.path.isdir(p):
                raise ConfigError(p, "not a directory", f"the run's {d} directory (move the file away)")
        done = os.path.join(run_dir, "result.json")
        if os.path.lexists(done):
            res = read_result(done)
            log(f"{run_dir}: finished run, nothing to do")
            return res
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
    evaluations = read_evaluations(run_dir)  # checked before anything is loaded or cut back
    if ckpts:  # the newest complete checkpoint
        model, start_steps, wall_offset = load_checkpoint(cfg, algo_cls, seed, ckpt_dir, ckpts[0], monitor_dir, log)
        log(f"resuming {run_dir} from {ckpts[0][1]} ({start_steps} steps)")
    history = [h for h in evaluations if h["timesteps"] <= start_steps]
    if model is None:
        model = build_model(cfg, make_train_vec_env(cfg, seed, monitor_dir, append=False), seed, args.verbose)
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
                   if not f.startswith(".tmp-") and f != LOCK_NAME)
    result = TrainResult(run_dir, cfg.env_id, cfg.algo, seed, int(model.num_timesteps), wall_s,
                         final["mean_return"], final["ci95"], summary, tb,
                         resumed_from=start_steps or None, files=files + ["result.json"])
    atomic_write_json(os.path.join(run_dir, "result.json"), result.to_dict())
    # as a rerun would read it back (JSON: e.g. dict keys become strings)
    return TrainResult.from_dict(json.loads(json.dumps(result.to_dict(), default=_json_default)))


def build_model(cfg: TrainConfig, venv, seed: int, verbose: int = 0):
    """A new model on ``venv``; the values the algorithm itself refuses are a ConfigError."""
    try:
        return algorithms()[cfg.algo](cfg.policy, venv, seed=seed, device="cpu", verbose=verbose,
                                      **cfg.model_kwargs())
    except ConfigError:
        raise
    except (TypeError, ValueError, AssertionError, ArithmeticError, MemoryError, RuntimeError) as e:
        venv.close()
        raise ConfigError(f"{cfg.source}: {cfg.env_id}", "hyperparameters",
                          f"values {cfg.algo.upper()} accepts ({type(e).__name__}: {e})") from None


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
    check_seed("--seed", ta.seed)
    if not 2 <= ta.eval_episodes <= MAX_EVAL_EPISODES:
        raise ConfigError("--eval-episodes", ta.eval_episodes,
                          f"an integer in 2..{MAX_EVAL_EPISODES} (at least 2 for a 95% interval)")
    for name in ("eval_freq", "checkpoint_freq", "n_timesteps"):
        v = getattr(ta, name)
        if v is not None and not 1 <= v <= MAX_TIMESTEPS:
            raise ConfigError(f"--{name.replace('_', '-')}", v, f"an integer in 1..{MAX_TIMESTEPS}")
    if ta.verbose not in (0, 1, 2):
        raise ConfigError("--verbose", ta.verbose, "0, 1 or 2")
    try:
        return train(ta)
    except KeyboardInterrupt:
        run = ta.out or "the run dir"
        print(f"kenv train: interrupted; continue with the same command and --resume (run dir: {run})",
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
