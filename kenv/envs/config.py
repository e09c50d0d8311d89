"""Loading and validating the YAML configuration (reward profiles, scenario mixes).

Files are looked up by name in the packaged ``kenv.configs`` (the repository's
``configs/`` directory), or read from a path.  Every error names the file, the
field, the value and what is allowed.  What the files may hold is declared in
:mod:`kenv.schema` (reward profiles, scenario mixes).
"""

from __future__ import annotations

import importlib.resources
import os
import yaml

from ..errors import ConfigError


#: the largest configuration file read (characters): every kenv config is a few KB
MAX_YAML_BYTES = 1_000_000


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
    field = field or kind
    try:
        s = os.fspath(name_or_path)
    except TypeError:
        raise ConfigError(field, name_or_path, "a packaged name or a path to a YAML file") from None
    if not isinstance(s, str) or not s or "\x00" in s:
        raise ConfigError(field, name_or_path, "a packaged name or a path to a YAML file")
    names = packaged_names(kind)
    if os.path.isfile(s):
        label = s
        try:
            with open(s, encoding="utf-8") as f:
                text = f.read(MAX_YAML_BYTES + 1)
        except OSError as e:
            raise ConfigError(field, s, f"a readable YAML file ({e.strerror})") from None
        except UnicodeDecodeError as e:
            raise ConfigError(field, s, f"a UTF-8 text file (byte {e.start}: {e.reason})") from None
        if len(text) > MAX_YAML_BYTES:
            raise ConfigError(field, s, f"a YAML file of at most {MAX_YAML_BYTES:,} characters")
    elif s in names:
        label = f"configs/{kind}/{s}.yaml"
        text = (importlib.resources.files("kenv.configs") / kind / f"{s}.yaml").read_text("utf-8")
    else:
        raise ConfigError(field, s, "an existing YAML file, or a packaged name: " + ", ".join(names))
    try:
        data = _load_unique_keys(text, label)
    except RecursionError:
        raise ConfigError(label, "deeply nested YAML", "YAML nested at most a few hundred levels") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(label, f"malformed YAML{where}", f"valid YAML ({getattr(e, 'problem', e)})") from None
    if not isinstance(data, dict):
        raise ConfigError(label, type(data).__name__, "a YAML mapping at the top level")
    return data, label


def _load_unique_keys(text: str, label: str):
    """``yaml.safe_load(text)``, refusing a key given twice in one mapping: PyYAML keeps
    the last one silently, so a file that sets ``learning_rate`` twice would run with
    one of them unseen.  The keys are read from the composed nodes, before merge keys
    (``<<: *default``) are expanded: a key that overrides a merged one is not a repeat."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        _check_unique_keys(node, label, set())
        return None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()


def _check_unique_keys(node, label: str, seen: set) -> None:
    if node is None or id(node) in seen:      # (an alias: checked where its anchor is)
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        lines: dict[tuple, int] = {}
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                line = key.start_mark.line + 1
                if (key.tag, key.value) in lines:
                    raise ConfigError(label, f"the key {key.value!r} twice (lines {lines[key.tag, key.value]} and "
                                      f"{line})", "each key once in a mapping (YAML would keep only the last)")
                lines[key.tag, key.value] = line
            _check_unique_keys(key, label, seen)
            _check_unique_keys(value, label, seen)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _check_unique_keys(item, label, seen)
