"""Errors raised at kenv's boundaries.

Every configuration or input error names the field, the value given and what
is allowed, so a user can fix the call without reading the source.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A bad configuration value: ``field`` got ``value``; ``allowed`` says what fits."""

    def __init__(self, field: str, value: object, allowed: str):
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field}: got {value!r}; allowed: {allowed}")
