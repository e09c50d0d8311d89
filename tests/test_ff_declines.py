"""Fast-forward declines (kenv.fastforward.declines): every Reason is reached
by the suite's fast-forward scenarios, and docs/fast-forward.md's lists of
declines are the ones generated from the enum."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kenv.fastforward.declines import Reason, reasons_markdown

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "fast-forward.md"
#: the test files whose scenarios exercise the fast-forwards: hwrng's; qperf's
#: (the envs' scenario mixes and the cases the random search found, the
#: experiments, PREEMPT_RT's interrupt threads, the phases of the -v1/-v2 ids)
SCENARIOS = ["tests/test_hwrng_ff.py", "tests/test_ff_determinism.py", "tests/test_random.py",
             "tests/test_rt_irq.py", "tests/test_phases.py"]


@pytest.mark.slow
def test_every_decline_reason_is_reached_by_the_suites_scenarios(tmp_path):
    """Run the fast-forward scenarios with a plugin recording each reason a
    decline gives; a reason no scenario reaches is either dead code (delete
    it) or untested (add a scenario that reaches it)."""
    out = tmp_path / "reached.txt"
    env = dict(os.environ, KENV_FF_DECLINES_OUT=str(out),
               PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                          "-p", "_ff_decline_recorder", *SCENARIOS],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    reached = set(out.read_text().split())
    never = [r.name for r in Reason if r.name not in reached]
    assert not never, f"decline reasons no scenario reaches: {never}"


@pytest.mark.parametrize("ff", sorted({r.ff for r in Reason}))
def test_docs_list_the_declines_generated_from_the_enum(ff):
    """docs/fast-forward.md holds reasons_markdown(ff) between its markers;
    regenerate the list from kenv.fastforward.declines.Reason if this fails."""
    m = re.search(rf"<!-- declines:{ff} [^>]*-->\n(.*?)<!-- /declines:{ff} -->", DOC.read_text(), re.S)
    assert m, f"docs/fast-forward.md: no <!-- declines:{ff} ... --> block"
    assert m.group(1) == reasons_markdown(ff), (
        f"docs/fast-forward.md's {ff} declines differ from kenv.fastforward.declines.Reason; expected:\n"
        + reasons_markdown(ff))
