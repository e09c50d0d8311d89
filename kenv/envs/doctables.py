"""The tables of the env docstrings, written from the declarations.

    python -m kenv.envs.doctables           # rewrite the tables in kenv/envs/*.py
    python -m kenv.envs.doctables --check   # exit 1 if one is not current

A table's place in a docstring is marked by a line naming what it shows and
a closing ``<!-- end -->`` line; what lies between is generated:

    <!-- observation: kenv/HwrngWait-v2 -->
    <!-- end -->
    <!-- info: kenv/HwrngWaitPhased-v0 -->
    <!-- end -->

``observation: ID`` is the table of the observation entries that the class's
version ``ID`` (kenv.envs.versions) adds to the version it extends, numbered
after that one's (all of them if it extends none), ending with the previous
action's row; ``info: ID`` the table of the info keys it adds.
tests/test_doctables.py checks that every table is current.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from pathlib import Path
from typing import Sequence

from .info import Info
from .observation import Obs
from .registration import ENV_CLASSES   # (the env classes, whose docstrings hold generated tables)

_MARKER = re.compile(r"^(?P<indent>[ \t]*)<!-- (?P<kind>observation|info): (?P<what>\S+) -->$", re.M)
_END = "<!-- end -->"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A markdown table (an empty cell as ``| |``)."""
    return "\n".join("|" + "|".join(f" {c} " if c else " " for c in r) + "|"
                     for r in [header, ["---"] * len(header), *rows]).replace(" --- ", "---")


def _index(first: int, n: int) -> str:
    return str(first) if n == 1 else f"{first}-{first + n - 1}"


def observation_table(entries: Sequence[Obs], before: Sequence[Obs], previous_action: str) -> str:
    """The table of the observation ``entries``, numbered after those of
    ``before``, ending with the previous action's row."""
    i = sum(len(e.names) for e in before)
    rows = []
    for e in entries:
        source = f"``{e.source}``" if e.source else ""
        if isinstance(e.meaning, str):
            (lo, hi), = set(e.bounds())
            rows.append((_index(i, len(e.names)), e.meaning, f"{lo:g}", f"{hi:g}", source))
        else:
            rows += [(str(i + k), m, f"{lo:g}", f"{hi:g}", source)
                     for k, (m, (lo, hi)) in enumerate(zip(e.meaning, e.bounds()))]
        i += len(e.names)
    rows.append((f"{i}..", previous_action, "0", "1", ""))
    return _table(("index", "meaning", "min", "max", "kernel source"), rows)


def info_table(entries: Sequence[Info]) -> str:
    """The table of the info keys ``entries``."""
    return _table(("key", "type", "meaning", "at reset"), [
        (", ".join(f"``{k}``" for k in e.keys), e.type_text or ", ".join(dict.fromkeys(t.__name__ for t in e.types)),
         e.meaning, e.at_reset) for e in entries])


def render(cls, kind: str, what: str) -> str:
    """The table a marker ``<!-- kind: what -->`` in ``cls``'s docstring stands for
    (``what``: the id of one of ``cls.VERSIONS``)."""
    versions = {v.id: v for v in cls.VERSIONS}
    if what not in versions:
        raise ValueError(f"{cls.__name__}'s docstring marks a table of {what!r}; its versions: {', '.join(versions)}")
    before, own, info = versions[what].added()
    if kind == "observation":
        return observation_table(own, before=before, previous_action=cls.PREVIOUS_ACTION)
    return info_table(info)


def regenerate(text: str, cls) -> str:
    """``text`` (a docstring or the source file holding it) with every marked table rewritten."""
    out, pos = [], 0
    for m in _MARKER.finditer(text):
        end = text.index(_END, m.end())
        table = render(cls, m["kind"], m["what"])
        out.append(text[pos:m.end()] + "\n")
        out.append("".join(f"{m['indent']}{line}\n" for line in table.splitlines()))
        out.append(m["indent"])
        pos = end
    return "".join(out) + text[pos:]


def stale(cls) -> bool:
    """Whether a table in ``cls``'s docstring differs from its declarations."""
    return regenerate(cls.__doc__, cls) != cls.__doc__


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kenv.envs.doctables", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table is not current")
    args = ap.parse_args(argv)
    status = 0
    for cls in ENV_CLASSES:
        path = Path(inspect.getsourcefile(cls))
        text = path.read_text()
        new = regenerate(text, cls)
        if new != text:
            if args.check:
                print(f"{path}: the tables of {cls.__name__}'s docstring are not current", file=sys.stderr)
                status = 1
            else:
                path.write_text(new)
                print(f"rewrote the tables in {path}")
    return status


if __name__ == "__main__":
    sys.exit(main())
