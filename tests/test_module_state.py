"""No module of kenv keeps mutable state in its globals (issue #29).

State in a module global is shared by every env and experiment in the
process: an episode could then depend on what ran before it (two bugs did,
df01bd4 and fdb3932: the fast-forwards' learned tables).  State belongs to
the object that uses it (an env, an experiment run) and is passed down
explicitly.  This imports every module of kenv and looks at each global:
only modules, classes, functions and constants may be there -- numbers,
strings, compiled regexes, tuples and frozensets of constants,
MappingProxyType views of constants, frozen dataclass instances and
sentinels.  A few names are allowed by name below, each with its reason.
"""

from __future__ import annotations

import __future__
import dataclasses
import enum
import functools
import importlib
import pkgutil
import re
import types

import pydantic

import kenv
from kenv.kernel.core import _Marker

#: (module, name) -> why it may hold mutable state.  Each is checked below
#: to be as described (empty, bounded).
ALLOWED = {
    # a stack of the ``with recording(...)`` blocks open right now: empty
    # outside them, so nothing carries over from one block to the next
    ("kenv.sim.engine", "_PENDING"): "empty outside a with-block",
    # the probe sets installed by ``with counter_probes():`` and the methods
    # they replaced: empty outside the block
    ("kenv.trace.probes", "_INSTALLED"): "empty outside a with-block",
    ("kenv.trace.probes", "_SAVED"): "empty outside a with-block",
    # a pure function's memo (a NIC's interrupt shape of a message size):
    # what it returns does not depend on what was asked before; bounded
    ("kenv.workloads.qperf", "_message_shape"): "bounded memo of a pure function",
    # the pydantic models of an env's scenario fields, built once per set of
    # fields: a pure function of its argument; bounded
    ("kenv.schema", "_scenario_models"): "bounded memo of a pure function",
    # the validators of check_int's bounds and check_choice's lists, likewise
    ("kenv.schema", "_int_adapter"): "bounded memo of a pure function",
    ("kenv.schema", "_choice_adapter"): "bounded memo of a pure function",
    ("kenv.schema", "_per_decision"): "bounded memo of a pure function",
    ("kenv.schema", "_number_adapter"): "bounded memo of a pure function",
}

_CONSTANT_TYPES = (int, float, complex, str, bytes, bool, type(None), range, re.Pattern,
                   types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType,
                   types.MethodType, functools.partial, enum.Enum, __future__._Feature, _Marker,
                   # a compiled pydantic validator: validating changes nothing in it
                   pydantic.TypeAdapter)


def _immutable(v, depth: int = 0) -> bool:
    """Whether ``v`` is a constant (see the module doc)."""
    if depth > 8:
        return False
    if type(v) is object:       # a sentinel: object()
        return True
    if isinstance(v, _CONSTANT_TYPES):
        return True
    if isinstance(v, (tuple, frozenset)):
        return all(_immutable(x, depth + 1) for x in v)
    if isinstance(v, types.MappingProxyType):
        return all(_immutable(k, depth + 1) and _immutable(x, depth + 1) for k, x in v.items())
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return type(v).__dataclass_params__.frozen
    return type(v).__module__ == "typing"      # TypeVar, special forms


def _kenv_modules() -> list[types.ModuleType]:
    mods = [kenv]
    for info in pkgutil.walk_packages(kenv.__path__, "kenv."):
        mods.append(importlib.import_module(info.name))
    return mods


def test_no_module_global_holds_mutable_state():
    found = []
    for mod in _kenv_modules():
        for name, v in vars(mod).items():
            if name.startswith("__") or (mod.__name__, name) in ALLOWED:
                continue
            if not _immutable(v):
                found.append(f"{mod.__name__}.{name}: {type(v).__name__}")
    assert not found, "mutable module globals (move the state into the object that uses it):\n" + "\n".join(found)


def test_allowed_globals_are_as_described():
    from kenv.sim import engine
    from kenv.trace import probes
    from kenv.workloads import qperf

    assert engine._PENDING == [] and probes._INSTALLED == [] and probes._SAVED == {}
    assert qperf._message_shape.cache_info().maxsize is not None
    from kenv import schema
    assert schema._scenario_models.cache_info().maxsize is not None
    for mod, name in ALLOWED:
        assert hasattr(importlib.import_module(mod), name), (mod, name)   # no stale entry


def test_the_scan_finds_mutable_globals():
    """The check itself: it flags a dict, a list, a set, a plain object and a
    mutable dataclass, and passes the constants it allows."""
    @dataclasses.dataclass
    class Mutable:
        x: int = 0

    class Plain:
        pass

    for v in ({}, [], set(), Plain(), Mutable(), (1, []), types.MappingProxyType({"a": []})):
        assert not _immutable(v), v
    for v in (1, "s", re.compile("x"), (1, ("a", 2.0)), frozenset({1}), types.MappingProxyType({"a": (1,)}),
              object(), _Marker("M"), len, Plain):
        assert _immutable(v), v
