"""Training configs in the RL Baselines3 Zoo format: loading and validation.

``configs/train/<algo>.yaml`` holds one block per env id (``n_envs``, ``n_timesteps``,
``policy``, ``policy_kwargs``, ``lin_<v>`` schedules, ``env_wrapper`` and the algorithm's
constructor arguments); :func:`load_train_config` reads one block into a validated
:class:`TrainConfig`.  A config file is data: ``policy_kwargs`` is parsed (``ast``), never
evaluated, and may name only allow-listed activation functions and optimisers;
``env_wrapper`` only the wrappers of :data:`ALLOWED_WRAPPERS`.  Every bad value is a
:class:`ConfigError` naming the field, the value and what is allowed.  The environments a
config describes: :func:`make_env` (evaluation) and :func:`make_train_vec_env` (training).
See :mod:`kenv.agents.train` for the whole format.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import math
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Annotated, Any, Callable, Literal, Mapping

import gymnasium as gym
from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, ValidationInfo,
                      create_model, field_validator)
from pydantic_core import PydanticCustomError

from kenv.envs.config import load_yaml, packaged_names
from kenv.envs.registration import canonical_id, check_env_id
from kenv.schema import MAX_TRAIN_SEED
from kenv.errors import ConfigError, about
from kenv.schema import check_choice, validate, yaml_number_hint

#: Zoo keys that kenv train does not implement
UNSUPPORTED_ZOO_KEYS = ("normalize", "frame_stack", "vec_env_wrapper", "callback", "monitor_kwargs")
#: bounds of a config's n_timesteps and n_envs (and --n-timesteps): far beyond any kenv run,
#: low enough that nothing overflows or allocates without end
MAX_TIMESTEPS = 10**12
MAX_ENVS = 1024
#: seeds of a training run (kenv.schema.MAX_TRAIN_SEED: SB3 seeds numpy's global generator)
MAX_SEED = MAX_TRAIN_SEED
#: the largest magnitude of a numeric hyperparameter (no kenv value comes near; an int
#: of 400 digits or 1e300 would overflow a buffer size or a float32 on the way)
MAX_HYPERPARAMETER = 1e15
#: constructor arguments that kenv train sets itself
RESERVED_KEYS = ("self", "policy", "env", "seed", "tensorboard_log", "verbose", "device", "_init_setup_model")


def algorithms() -> dict[str, type]:
    from stable_baselines3 import A2C, DQN, PPO

    return {"ppo": PPO, "a2c": A2C, "dqn": DQN}


ALGO_NAMES = ("ppo", "a2c", "dqn")
# Gymnasium render modes that draw nothing on a screen (gymnasium.Env.render docs: "human"
# opens a window); training runs headless and in worker processes, so "human" is refused.
HEADLESS_RENDER_MODES = ("rgb_array", "ansi", "rgb_array_list", "ansi_list")


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
    """The kenv ids rediscover runs by default: every one to use but discover's controls
    (not the old ids, kenv.envs.registration.RENAMED: the same envs again)."""
    from kenv.envs.registration import BENCHMARK_IDS

    return sorted(BENCHMARK_IDS)


def config_env_ids(data: Mapping) -> list[str]:
    """The keys of a config file that are env ids (``Name-vN``); others hold YAML anchors."""
    return [k for k in data if isinstance(k, str) and re.fullmatch(r".+-v\d+", k)]


def load_train_config(config: str | os.PathLike, env_id: str | None = None,
                      algo: str | None = None) -> TrainConfig:
    """Read and validate the block of ``env_id`` in ``config``.

    ``algo`` defaults to the file's name (``ppo.yaml`` -> ``ppo``), as in the Zoo.
    ``env_id`` may be omitted when the file has a single block.
    """
    with about("config"):
        data, label = read_config_file(config)
    if algo is None:
        stem = os.path.splitext(os.path.basename(os.fspath(config)))[0].lower()
        algo = check_choice(stem, "algo", ALGO_NAMES, ", ".join(ALGO_NAMES) + " (pass --algo, or name the file "
                            "<algo>.yaml as RL Zoo's hyperparams/<algo>.yml)")
    algo = check_choice(str(algo).lower(), "algo", ALGO_NAMES)
    blocks = config_env_ids(data)
    if env_id is None:
        if len(blocks) != 1:
            raise ConfigError("--env", None, f"one of the env ids in {label}: " + ", ".join(blocks))
        env_id = blocks[0]
    given, env_id = env_id, check_env_id(env_id)   # (an old id trains as the id that replaces it)
    # the block of the id asked for; else of the id that replaces it, or of another old id of it
    # (a user's config keyed by kenv/Kernel-v0 serves --env kenv/Kernel-v3, and the other way round)
    key = given if given in blocks else next((k for k in blocks if canonical_id(k) == env_id), env_id)
    _check_algo_space(algo, env_id, {})
    with about("config"):   # (the file's errors name the file and a key in it)
        check_choice(key, f"{label}: env", blocks, "an env id with a block in this file: " + ", ".join(blocks))
        cfg = validate_block(data[key], env_id, algo, label)
    _check_algo_space(algo, env_id, cfg.env_kwargs)
    return cfg


# ----------------------------------------------------------------------- the block
def _integral(v: float) -> int:
    if v != int(v):
        raise PydanticCustomError("integer", "an integer")
    return int(v)


def _number(integer: bool = False, lo: float | None = None, hi: float | None = None, positive: bool = False) -> Any:
    """A number from YAML: an int, or a float (integral where an integer is asked: ``1.0e+5``)
    of magnitude at most MAX_HYPERPARAMETER; bools and strings are not numbers."""
    bounds = {"gt" if positive else "ge": lo if lo is not None else -MAX_HYPERPARAMETER,
              "le": hi if hi is not None else MAX_HYPERPARAMETER}
    t = Annotated[float, Field(strict=True, allow_inf_nan=False, **bounds)]
    return Annotated[t, AfterValidator(_integral)] if integer else t


def _range(key: str, integer: bool) -> str:
    lo, hi = HYPERPARAMETER_RANGES.get(key, (None, None))
    return (("an integer" if integer else "a number")
            + (f" > {lo}" if key in POSITIVE else f" >= {lo}" if lo is not None and hi is None else "")
            + (f" in {lo}..{hi}" if lo is not None and hi is not None else ""))


def _schedule(number: Any) -> Any:
    """``lin_<v>`` (the Zoo's linear schedule from v down to 0), v a ``number``."""
    adapter = TypeAdapter(number)

    def check(v: str) -> str:
        head, _, tail = v.partition("_")
        try:
            adapter.validate_python(float(tail))
        except (ValueError, ValidationError):
            raise PydanticCustomError("schedule", "lin_<number>") from None
        if head != "lin":
            raise PydanticCustomError("schedule", "lin_<number>")
        return v
    return Annotated[str, Field(strict=True), AfterValidator(check)]


def _not_set(v: Any) -> Any:
    raise PydanticCustomError("class", "a class")


def _unsupported(v: Any) -> Any:
    raise PydanticCustomError("unsupported", "not implemented")


def _plain(v: Any, info: ValidationInfo) -> Any:
    """Plain data (:func:`_check_data`), named by the block's key on error."""
    return _check_data(f"{info.context['where']}.{info.field_name}", v)


def _argument_field(key: str, param: inspect.Parameter) -> tuple[Any, Any]:
    """The field of an algorithm's constructor argument ``key`` in a config block, from its
    annotation (bool, int, float, schedule, mapping; classes cannot be set from a file) and
    :data:`HYPERPARAMETER_RANGES`; its description says what fits."""
    ann = str(param.annotation)
    optional = "None" in ann
    lo, hi = HYPERPARAMETER_RANGES.get(key, (None, None))
    if key == "policy_kwargs":   # (parsed by the block's validator)
        t, what, optional = str | dict, "a 'dict(...)' string (RL Zoo) or a mapping", False
    elif ann.startswith("type["):
        t, optional = Annotated[Any, AfterValidator(_not_set)], False
        what = "not set from a config file (a class; kenv train uses SB3's default)"
    elif ann.startswith("dict"):
        t, what = Annotated[dict, Field(strict=True), AfterValidator(_plain)], "a mapping"
    elif ann == str(bool):
        t, what = Annotated[bool, Field(strict=True)], "true or false"
    elif ann == str(int) or ann.startswith("int |"):
        t, what = _number(True, lo, hi, key in POSITIVE), _range(key, True)
        if ann.startswith("int | tuple"):   # train_freq: [4, step]
            t, what = t | tuple[t, Literal["step", "episode"]], what + " or [<integer>, step|episode]"
    elif "float" in ann:
        t, what = _number(False, lo, hi, key in POSITIVE), _range(key, False)
        if "Callable" in ann:
            t, what = t | _schedule(t), what + " or 'lin_<number>' (a linear schedule, as in RL Zoo)"
    else:
        t, what = Annotated[Any, AfterValidator(_plain)], "plain data: numbers, strings, true/false, null, lists, mappings"
    return (t | None if optional else t), Field(None, description=what)


#: n_timesteps of a block (and kenv train's --n-timesteps)
Timesteps = _number(True, 1, MAX_TIMESTEPS)


class ZooBlock(BaseModel):
    """The keys of a block of an RL-Zoo training config that kenv train reads itself;
    :func:`block_model` adds the algorithm's constructor arguments.  Validated with the
    context ``{"where": "<file>: <env id>"}`` (the validators' errors name it)."""

    model_config = ConfigDict(extra="forbid")
    n_timesteps: Annotated[Timesteps, Field(description=f"an integer >= 1, at most {MAX_TIMESTEPS}")]
    n_envs: Annotated[_number(True, 1, MAX_ENVS), Field(description=f"an integer >= 1, at most {MAX_ENVS}")] = 1
    policy: str = "MlpPolicy"
    env_kwargs: Annotated[dict | None, Field(strict=True, description="a mapping of gym.make keyword arguments")] = None
    env_wrapper: Any = None

    @field_validator("env_kwargs")
    @classmethod
    def _headless(cls, v: dict | None) -> dict:
        mode = (v or {}).get("render_mode")
        if mode is not None and mode not in HEADLESS_RENDER_MODES:  # training opens no window
            raise PydanticCustomError("render_mode", "a mode that needs no screen: "
                                      + ", ".join(HEADLESS_RENDER_MODES) + " or none",
                                      {"loc": "render_mode", "input": mode})
        return v or {}

    @field_validator("env_wrapper")
    @classmethod
    def _wrapper(cls, v: Any, info: ValidationInfo) -> Any:
        resolve_wrapper(f"{info.context['where']}.env_wrapper", v)   # (the allow-list; nothing else imported)
        return v


def _policy_kwargs(cls, v: Any, info: ValidationInfo) -> Any:
    parse_policy_kwargs(f"{info.context['where']}.policy_kwargs", v)   # (parsed, never evaluated)
    return v


@lru_cache(maxsize=None)   # (one per algorithm: three)
def block_model(algo: str) -> type[ZooBlock]:
    """The fields of ``algo``'s config block: :class:`ZooBlock`'s and the algorithm's
    constructor arguments (but those kenv train sets itself, :data:`RESERVED_KEYS`)."""
    cls = algorithms()[algo]
    params = inspect.signature(cls.__init__).parameters
    args = sorted(p for p in params if p not in RESERVED_KEYS and params[p].kind == params[p].POSITIONAL_OR_KEYWORD)
    aliases = tuple(sorted(getattr(cls, "policy_aliases", {}) or {"MlpPolicy": None}))
    fields = {k: _argument_field(k, params[k]) for k in args}
    fields.update({k: (Annotated[Any, AfterValidator(_unsupported)],
                       Field(None, description=f"not set: kenv train does not implement the Zoo's {k!r}"))
                   for k in UNSUPPORTED_ZOO_KEYS})
    fields["policy"] = (Literal[aliases], Field("MlpPolicy", description=", ".join(aliases)))
    validators = {"_policy_kwargs": field_validator("policy_kwargs")(_policy_kwargs)} if "policy_kwargs" in fields else {}
    return create_model(f"{algo.upper()}Block", __base__=ZooBlock, __validators__=validators, **fields)


def _block_error(err: ValidationError, model: type[ZooBlock], where: str, algo: str) -> ConfigError:
    """The first error of a block in kenv's words: the field, the value, and what fits
    (the field's description), with YAML's number hint."""
    first = err.errors(include_url=False)[0]
    ctx = first.get("ctx") or {}
    if isinstance(ctx.get("error"), ConfigError):   # a validator's own (policy_kwargs, env_wrapper, data)
        return ctx["error"]
    if not first["loc"]:   # the block itself
        return ConfigError(where, first.get("input"), "a mapping of hyperparameters (n_envs, n_timesteps, policy, ...)")
    key, value = str(first["loc"][0]), first.get("input")
    if first["type"] == "extra_forbidden":
        return ConfigError(f"{where}.{key}", key, f"a {algo.upper()} argument or a Zoo key: "
                           + ", ".join(["n_envs", "n_timesteps", "policy", "env_wrapper", "env_kwargs"]
                                       + sorted(set(model.model_fields) - set(ZooBlock.model_fields)
                                                - set(UNSUPPORTED_ZOO_KEYS))))
    if first["type"] == "missing":
        return ConfigError(f"{where}.{key}", None, "a number (required)")
    if "loc" in ctx:   # an error inside the field, told by its validator (env_kwargs.render_mode)
        return ConfigError(f"{where}.{key}.{ctx['loc']}", ctx["input"], first["msg"])
    return ConfigError(f"{where}.{key}", value, model.model_fields[key].description + yaml_number_hint(value))


def validate_block(block: Any, env_id: str, algo: str, label: str) -> TrainConfig:
    """One env's block of a config file as a TrainConfig: its fields by :func:`block_model`,
    then what only the objects can tell (policy_kwargs, the wrapper, the env's kwargs)."""
    where = f"{label}: {env_id}"
    model = block_model(algo)
    try:
        m = model.model_validate(block, context={"where": where})
    except ValidationError as e:
        raise _block_error(e, model, where, algo) from None
    env_kwargs, env_wrapper = m.env_kwargs or {}, block.get("env_wrapper")
    hyperparams = {k: v for k, v in block.items() if k not in ZooBlock.model_fields}   # (as written)
    cfg = TrainConfig(env_id, algo, label, m.n_timesteps, m.n_envs, m.policy, hyperparams, env_kwargs, env_wrapper)
    try:  # the env accepts env_kwargs
        env = gym.make(env_id, **env_kwargs)
    except ConfigError as e:   # the env's own check: named where it is in the file
        raise ConfigError(f"{where}.env_kwargs.{e.field}", e.value, e.allowed) from None
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


#: ranges of the algorithms' numeric arguments (closed intervals; None: unbounded),
#: from their meaning in SB3's docs: a discount or a probability in [0, 1], a count >= 1, ...
HYPERPARAMETER_RANGES: Mapping[str, tuple[float | None, float | None]] = MappingProxyType({
    "learning_rate": (0.0, None), "n_steps": (1, None), "batch_size": (1, None), "n_epochs": (1, None),
    "gamma": (0.0, 1.0), "gae_lambda": (0.0, 1.0), "clip_range": (0.0, None), "clip_range_vf": (0.0, None),
    "ent_coef": (0.0, None), "vf_coef": (0.0, None), "max_grad_norm": (0.0, None), "sde_sample_freq": (-1, None),
    "target_kl": (0.0, None), "stats_window_size": (1, None), "rms_prop_eps": (0.0, None),
    "buffer_size": (1, None), "learning_starts": (0, None), "tau": (0.0, 1.0), "gradient_steps": (-1, None),
    "target_update_interval": (1, None), "train_freq": (1, None), "exploration_fraction": (0.0, 1.0),
    "exploration_initial_eps": (0.0, 1.0), "exploration_final_eps": (0.0, 1.0),
})


#: arguments whose lower bound is excluded (0 divides or stalls: A2C's RMSprop with eps 0
#: gave NaN logits in the fuzz run)
POSITIVE = ("learning_rate", "rms_prop_eps", "clip_range")


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


_POLICY_NAMES = MappingProxyType(_allowed_names())
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
_WrapperName = Literal[ALLOWED_WRAPPERS]
_WrapperItem = _WrapperName | Annotated[dict[_WrapperName, dict[str, Any] | None], Field(min_length=1, max_length=1)]
#: ``env_wrapper``: a wrapper's name, ``{name: {kwargs}}``, or a non-empty list of those
_WRAPPER_SPEC = TypeAdapter(_WrapperItem | Annotated[list[_WrapperItem], Field(min_length=1)])
_WRAPPER_ALLOWED = ("one of the allowed wrappers (" + ", ".join(ALLOWED_WRAPPERS)
                    + "), {name: {kwargs}}, or a non-empty list of those")


def resolve_wrapper(where: str, spec: Any) -> Callable[[gym.Env], gym.Env] | None:
    """The Zoo's ``env_wrapper``: ``"module.Class"``, ``{"module.Class": {kwargs}}`` or a list
    of those, the classes from :data:`ALLOWED_WRAPPERS` only, the kwargs plain data naming
    the class's own arguments."""
    if spec is None:
        return None
    spec = validate(_WRAPPER_SPEC, spec, where, _WRAPPER_ALLOWED)
    wrappers = []
    for item in spec if isinstance(spec, list) else [spec]:
        name, kwargs = (item, None) if isinstance(item, str) else next(iter(item.items()))
        kwargs = kwargs or {}
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

