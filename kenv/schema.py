"""One schema for every input kenv takes, declared once.

Field names, types, ranges and choices of everything a user hands kenv --
the environment constructors (``actions``, ``scenario``, ``profile``,
``reward_weights``, ``render_mode``), ``reset(options=...)`` and its scenario
overrides, the YAML files (reward profiles, scenario mixes) and the values of
the command line -- are pydantic v2 types here, and :func:`validate` turns a
pydantic ``ValidationError`` into kenv's :class:`~kenv.errors.ConfigError`
naming the field, the value and what is allowed.

Bounds keep the simulation well defined: every scenario field is one of the
env's listed choices (so time steps, sizes and periods are the positive
values of each env version's ``scenario_fields``, simulated time always advances and nothing
overflows); weights are finite and at most :data:`MAX_WEIGHT` (a reward stays
finite); seeds and counts are non-negative integers of bounded size.

No Gymnasium here (this module sits below ``kenv.envs``).
"""

from __future__ import annotations

import argparse
import math
import os
from functools import lru_cache
from types import MappingProxyType
from typing import Annotated, Any, Callable, Literal, Mapping, Sequence

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model,
                      field_validator)

from .errors import ConfigError

#: the largest weight of a reward component or of a choice in a scenario mix:
#: a reward is a sum of six weights times components of order 1 (a few BUGs
#: or stall reports per step at most), so it stays finite and far from
#: float overflow; a mix's weights sum to at most 1e6 * (number of choices)
MAX_WEIGHT = 1e6

#: seeds: what numpy's SeedSequence and Gymnasium take, held to 63 bits (TorchRL, for one,
#: draws 63-bit reset seeds)
MAX_SEED = 2**63 - 1
#: a training seed: SB3 seeds numpy's legacy global generator (``np.random.seed``), which
#: takes 0 .. 2**32 - 1 (``kenv train``, rediscover, discover and benchmark train with it)
MAX_TRAIN_SEED = 2**32 - 1

#: a count on the command line (episodes, steps): at most this many
MAX_COUNT = 10**9

#: simulated seconds a command line may ask for: a day (every run kenv makes
#: takes seconds to minutes; 1e300 s cannot be simulated in integer ns)
MAX_SECONDS = 86_400.0

Weight = Annotated[float, Field(strict=True, ge=0, le=MAX_WEIGHT, allow_inf_nan=False)]
WEIGHT_ALLOWED = f"a finite number, 0 <= weight <= {MAX_WEIGHT:g}"


# ----------------------------------------------------------------- errors

def _loc(loc: Sequence[Any]) -> str:
    # pydantic adds the name of a union member or a validator function to
    # the location; only the keys and indexes the user wrote are kept
    parts = [str(p) for p in loc if not (isinstance(p, str) and ("[" in p or p.startswith("function-")
                                                                  or p in ("literal", "dict")))]
    return ".".join(parts)


def to_config_error(err: ValidationError, field: str, allowed: str | None = None,
                    value: Any = None) -> ConfigError:
    """The first error of ``err`` as a ConfigError: ``field`` (plus the
    location inside the value), the offending input, and ``allowed`` (or
    pydantic's description of what fits)."""
    first = err.errors(include_url=False)[0]
    where = _loc(first.get("loc", ()))
    name = f"{field}.{where}" if field and where else (field or where or "value")
    bad = first.get("input", value)
    if first.get("type") == "extra_forbidden":
        return ConfigError(name, bad, allowed or "no such field")
    # (a choice's error restates the choices, which ``allowed`` says already)
    msg = "" if allowed and first.get("type") == "literal_error" else first.get("msg", "")
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    return ConfigError(name, bad, f"{allowed} ({msg})" if allowed and msg and allowed not in msg
                       else (allowed or msg))


def validate(adapter: TypeAdapter, value: Any, field: str, allowed: str | None = None,
             context: Mapping[str, Any] | None = None) -> Any:
    """``adapter.validate_python(value, context=context)``, or a ConfigError naming ``field``
    (``context``: what the model's validators compare with, pydantic's validation context)."""
    try:
        return adapter.validate_python(value, context=context)
    except ValidationError as e:
        raise to_config_error(e, field, allowed, value) from None
    except (OverflowError, RecursionError, TypeError, ValueError) as e:  # pragma: no cover - defensive
        raise ConfigError(field, value, allowed or str(e)) from None


# ----------------------------------------------------------- reward weights

_COMPONENTS = ("entropy", "throughput", "latency", "rcu_stall", "bug", "spin")


def _component_model(required: bool) -> type[BaseModel]:
    # (an override left out is None, pydantic does not validate defaults; None given is refused:
    # it would be dropped silently)
    fields = {c: (Weight, ... if required else None) for c in _COMPONENTS}
    return create_model("RewardWeights" if required else "RewardWeightOverrides",
                        __config__=ConfigDict(extra="forbid", strict=True), **fields)


RewardWeights = _component_model(True)
RewardWeightOverrides = _component_model(False)
_OVERRIDES = TypeAdapter(RewardWeightOverrides | None)


def check_reward_weights(value: Any, field: str = "reward_weights") -> dict[str, float]:
    """``reward_weights``: None or a mapping component -> weight; an empty
    mapping overrides nothing (stated here so that it is a choice, not an
    accident); any other value, ``0`` or ``[]`` included, is an error."""
    m = validate(_OVERRIDES, dict(value) if isinstance(value, Mapping) else value, field,
                 "None or a mapping {component: weight} with components " + ", ".join(_COMPONENTS) + "; "
                 + WEIGHT_ALLOWED + " (leave a component out to keep its weight)")
    return {} if m is None else {c: w for c, w in m.model_dump().items() if w is not None}


_WEIGHTS = TypeAdapter(RewardWeights)


def check_all_reward_weights(value: Any, field: str = "reward_weights") -> dict[str, float]:
    """A weight for every component (an episode record's ``reward_weights``)."""
    return validate(_WEIGHTS, value, field, "a mapping {component: weight} with every component: "
                    + ", ".join(_COMPONENTS) + "; " + WEIGHT_ALLOWED).model_dump()


class RewardProfileFile(BaseModel):
    """A reward profile YAML file (``configs/reward/*.yaml``)."""

    model_config = ConfigDict(extra="forbid")
    name: Annotated[str, Field(strict=True, min_length=1, max_length=200)] | None = None
    description: Annotated[str, Field(strict=True, max_length=10_000)] = ""
    weights: RewardWeights


_PROFILE_FILE = TypeAdapter(RewardProfileFile)


def yaml_number_hint(value: Any) -> str:
    """What to say of a number YAML read as a string: YAML 1.1 (PyYAML) reads a
    number with an exponent as a float only with a dot and a signed exponent
    (``1e3``, ``1.0e3`` and ``3e-4`` are strings; ``1.0e+3`` and ``3.0e-4`` floats)."""
    try:
        ok = isinstance(value, str) and math.isfinite(float(value))
    except ValueError:
        ok = False
    mant, e, exp = value.strip().lower().partition("e") if ok else ("", "", "")
    if not e:
        return ""
    mant = mant if "." in mant else mant + ".0"
    exp = exp if exp[:1] in ("+", "-") else "+" + exp
    return f" (YAML reads {value} as a string: write {mant}e{exp}, with a dot and a signed exponent, " \
           f"or !!float {value})"


def check_profile_file(data: Any, label: str) -> RewardProfileFile:
    try:
        return validate(_PROFILE_FILE, data, label,
                        "name, description, and weights: {" + ", ".join(_COMPONENTS) + "}; " + WEIGHT_ALLOWED)
    except ConfigError as e:
        raise ConfigError(e.field, e.value, e.allowed + yaml_number_hint(e.value)) from None


# ---------------------------------------------------------------- scenarios

def _choice_type(choices: Sequence[Any]) -> Any:
    return Literal[tuple(choices)]


@lru_cache(maxsize=64)   # (per version's scenario_fields: nine kinds in kenv; bounded all the same)
def _scenario_models(fields: tuple[tuple[str, tuple], ...]) -> tuple[TypeAdapter, TypeAdapter]:
    """(one scenario: each field one choice, mix: each field a choice or {choice: weight})."""
    one, mix = {}, {}
    for name, choices in fields:
        c = _choice_type(choices)
        # (a field not given stays unset; None given is no choice: refused)
        one[name] = (c, None)
        mix[name] = (c | Annotated[dict[c, Weight], Field(min_length=1)], None)
    cfg = ConfigDict(extra="forbid")
    one_model = create_model("Scenario", __config__=cfg, **one)

    def _not_all_zero(cls, v):
        if isinstance(v, dict) and not sum(v.values()) > 0:
            raise ValueError("weights that are not all zero")
        return v

    mix_model = create_model("ScenarioMix", __config__=cfg,
                             __validators__={"_nz": field_validator(*[n for n, _ in fields])(_not_all_zero)}
                             if fields else {}, **mix)
    return TypeAdapter(one_model), TypeAdapter(mix_model)


def _key(allowed: Mapping[str, Sequence[Any]]) -> tuple:
    return tuple((name, tuple(choices)) for name, choices in allowed.items())


def _fields_allowed(allowed: Mapping[str, Sequence[Any]]) -> str:
    return "; ".join(f"{n}: one of {', '.join(map(repr, c))}" for n, c in allowed.items())


def check_scenario(value: Any, allowed: Mapping[str, Sequence[Any]], field: str = "scenario",
                   elsewhere: Mapping[str, str] | None = None) -> dict:
    """A scenario override (``reset(options={"scenario": ...})``): a mapping
    of some fields to one of their choices.  Returns it with the canonical
    choices (``5.0`` -> ``5``).  ``elsewhere``: fields this env does not
    take but another version of it does, with what that needs (told on error)."""
    if not isinstance(value, Mapping):
        raise ConfigError(field, value, f"a mapping {{field: value}} of scenario fields, not "
                          f"{type(value).__name__}; " + _fields_allowed(allowed))
    one, _ = _scenario_models(_key(allowed))
    try:   # (what fits is told only on error: building it costs more than the check)
        m = one.validate_python(dict(value))
    except ValidationError as e:
        raise to_config_error(e, field, _allowed_for(value, allowed, elsewhere=elsewhere)) from None
    return {k: getattr(m, k) for k in value}


def check_mix(value: Any, allowed: Mapping[str, Sequence[Any]], field: str,
              elsewhere: Mapping[str, str] | None = None) -> dict[str, dict]:
    """A scenario mix: field -> {choice: weight} or one choice (weight 1)
    (``elsewhere``: see :func:`check_scenario`)."""
    if not isinstance(value, Mapping):
        raise ConfigError(field, value, "a mapping of field -> {choice: weight} or a value; "
                          + _fields_allowed(allowed))
    _, mix = _scenario_models(_key(allowed))
    try:
        m = mix.validate_python(dict(value))
    except ValidationError as e:
        _check_weights(value, allowed, field)   # (a weight's own error, if that is what is wrong)
        raise to_config_error(e, field, _allowed_for(value, allowed, mix=True, elsewhere=elsewhere)) from None
    out = {}
    for k in value:
        v = getattr(m, k)
        out[k] = {c: float(w) for c, w in v.items()} if isinstance(v, dict) else {v: 1.0}
    return out


_WEIGHT = TypeAdapter(Weight)


def _check_weights(value: Mapping, allowed: Mapping[str, Sequence[Any]], field: str) -> None:
    """In a mix that failed validation, a ConfigError for the first bad
    weight of a ``{choice: weight}`` (pydantic reports the union's first
    member instead, the choices), or for weights that are all zero."""
    for k, dist in value.items():
        if k not in allowed or not isinstance(dist, Mapping):
            continue
        choice = TypeAdapter(_choice_type(allowed[k]))
        for c, w in dist.items():
            try:
                choice.validate_python(c)
            except ValidationError:
                raise ConfigError(f"{field}.{k}", c, "choices " + ", ".join(map(repr, allowed[k]))) from None
            try:
                _WEIGHT.validate_python(w)
            except ValidationError:
                raise ConfigError(f"{field}.{k}.{c}", w, f"a weight: {WEIGHT_ALLOWED} "
                                  "(weights must be >= 0 and not all zero)" + yaml_number_hint(w)) from None
        if dist and not sum(dist.values()) > 0:
            raise ConfigError(f"{field}.{k}", dict(dist), "weights that are not all zero "
                              "(each >= 0; at least one > 0)")


def _fits(choices: Sequence[Any], value: Any) -> bool:
    """Whether ``value`` is one of a scenario field's ``choices``."""
    try:
        return _choice_adapter(tuple(choices)).validate_python(value) is not None
    except (ValidationError, TypeError):
        return False


def _allowed_for(value: Mapping, allowed: Mapping[str, Sequence[Any]], mix: bool = False,
                 elsewhere: Mapping[str, str] | None = None) -> str:
    """What fits, told for the first field of ``value`` that is wrong (cheap: only on error)."""
    for k in value:
        if k not in allowed:
            hint = (elsewhere or {}).get(k)
            return "fields " + ", ".join(allowed) + (f"; {k} {hint}" if hint else "")
        choices = ", ".join(map(repr, allowed[k]))
        v = value[k]
        if mix and isinstance(v, Mapping):
            if v and all(_fits(allowed[k], c) for c in v):
                continue   # (a right field: its weights are _check_weights's)
            return f"{{choice: weight}} with choices {choices}; {WEIGHT_ALLOWED}; not all zero"
        if not _fits(allowed[k], v):
            return f"one of {choices}" + (" or {choice: weight}" if mix else "")
    return _fields_allowed(allowed)


class MixFile(BaseModel):
    """A scenario mix YAML file (``configs/scenarios/*.yaml``); ``mix`` is
    checked against the env's fields by :func:`check_mix`."""

    model_config = ConfigDict(extra="forbid")
    name: Annotated[str, Field(strict=True, min_length=1, max_length=200)] | None = None
    description: Annotated[str, Field(strict=True, max_length=10_000)] = ""
    env: Annotated[str, Field(strict=True)] | None = None
    mix: dict[str, Any]


_MIX_FILE = TypeAdapter(MixFile)


def check_mix_file(data: Any, label: str) -> MixFile:
    return validate(_MIX_FILE, data, label, "name, description, env, and mix: {field: {choice: weight}}")


# ------------------------------------------------------------ reset options

class ResetOptions(BaseModel):
    """``reset(options=...)``: the one key ``scenario``, a scenario override that
    :func:`check_scenario` checks against the env's fields (None: none)."""

    model_config = ConfigDict(extra="forbid")
    scenario: Any = None


_RESET_OPTIONS = TypeAdapter(ResetOptions | None)


def check_reset_options(options: Any, allowed: Mapping[str, Sequence[Any]],
                        elsewhere: Mapping[str, str] | None = None) -> dict | None:
    """The scenario override of ``reset(options=...)`` (None: none;
    ``elsewhere``: see :func:`check_scenario`)."""
    if options is None:
        return None
    m = validate(_RESET_OPTIONS, dict(options) if isinstance(options, Mapping) else options, "options",
                 "None or a mapping with the key 'scenario' only")
    if m.scenario is None:
        return None
    # (check_scenario names the type given and the fields if it is not a mapping)
    return check_scenario(m.scenario, allowed, "options.scenario", elsewhere)


# ------------------------------------------------------------ env arguments

_SEED = Annotated[int, Field(strict=True, ge=0, le=MAX_SEED)]
_SEEDS = MappingProxyType({   # (train, optional) -> the adapter
    (False, True): TypeAdapter(_SEED | None),
    (False, False): TypeAdapter(_SEED),
    (True, False): TypeAdapter(Annotated[int, Field(strict=True, ge=0, le=MAX_TRAIN_SEED)]),
})


def check_seed(value: Any, field: str = "seed", *, train: bool = False, optional: bool = True) -> int | None:
    """The project's one seed rule: ``reset(seed=...)`` and every simulation take an integer
    0..MAX_SEED (None too where ``optional``: reset's "no new seed"); a training seed
    (``train=True``) an integer 0..MAX_TRAIN_SEED.  numpy integers count; bools do not."""
    if value is not None and not isinstance(value, bool) and hasattr(value, "__index__") \
            and not isinstance(value, int):
        value = int(value.__index__())   # numpy integers
    optional = optional and not train
    allowed = f"an integer 0..{MAX_TRAIN_SEED if train else MAX_SEED}"
    return validate(_SEEDS[train, optional], value, field, "None or " + allowed if optional else allowed)


def check_int(value: Any, field: str, lo: int, hi: int | None = None, allowed: str | None = None, *,
              optional: bool = False) -> int | None:
    """The one rule for a count given to a function (a number of seeds, steps, workers,
    a budget): a Python integer ``lo..hi`` (no upper bound where ``hi`` is None), or None
    where ``optional``; bools and floats are not integers.  The error's ``allowed`` is
    exactly ``allowed`` (default: "an integer in lo..hi"), the words the command's help uses."""
    if allowed is None:
        allowed = f"an integer in {lo}..{hi}" if hi is not None else f"an integer >= {lo}"
    try:
        return _int_adapter(lo, hi, optional).validate_python(value)
    except ValidationError:
        raise ConfigError(field, value, allowed) from None


@lru_cache(maxsize=256)   # (one per bounds kenv checks: a few dozen)
def _int_adapter(lo: int, hi: int | None, optional: bool) -> TypeAdapter:
    t = Annotated[int, Field(strict=True, ge=lo, le=hi)]
    return TypeAdapter(t | None if optional else t)


def check_number(value: Any, field: str, gt: float, le: float, allowed: str, *, optional: bool = False) -> float | None:
    """The one rule for a real number given to a function (simulated seconds): an int or
    a float, finite, ``gt < value <= le`` (:func:`cli_float`'s bounds), or None where
    ``optional``; bools and strings are not numbers.  Returns it as a float."""
    try:
        return _number_adapter(gt, le, optional).validate_python(value)
    except ValidationError:
        raise ConfigError(field, value, allowed) from None


@lru_cache(maxsize=64)   # (one per bounds kenv checks: a few)
def _number_adapter(gt: float, le: float, optional: bool) -> TypeAdapter:
    t = Annotated[float, Field(strict=True, gt=gt, le=le, allow_inf_nan=False)]
    return TypeAdapter(t | None if optional else t)


def check_choice(value: Any, field: str, choices: Sequence[Any], allowed: str | None = None) -> Any:
    """The one rule for a value from a fixed list (a mode, a platform, a policy, a kernel
    option): one of ``choices``, compared as ``==`` does (``1024.0`` is ``1024``); returns
    the choice.  The error's ``allowed`` is ``allowed`` (default: the choices, listed)."""
    try:
        return _choice_adapter(tuple(choices)).validate_python(value)
    except ValidationError:
        raise ConfigError(field, value, allowed or ", ".join(map(str, choices))) from None


@lru_cache(maxsize=256)   # (one per list of choices kenv checks: a few dozen)
def _choice_adapter(choices: tuple) -> TypeAdapter:
    return TypeAdapter(_choice_type(choices))


RENDER_MODES = ("ansi", "rgb_array")
_RENDER_MODE = TypeAdapter(Literal[RENDER_MODES] | None)


def check_render_mode(value: Any) -> str | None:
    return validate(_RENDER_MODE, value, "render_mode", "None, " + ", ".join(RENDER_MODES))


_BOOL = TypeAdapter(Annotated[bool, Field(strict=True)])


def check_bool(value: Any, field: str, allowed: str = "True or False") -> bool:
    """The one rule for a switch (``fast_forward=``, ``phases=``, ``boot_states=``): True or
    False, a Python bool (not 1, 0 or "yes")."""
    return validate(_BOOL, value, field, allowed)


def check_fast_forward(value: Any) -> bool:
    """``fast_forward=``: True (skip what the fast-forwards compute exactly) or False."""
    return check_bool(value, "fast_forward")


def check_load_balance(value: Any, env_id: str, options: tuple[str, ...]) -> bool:
    """``load_balance=``: True or False; True only for an env that offers it
    (kenv/Raid6BenchBalanced-v0 turns it on)."""
    return check_kernel_option(value, "load_balance", env_id, options, "load balancing")


def check_kernel_option(value: Any, option: str, env_id: str, options: tuple[str, ...], what: str) -> bool:
    """A kernel option keyword (``load_balance=``, ``irq_threads=``): True or
    False; True only for an env whose ``options`` name it."""
    on = check_bool(value, option)
    if on and option not in options:
        raise ConfigError(option, value, f"False for {env_id}: no version of "
                                         f"{env_id.rsplit('-v', 1)[0]} simulates {what}")
    return on


def check_phases(value: Any, env_id: str) -> bool:
    """``phases=``: True or False (True: workloads that change within an
    episode, kenv.subsystems.phases; the phased versions' ids turn it on)."""
    return check_bool(value, "phases", f"True (phased workloads) or False ({env_id})")


#: (a strict list: a set's order would not be reproducible, a mapping is no list)
_NAME_LIST = TypeAdapter(Annotated[list[Annotated[str, Field(strict=True, max_length=200)]],
                                   Field(strict=True, min_length=1, max_length=64)])


def check_action_names(value: Any, normalise: Callable[[str], str], field: str = "actions",
                       allowed: str = "") -> tuple[str, ...]:
    """A non-empty list (or one string) of action names, each normalised by
    ``normalise`` (which raises ConfigError for a name not allowed); the
    normalised names must be unique (``cpu_relax()`` is ``cpu_relax``)."""
    if isinstance(value, (str, tuple)):
        value = [value] if isinstance(value, str) else list(value)
    names = validate(_NAME_LIST, value, field, "a non-empty list of at most 64 action names (strings)"
                     + (f": {allowed}" if allowed else ""))
    out = tuple(normalise(a) for a in names)
    seen: dict[str, str] = {}
    for raw, n in zip(names, out):
        if n in seen:
            raise ConfigError(field, list(value), f"distinct actions ({raw!r} is {seen[n]!r} again)")
        seen[n] = raw
    return out


def _no_nul(v: str) -> str:
    if "\x00" in v:
        raise ValueError("no NUL characters")
    return v


#: a packaged config's name or a file's path (``profile=``, ``scenario=``, ``--config``):
#: a non-empty string the OS can take as a path (PATH_MAX, linux/limits.h: 4096; no NUL)
NameOrPath = Annotated[str, Field(strict=True, min_length=1, max_length=4096), AfterValidator(_no_nul)]
_NAME_OR_PATH = TypeAdapter(NameOrPath)


def check_name_or_path(value: Any, field: str, allowed: str) -> str:
    """``value`` (a str or an os.PathLike) as a :data:`NameOrPath`, or a ConfigError
    naming ``field`` and saying ``allowed``."""
    try:
        value = os.fspath(value) if isinstance(value, os.PathLike) else value
    except TypeError:   # (a __fspath__ that returns neither str nor bytes: refused below)
        pass
    return validate(_NAME_OR_PATH, value, field, allowed)


@lru_cache(maxsize=16)   # (one per env with several decisions: Kernel-v3's three)
def _per_decision(dims: tuple[str, ...]) -> TypeAdapter:
    return TypeAdapter(dict[_choice_type(dims), Any] | None)


def check_actions_per_decision(value: Any, dims: Sequence[str], field: str = "actions") -> Mapping[str, Any]:
    """``actions=`` of an env with several decisions (Kernel-v3): None or a mapping of some
    of ``dims`` to that decision's action names (each checked by :func:`check_action_names`)."""
    return validate(_per_decision(tuple(dims)), value, field, f"None or a mapping with keys {', '.join(dims)}") or {}


def check_profile_arg(value: Any) -> None:
    """``profile``: a RewardProfile (checked by its caller), a name or a path."""
    check_name_or_path(value, "profile", "a reward profile name (balanced, latency, throughput), "
                                         "a YAML path, or a RewardProfile")


def check_scenario_arg(value: Any) -> None:
    """``scenario``: None, a mapping, or a packaged name / YAML path."""
    if value is None or isinstance(value, Mapping):
        return
    check_name_or_path(value, "scenario", "None, a mapping {field: {choice: weight}}, "
                                          "or a packaged mix name or YAML path")


# ----------------------------------------------------------- command line

def _cli_type(adapter: TypeAdapter, allowed: str, convert: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse ``type=``: ``convert`` the text, then validate; an error
    is argparse's ("argument --flag: ..."), one line, exit status 2."""
    def parse(text: str) -> Any:
        try:
            v = convert(text)
            return adapter.validate_python(v)
        except (ValueError, OverflowError, ValidationError):
            raise argparse.ArgumentTypeError(f"got {text!r}; allowed: {allowed}") from None
    parse.__name__ = allowed
    return parse


def _int(text: str) -> int:
    t = text.strip()
    if not t or len(t) > 30 or not t.lstrip("+-").isascii() or not t.lstrip("+-").isdigit():
        raise ValueError(text)
    return int(t)


def _finite(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(text)
    return v


def cli_int(lo: int, hi: int, what: str = "an integer", allowed: str | None = None) -> Callable[[str], int]:
    """argparse ``type=`` of an integer flag ``lo..hi``; its error says ``allowed`` (default
    "WHAT in lo..hi"): pass the words of the :func:`check_int` that checks the same value
    in the Python API, so that the flag and the function say one thing."""
    return _cli_type(TypeAdapter(Annotated[int, Field(ge=lo, le=hi)]), allowed or f"{what} in {lo}..{hi}", _int)


def cli_float(gt: float, le: float, what: str = "a number") -> Callable[[str], float]:
    return _cli_type(TypeAdapter(Annotated[float, Field(gt=gt, le=le, allow_inf_nan=False)]),
                     f"{what} > {gt:g} and <= {le:g}", _finite)


#: every other integer flag: ASCII digits only (Python's int() also takes "1_000" and
#: other scripts' digits), at most 18 of them; the command checks its own bounds
cli_integer = _cli_type(TypeAdapter(Annotated[int, Field(ge=-10**18, le=10**18)]),
                        "an integer in ASCII digits, at most 10**18 in size", _int)
#: --seed of every command (check_seed's bounds)
cli_seed = cli_int(0, MAX_SEED, "an integer seed")
#: --seed of a command that trains (train; discover's --train-seed)
cli_train_seed = cli_int(0, MAX_TRAIN_SEED, "an integer seed")
#: --episodes, --steps
cli_count = cli_int(1, MAX_COUNT, "an integer count")
#: --warmup
cli_count0 = cli_int(0, MAX_COUNT, "an integer count")
#: --seconds (simulated)
cli_seconds = cli_float(0.0, MAX_SECONDS, "simulated seconds")


__all__ = [
    "MAX_COUNT", "MAX_SECONDS", "MAX_SEED", "MAX_TRAIN_SEED", "MAX_WEIGHT", "MixFile", "NameOrPath",
    "RENDER_MODES", "ResetOptions", "RewardProfileFile", "RewardWeights", "Weight", "check_action_names", "check_all_reward_weights",
    "check_actions_per_decision", "check_bool", "check_choice", "check_fast_forward", "check_int",
    "check_kernel_option", "check_load_balance", "check_mix", "check_mix_file", "check_name_or_path",
    "check_number", "check_phases", "check_profile_arg", "check_profile_file", "check_render_mode",
    "check_reset_options", "check_reward_weights", "check_scenario", "check_scenario_arg", "check_seed",
    "cli_count", "cli_count0", "cli_float", "cli_int", "cli_integer", "cli_seconds", "cli_seed", "cli_train_seed",
    "to_config_error", "validate"
]
