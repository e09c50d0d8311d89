"""Loading and validating the YAML configuration (reward profiles, scenario mixes).

Files are looked up by name in the packaged ``kenv.configs`` (the repository's
``configs/`` directory), or read from a path.  Every error names the file, the
field, the value and what is allowed.
"""

from __future__ import annotations

import importlib.resources
import math
import os
from typing import Any

import yaml

from ..errors import ConfigError


def packaged_names(kind: str) -> list[str]:
    root = importlib.resources.files("kenv.configs") / kind
    try:
        return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml"))
    except (FileNotFoundError, NotADirectoryError):
        return []


def load_yaml(kind: str, name_or_path: str | os.PathLike, field: str | None = None) -> tuple[dict, str]:
    """Load a YAML file by path, or ``configs/<kind>/<name>.yaml`` (packaged) by name.

    Returns the mapping and a label for error messages; ``field`` names the
    argument in those messages (default: ``kind``).
    """
    s = os.fspath(name_or_path)
    field = field or kind
    names = packaged_names(kind)
    if os.path.isfile(s):
        label = s
        try:
            with open(s, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ConfigError(field, s, f"a readable YAML file ({e.strerror})") from None
    elif s in names:
        label = f"configs/{kind}/{s}.yaml"
        text = (importlib.resources.files("kenv.configs") / kind / f"{s}.yaml").read_text("utf-8")
    else:
        raise ConfigError(field, s, "an existing YAML file, or a packaged name: " + ", ".join(names))
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(label, f"malformed YAML{where}", f"valid YAML ({getattr(e, 'problem', e)})") from None
    if not isinstance(data, dict):
        raise ConfigError(label, type(data).__name__, "a YAML mapping at the top level")
    return data, label


def check_weight(field: str, value: Any) -> float:
    """A non-negative, finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(field, value, "a non-negative number")
    v = float(value)
    if math.isnan(v) or math.isinf(v) or v < 0:
        raise ConfigError(field, value, "a finite, non-negative number")
    return v


def check_distribution(field: str, value: Any, allowed: list | tuple | None = None) -> dict:
    """A mapping choice -> weight (non-negative, not all zero), or a single choice."""
    if not isinstance(value, dict):
        value = {value: 1.0}
    if not value:
        raise ConfigError(field, value, "a non-empty mapping of choice -> weight")
    out = {}
    for choice, w in value.items():
        if allowed is not None and choice not in allowed:
            raise ConfigError(f"{field}.{choice}", choice, ", ".join(map(str, allowed)))
        out[choice] = check_weight(f"{field}.{choice}", w)
    if sum(out.values()) <= 0:
        raise ConfigError(field, value, "weights that are not all zero")
    return out
