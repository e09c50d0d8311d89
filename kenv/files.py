"""Writing files without following links kenv did not make.

Output folders are often shared or reused.  A symbolic link planted at a path kenv
writes (``run/model.zip -> ~/.bashrc``) must not make kenv overwrite what it points
to, and a FIFO or device there must not make it block or write into a device.  So:

- :func:`check_writable` refuses an existing path that is not a regular file
  (``lstat``: a symbolic link is refused, never followed);
- :func:`refuse_links` refuses a folder holding any such entry, before a command
  writes into it: files other code opens by name (SB3's ``monitor.csv`` and
  ``progress.csv``, TensorBoard's event files) are then covered as well;
- :func:`atomic_write_bytes` writes through a temporary file made with ``O_EXCL``
  (which never follows a link) and checks the final path again before ``os.replace``;
- :func:`open_nofollow` opens a file kenv keeps open (the directory lock) with
  ``O_NOFOLLOW``.

Each refusal is one ConfigError line naming the path.
"""

from __future__ import annotations

import os
import stat
import tempfile
from typing import BinaryIO, Callable

from .errors import ConfigError

#: the name prefix of the temporary files of :func:`atomic_write_bytes`
TMP_PREFIX = ".kenv-tmp-"


def _refusal(field: str, path: str, mode: int) -> ConfigError:
    return ConfigError(field, path, f"a new path or a regular file (this is {_kind(mode)}, not a regular file: "
                                    "kenv does not write through a link, or into a device, FIFO or socket, "
                                    "it did not make; remove it)")


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a directory" if stat.S_ISDIR(mode) else "not a regular file"


def check_writable(path: str, field: str | None = None) -> None:
    """A ConfigError unless ``path`` is absent or a regular file (not followed)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as e:
        raise ConfigError(field or "path", path, f"a path that can be examined ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise _refusal(field or "path", path, st.st_mode)


#: what a file path given for output (``--out`` of trace, ``--record``) must be
OUT_ALLOWED = "a file path in an existing, writable directory"


def check_out_path(path: object, field: str = "out") -> str:
    """Fail before a long run if the output file ``path`` cannot be written: it must be
    absent or a regular file (a link is refused, not followed), in a writable folder."""
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise ConfigError(field, path, OUT_ALLOWED)
    p = os.fspath(path)
    if os.path.isdir(p):
        raise ConfigError(field, p, OUT_ALLOWED + " (this is a directory)")
    check_writable(p, field)
    d = os.path.dirname(os.path.abspath(p))
    if not os.path.isdir(d):
        raise ConfigError(field, p, OUT_ALLOWED + f" ({d} does not exist)")
    if not os.access(d, os.W_OK | os.X_OK):
        raise ConfigError(field, p, OUT_ALLOWED + f" ({d} is not writable)")
    if os.path.exists(p) and not os.access(p, os.W_OK):
        raise ConfigError(field, p, OUT_ALLOWED + " (the file exists and is read-only)")
    return p


def refuse_links(root: str, field: str = "--out") -> None:
    """A ConfigError naming the first entry under the folder ``root`` that is neither a
    regular file nor a directory (links are not followed)."""
    for dirpath, dirs, files in os.walk(root, followlinks=False):
        for name in sorted(dirs) + sorted(files):
            p = os.path.join(dirpath, name)
            try:
                mode = os.lstat(p).st_mode
            except FileNotFoundError:
                continue
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise _refusal(field, p, mode)


def _file_mode() -> int:
    """0666 less the process's umask (read without changing it where Linux says it)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


class FileError(OSError):
    """An OS error (a full disk, a permission) while kenv ``operation``-s ``filename``:
    the command line names both, where the OS's own error may name neither.
    ``argument``: the call's argument the path came from (kenv.errors.about)."""

    argument: str = ""

    def __init__(self, operation: str, path: str, err: OSError):
        super().__init__(err.errno, err.strerror or str(err), path)
        self.operation = operation

    def __reduce__(self):
        state = {"argument": self.argument} if self.argument else None
        return type(self), (self.operation, self.filename, OSError(self.errno, self.strerror)), state


def atomic_write(path: str, write: Callable[[BinaryIO], object], field: str | None = None) -> None:
    """Call ``write`` on a temporary file in ``path``'s directory, then ``os.replace`` it
    to ``path``: a kill never leaves a half-written file, and an existing ``path`` that is
    not a regular file is refused (:func:`check_writable`), not replaced."""
    d = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(d, exist_ok=True)
    except OSError as e:
        raise FileError("create the folder of", path, e) from None
    check_writable(path, field)
    try:
        fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=os.path.basename(path), dir=d)
    except OSError as e:
        raise FileError("write", path, e) from None
    try:
        os.fchmod(fd, _file_mode())
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        check_writable(path, field)   # (again: a link planted while the file was written)
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) and not isinstance(e, FileError):
            raise FileError("write", path, e) from None
        raise


def atomic_write_bytes(path: str, data: bytes, field: str | None = None) -> None:
    """:func:`atomic_write` of ``data``."""
    atomic_write(path, lambda f: f.write(data), field)


def open_nofollow(path: str, flags: int, field: str | None = None, mode: int = 0o644) -> int:
    """``os.open(path, flags | O_NOFOLLOW | O_CLOEXEC)`` of a regular file: a symbolic
    link, FIFO or device at ``path`` is a ConfigError naming it."""
    check_writable(path, field)
    try:
        fd = os.open(path, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
                     | getattr(os, "O_NONBLOCK", 0), mode)
    except OSError:
        check_writable(path, field)   # (a link or FIFO planted since the check: named)
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise _refusal(field or "path", path, st.st_mode)
    return fd
