"""Errors raised at kenv's boundaries.

Every configuration or input error names the field, the value given and what
is allowed, so a user can fix the call without reading the source.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


class _Shown:
    """A value that crosses pickling as its ``repr`` (all an error's message shows of it):
    a ConfigError about an unpicklable value (a lambda, an open file) still pickles."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


#: ConfigError's "no value given": the one argument is an error to copy or a message
_COPY = object()


def _plain(value: object) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


class ConfigError(ValueError):
    """A bad configuration value: ``field`` got ``value``; ``allowed`` says what fits.

    ``argument``: the argument of the call the error is about where ``field`` names
    something inside it (a line of the YAML file it names, a profile it names), set by
    :func:`about`; otherwise the field is the argument (``platform``, ``--model``)."""

    argument: str = ""

    def __init__(self, field: "str | ConfigError", value: object = _COPY, allowed: str = ""):
        if value is _COPY:
            # One argument, as Python's exception protocol builds errors: libraries
            # re-raise an error as ``type(e)(e)`` (gymnasium's AsyncVectorEnv, a
            # worker's error) or ``type(e)(f"{e} ...")`` (gym.make, a TypeError).
            if isinstance(field, ConfigError):   # a copy
                self.argument = field.argument
                field, value, allowed = field.field, field.value, field.allowed
            else:                                # a message (its cause names the field)
                self.field, self.value, self.allowed = "", None, ""
                super().__init__(str(field))
                return
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field}: got {value!r}; allowed: {allowed}")

    def __reduce__(self):
        # Exception pickling replays ``cls(*self.args)``, one message for three
        # parameters: an error raised in a subprocess (gym's AsyncVectorEnv, a pool
        # worker) then failed to unpickle as an unrelated TypeError and hung close().
        state = {"argument": self.argument} if self.argument else None
        if not self.field:   # built from a message
            return type(self), (str(self),), state
        value = self.value if _plain(self.value) else _Shown(repr(self.value))
        return type(self), (self.field, value, self.allowed), state


class UnknownKeywordError(ConfigError, TypeError):
    """A keyword argument an env does not take.  Also a TypeError, whose message says
    ``unexpected keyword argument 'NAME'`` as Python's own does: client libraries pass
    optional keywords by convention and fall back on exactly that error (TorchRL's
    ``GymEnv`` passes ``frameskip=1`` and retries without it,
    ``torchrl/envs/libs/gym.py`` ``ACCEPTED_TYPE_ERRORS``)."""

    def __init__(self, field: "str | ConfigError", value: object = _COPY, allowed: str = ""):
        if value is _COPY and isinstance(field, ConfigError):   # a copy
            self.argument = field.argument
            field, value, allowed = field.field, field.value, field.allowed
        if value is _COPY:                                     # a message
            super().__init__(field)
            return
        super().__init__(field, value, f"{allowed} (unexpected keyword argument {field!r})")
        self.allowed = allowed   # (as given: pickling and copies rebuild the message from it)


@contextmanager
def about(argument: str) -> Iterator[None]:
    """A kenv error raised inside is about ``argument`` (a parameter of the caller, which
    is the dest of the command-line flag that gives it): ``kenv`` names that flag on the
    error's line (kenv.cli), whatever the error's field says (a path and a key inside
    the file, say).  An error already about an argument keeps it.  Only kenv's own
    error classes, which declare ``argument`` (ConfigError, kenv.files.FileError), are
    tagged; any other exception passes through unchanged."""
    try:
        yield
    except (ConfigError, OSError) as e:
        if hasattr(type(e), "argument") and not e.argument:
            e.argument = argument
        raise


class JobError(RuntimeError):
    """A job of a run failed where it ran (a Ray worker or node that died past its retries):
    the message is one line naming the job; the CLI prints it as such, without a traceback."""
