"""The layers of kenv depend one way (DESIGN.md "Layers"; issue #29).

Every module under kenv/ is parsed (ast, not imported) and each of its
imports -- at module level or inside a function -- is placed in a layer.  A
module may import its own layer and the layers before it in ``LAYERS``,
never one after it.  Imports under ``if TYPE_CHECKING:`` are annotations
only and are not counted.  Importing the bare package ``kenv`` is allowed
anywhere: Python imports it before any of its submodules anyway.

Besides the order: no module below kenv/envs imports gymnasium, and no
environment module (one that ``kenv.envs.registration.ENVS`` names) imports
another: Kernel-v3 composes the subsystems (kenv/subsystems), not its sibling
environments.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

KENV = Path(__file__).resolve().parent.parent / "kenv"

#: the layers, first to last; a module may import its own layer and earlier
#: ones.  (module prefix, layer): the longest matching prefix decides.
LAYERS = (
    "base",         # kenv.errors, kenv.schema: errors and input checks (pydantic), for every layer
    "sim",          # event engine
    "kernel",       # kernel mechanisms (scheduler, timers, RCU, tracepoints)
    "drivers",      # random.c, hwrng, raid6 and their fast-forwards
    "workloads",    # qperf, dd, cyclictest, modprobe, load
    "platforms",    # named machines: parameters of the drivers and workloads
    "experiments",  # the seed experiments (kenv experiment ...)
    "subsystems",   # the blocks the envs compose, no gymnasium
    "trace",        # recording, Perfetto/ftrace output, rgb_array frames
    "envs",         # Gymnasium environments (and gymnasium itself)
    "agents",       # baselines, training (agents/, or kenv/agents)
    "cli",          # kenv.cli, kenv trace's command, the package root
)
_PREFIXES = {
    "kenv.errors": "base", "kenv.schema": "base", "kenv.files": "base",
    "kenv.sim": "sim", "kenv.kernel": "kernel", "kenv.drivers": "drivers",
    # the fast-forwards, in the drivers' layer while the drivers and QperfPair still
    # build their own (DESIGN.md puts kenv/fastforward after the workloads, attached
    # from outside: issue #44, not done yet)
    "kenv.fastforward": "drivers",
    "kenv.workloads": "workloads", "kenv.platforms": "platforms",
    "kenv.experiments": "experiments", "kenv.subsystems": "subsystems",
    "kenv.trace": "trace", "kenv.trace.cli": "cli",
    "kenv.envs": "envs", "gymnasium": "envs",
    "agents": "agents", "kenv.agents": "agents",
    "kenv.cli": "cli", "kenv.__version__": "cli",
}


def layer_of(module: str) -> str | None:
    """The layer of a module name (None: a third-party or standard module, or bare ``kenv``)."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        layer = _PREFIXES.get(".".join(parts[:n]))
        if layer is not None:
            return layer
    if parts[0] == "kenv" and len(parts) > 1:
        raise AssertionError(f"module {module} is in no layer: add it to LAYERS in tests/test_layers.py")
    return None


def module_name(path: Path) -> str:
    rel = path.relative_to(KENV.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, absolute module name) of each import in ``source``, the module
    ``module``, outside ``if TYPE_CHECKING:``.  ``from X import a`` counts as
    X.a (a submodule or a name in X: the layer is the same either way)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    out: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            out.extend((node.lineno, f"{mod}.{a.name}" if a.name != "*" else mod) for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return out


def layer_violations(source: str, module: str, is_package: bool = False) -> list[str]:
    """The imports of ``module`` (given as ``source``) that break the layer order."""
    own = layer_of(module) or "cli"     # bare kenv: the package root registers the envs
    bad = []
    for line, target in imports(source, module, is_package):
        layer = layer_of(target)
        if layer is not None and LAYERS.index(layer) > LAYERS.index(own):
            bad.append(f"{module}:{line} ({own}) imports {target} ({layer})")
    return bad


def _modules() -> list[tuple[str, Path]]:
    return sorted((module_name(p), p) for p in KENV.rglob("*.py"))


def test_every_import_points_down_the_layers():
    bad = []
    for module, path in _modules():
        bad += layer_violations(path.read_text(), module, path.name == "__init__.py")
    assert not bad, "imports against the layer order (DESIGN.md Layers):\n" + "\n".join(bad)


def test_no_gymnasium_below_envs():
    below = set(LAYERS[:LAYERS.index("envs")])
    bad = []
    for module, path in _modules():
        if layer_of(module) in below:
            bad += [f"{module}:{line}" for line, t in imports(path.read_text(), module, path.name == "__init__.py")
                    if t.split(".")[0] == "gymnasium"]
    assert not bad, "gymnasium imported below kenv/envs: " + ", ".join(bad)


def test_no_env_module_imports_a_sibling_env_module():
    from kenv.envs.registration import ENVS

    env_modules = {entry.split(":")[0] for _, entry, _ in ENVS}
    # one module per env class; its versions and variants (Phased, the controls) share it
    assert len(env_modules) == len({entry for _, entry, _ in ENVS})
    bad = []
    for module in sorted(env_modules):
        path = KENV.parent / (module.replace(".", "/") + ".py")
        for line, target in imports(path.read_text(), module):
            for other in env_modules - {module}:
                if target == other or target.startswith(other + "."):
                    bad.append(f"{module}:{line} imports {target}")
    assert not bad, "an env module imports a sibling env module:\n" + "\n".join(bad)


@pytest.mark.parametrize("module, source", [
    # a kernel mechanism reaching up into the envs
    ("kenv.kernel.core", "from ..envs.base import NO_VALUE\n"),
    # inside a function counts too
    ("kenv.drivers.hwrng", "def f():\n    from ..workloads import qperf\n"),
    # an absolute import of gymnasium below envs
    ("kenv.subsystems.hwrng", "import gymnasium as gym\n"),
    ("kenv.workloads.qperf", "from kenv.platforms import get_platform\n"),
    # the trace package's CLI module is CLI, the rest of it is not
    ("kenv.trace.render", "from .cli import run_trace_env\n"),
])
def test_the_check_catches_a_wrong_import(module, source):
    assert layer_violations(source, module), (module, source)


@pytest.mark.parametrize("module, source", [
    ("kenv.kernel.core", "from .rcu import rcu_qs\nfrom ..sim.engine import Engine\n"),
    ("kenv.kernel.core", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..envs.base import KenvEnv\n"),
    ("kenv.envs.bench", "import kenv\nimport gymnasium as gym\n"),
    ("kenv.trace.cli", "from ..envs.registration import ENVS\nfrom agents.baselines import BASELINES\n"),
])
def test_the_check_allows_a_right_import(module, source):
    assert not layer_violations(source, module)


def test_nothing_imports_the_top_level_name_agents():
    """agents/ is installed as ``kenv.agents`` only (issue #32): an ``import agents``
    works from a checkout under pytest (the rootdir is on sys.path) but fails in
    an installed ``kenv`` command, and would load a second copy of each module."""
    root = KENV.parent
    bad = []
    for folder in ("kenv", "agents", "tests", "benchmarks", "examples"):
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0
                         else [])
                bad += [f"{path.relative_to(root)}:{node.lineno}: {n}" for n in names
                        if n == "agents" or n.startswith("agents.")]
    assert not bad, "import kenv.agents instead: " + "; ".join(bad)
