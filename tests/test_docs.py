"""The README is a front door (issue #32): under 140 lines, its quick start runs, and
every relative link in README.md and docs/*.md resolves (files, and #anchors to the
target's headings, GitHub's way of naming them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, flags=re.M)}


def _links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return [m.group(1) for m in LINK.finditer(text)]


def test_readme_is_under_140_lines():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) < 140


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_relative_link_resolves(doc):
    bad = []
    for link in _links(doc):
        if re.match(r"[a-z]+:", link):  # https:, mailto:, ...
            continue
        target, _, anchor = link.partition("#")
        path = (doc.parent / target).resolve() if target else doc
        if not path.exists():
            bad.append(f"{link}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            bad.append(f"{link}: no heading #{anchor}")
    assert not bad, f"{doc.name}: " + "; ".join(bad)


def test_readme_links_the_docs():
    links = set(_links(ROOT / "README.md"))
    for name in ("docs/reproduction.md", "docs/environments.md", "docs/speed.md", "docs/clients.md",
                 "docs/fast-forward.md"):
        assert name in links


def test_quick_start_runs():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Quick start"):]
    code = re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)
    assert len(code.strip().splitlines()) <= 10
    ns: dict = {}
    exec(compile(code, "README.md quick start", "exec"), ns)  # noqa: S102 - the README's own code
    assert ns["model"].num_timesteps >= 1024
    assert set(ns["info"]["reward_components"]) >= {"throughput", "latency"}


def test_ci_runs_the_readmes_test_command_verbatim():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    cmds = re.findall(r"```bash\n(python3 -m venv .*?)\n```", text)
    assert len(cmds) == 2 and cmds[0].endswith("&& kenv rediscover")
    assert cmds[1] in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def test_environments_md_shows_kenv_evaluates_output(capsys):
    """docs/environments.md's `$ kenv evaluate ...` block is what the command prints (it
    had lost the score column the table gained)."""
    from kenv.cli import main

    text = (ROOT / "docs" / "environments.md").read_text(encoding="utf-8")
    block = re.search(r"```\n\$ (kenv evaluate [^\n]*)\n(.*?)```", text, flags=re.S)
    assert block, "no `$ kenv evaluate` block in docs/environments.md"
    assert main(block.group(1).split()[1:]) == 0
    assert capsys.readouterr().out == block.group(2)
