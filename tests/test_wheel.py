"""The wheel adds no top-level package but ``kenv`` (issue #32).

agents/ and configs/ sit at the top of the repository and are installed inside the
kenv namespace (``kenv.agents``, ``kenv.configs``: package-dir in pyproject.toml), so
that ``pip install kenv-gym`` cannot collide with another project's ``agents``.  This
builds the wheel from a copy of the sources (no stale build/ directory) with the
installed setuptools and lists its top-level names (about 3 s).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "README.md", "kenv", "agents", "configs")


def test_wheel_has_only_kenv_at_the_top_level(tmp_path):
    pytest.importorskip("setuptools")
    src = tmp_path / "src"
    for name in SOURCES:
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(p, src / name)
    out = tmp_path / "dist"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation",
                        "-q", "-w", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    (wheel,) = out.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"kenv"}
    for f in ("kenv/agents/__init__.py", "kenv/agents/train.py", "kenv/agents/rediscover.py",
              "kenv/configs/train/ppo.yaml"):
        assert f in names
    assert not [n for n in names if n.startswith("agents/")]
