"""pytest plugin for tests/test_ff_declines.py: records every fast-forward
decline reason reached while the tests run and writes their names, one a
line, to the file named by $KENV_FF_DECLINES_OUT at the end of the session."""

import os

from kenv.fastforward.declines import Declines

_reached: set[str] = set()
_decline = Declines.decline


def _recording(self, reason, *result):
    _reached.add(reason.name)
    return _decline(self, reason, *result)


Declines.decline = _recording


def pytest_sessionfinish(session, exitstatus):
    with open(os.environ["KENV_FF_DECLINES_OUT"], "w") as f:
        f.write("".join(f"{name}\n" for name in sorted(_reached)))
