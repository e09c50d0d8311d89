"""Files of a run or output directory: atomic writes, JSON, the directory lock.

Every file ``kenv train``, ``rediscover`` and ``discover`` write whole (models,
checkpoints, evaluations.csv, the JSON and YAML files) goes through
:func:`kenv.files.atomic_write_bytes`: a temporary ``.kenv-tmp-*`` file in the same
directory, flushed and fsynced, then ``os.replace``, so a kill never leaves a
half-written file (:func:`remove_stale_tmp` deletes the temporary files a kill left
behind, and only those: a user's own ``.tmp-*`` files under ``--out`` are not kenv's).
The files get the mode a plain ``open()`` would give (0666 less the umask), not
mkstemp's 0600.  Nothing is written through a link kenv did not make (:mod:`kenv.files`):
:class:`DirLock` (``flock`` on ``<dir>/.lock``, opened with ``O_NOFOLLOW``) keeps a
second run from writing the same directory and, once it holds the lock, refuses a
directory holding a symbolic link, FIFO or device anywhere under it.
"""

from __future__ import annotations

import io
import json
import os
from typing import Any

import numpy as np

from kenv.errors import ConfigError
from kenv.files import TMP_PREFIX, atomic_write_bytes, check_writable, open_nofollow, refuse_links  # noqa: F401


def remove_stale_tmp(root: str) -> int:
    """Delete the temporary files an interrupted atomic write left under ``root``
    (named ``TMP_PREFIX*``; nothing else)."""
    n = 0
    for dp, _, fs in os.walk(root):
        for f in fs:
            if f.startswith(TMP_PREFIX):
                try:
                    os.unlink(os.path.join(dp, f))
                    n += 1
                except OSError:
                    pass
    return n


def atomic_write_text(path: str, text: str) -> None:
    """:func:`atomic_write_bytes` of UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str, obj: Any) -> None:
    """:func:`atomic_write_bytes` of indented JSON (numpy values as plain JSON)."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=json_default) + "\n")


def json_default(o: Any):
    """``json.dumps(default=...)`` for numpy scalars and arrays (what env ``info`` holds)."""
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def read_json(path: str) -> Any | None:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def save_model_atomic(model, path: str) -> None:
    """``model.save`` to ``path`` atomically, with the names of its env's actions
    (kenv.agents.models.ACTIONS_ENTRY) when it trains on a kenv env."""
    from .models import action_names_of, with_action_names

    buf = io.BytesIO()
    model.save(buf)
    names = action_names_of(model)
    atomic_write_bytes(path, buf.getvalue() if names is None else with_action_names(buf.getvalue(), names))


def env_slug(env_id: str) -> str:
    return env_id.replace("/", "_")



def make_out_dir(path: str, flag: str = "--out") -> None:
    """Create the output directory, or a ConfigError naming ``flag`` (a file, under a file, unwritable)."""
    if os.path.lexists(path) and not os.path.isdir(path):
        raise ConfigError(flag, path, "a directory (this path is a file)")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise ConfigError(flag, path, f"a directory that can be created ({e.strerror})") from None


#: the lock file of a run or output directory (flock: released when its process ends, even by SIGKILL)
LOCK_NAME = ".lock"


class DirLock:
    """An exclusive ``flock`` on ``<path>/.lock`` while a run writes ``path``: a second
    run on the same directory is refused, naming the PID that holds it."""

    def __init__(self, path: str, flag: str = "--out"):
        self.path, self.flag, self.fd = path, flag, None

    def __enter__(self) -> "DirLock":
        lock = os.path.join(self.path, LOCK_NAME)
        try:
            fd = open_nofollow(lock, os.O_RDWR | os.O_CREAT, self.flag)
        except OSError as e:
            raise ConfigError(self.flag, self.path, f"a writable directory ({e.strerror}: {lock})") from None
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock
            fcntl = None
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                try:
                    pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
                except OSError:
                    pid = "?"
                os.close(fd)
                raise ConfigError(self.flag, self.path, f"a directory no other kenv run is writing: PID {pid} "
                                  f"holds {lock} (wait for it to end, or stop it)") from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass
        self.fd = fd
        try:
            refuse_links(self.path, self.flag)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)  # releases the flock
            self.fd = None

