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
from ..schema import check_name_or_path


#: the largest configuration file read (characters): every kenv config is a few KB
MAX_YAML_BYTES = 1_000_000
#: the most YAML nodes a file may hold once its aliases are expanded.  The byte cap
#: does not bound this: nine anchors of nine aliases each ("billion laughs") are a
#: few hundred bytes and a billion nodes for whatever walks the result (validation,
#: an error message).  kenv's largest shipped file has about 300.
MAX_YAML_NODES = 100_000
#: the deepest nesting of YAML collections (kenv's files nest three or four levels)
MAX_YAML_DEPTH = 64


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
    s = check_name_or_path(name_or_path, field, "a packaged name or a path to a YAML file")
    names = packaged_names(kind)
    if os.path.isfile(s):
        label = s
        data = read_yaml_file(s, field)
    elif s in names:
        label = f"configs/{kind}/{s}.yaml"
        data = parse_yaml((importlib.resources.files("kenv.configs") / kind / f"{s}.yaml").read_text("utf-8"), label)
    else:
        raise ConfigError(field, s, "an existing YAML file, or a packaged name: " + ", ".join(names))
    if not isinstance(data, dict):
        raise ConfigError(label, type(data).__name__, "a YAML mapping at the top level")
    return data, label


def read_yaml_file(path: str, field: str):
    """:func:`parse_yaml` of the file at ``path`` (UTF-8, at most :data:`MAX_YAML_BYTES`);
    a file that cannot be read is a ConfigError naming ``field`` and the path."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(MAX_YAML_BYTES + 1)
    except OSError as e:
        raise ConfigError(field, path, f"a readable YAML file ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise ConfigError(field, path, f"a UTF-8 text file (byte {e.start}: {e.reason})") from None
    if len(text) > MAX_YAML_BYTES:
        raise ConfigError(field, path, f"a YAML file of at most {MAX_YAML_BYTES:,} characters")
    return parse_yaml(text, path)


def parse_yaml(text: str, label: str):
    """``yaml.safe_load(text)`` for every YAML file kenv reads, bounded and strict.

    - At most :data:`MAX_YAML_NODES` nodes after alias expansion and
      :data:`MAX_YAML_DEPTH` levels of nesting, counted while the document is composed
      (:class:`_BoundedLoader`), before anything is built from it; no recursive aliases.
    - A key given twice in one mapping is refused: PyYAML keeps the last one silently,
      so a file that sets ``learning_rate`` twice would run with one of them unseen.
      The keys are read from the composed nodes, before merge keys (``<<: *default``)
      are expanded: a key that overrides a merged one is not a repeat.

    Errors are one ConfigError line naming ``label`` (the file).
    """
    loader = None
    try:
        loader = _BoundedLoader(text, label)   # (the reader checks the characters here)
        node = loader.get_single_node()
        _check_unique_keys(node, label, set())
        return None if node is None else loader.construct_document(node)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = str(getattr(e, "problem", None) or getattr(e, "reason", None) or type(e).__name__)[:200]
        raise ConfigError(label, f"malformed YAML{where}", f"valid YAML ({problem})") from None
    finally:
        if loader is not None:
            loader.dispose()


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader counting, as each node is composed, its depth and its size
    with aliases expanded (an alias counts the whole subtree it names, every time it is
    used): a file over :data:`MAX_YAML_NODES` or :data:`MAX_YAML_DEPTH` is refused
    while it is read, in time and memory bounded by the file's bytes."""

    def __init__(self, text: str, label: str):
        super().__init__(text)
        self.label = label
        self.depth = 0
        self.sizes: dict[int, int] = {}    # id(node) -> nodes with aliases expanded

    def compose_node(self, parent, index):
        alias = self.check_event(yaml.AliasEvent)
        self.depth += 1
        if self.depth > MAX_YAML_DEPTH:
            raise ConfigError(self.label, f"YAML nested over {MAX_YAML_DEPTH} levels",
                              f"at most {MAX_YAML_DEPTH} levels of nesting")
        try:
            node = super().compose_node(parent, index)
        finally:
            self.depth -= 1
        size = self.sizes.get(id(node))
        if size is None:
            if alias:   # an anchor used inside itself: an infinite document once expanded
                raise ConfigError(self.label, "a recursive YAML alias", "aliases to complete nodes only")
            if isinstance(node, yaml.MappingNode):
                size = 1 + sum(self.sizes[id(k)] + self.sizes[id(v)] for k, v in node.value)
            elif isinstance(node, yaml.SequenceNode):
                size = 1 + sum(self.sizes[id(v)] for v in node.value)
            else:
                size = 1
            self.sizes[id(node)] = size
        if size > MAX_YAML_NODES:
            raise ConfigError(self.label, f"over {MAX_YAML_NODES:,} YAML nodes with aliases expanded",
                              f"at most {MAX_YAML_NODES:,} nodes")
        return node


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
