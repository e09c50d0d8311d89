"""Named machines.  ``get_platform(name)`` returns a :class:`Platform`.

Each platform lives in its own module and documents every parameter's source.
"""

from __future__ import annotations

import importlib
from types import MappingProxyType

from ..errors import ConfigError
from ..schema import check_choice
from .base import Fitted, Platform

#: platform name -> module defining ``PLATFORM``
_MODULES = MappingProxyType({
    "rpi3bplus": "rpi3bplus",
    "bcm2835-kernelci": "bcm2835_kernelci",
    "x86-avx512-32": "x86_avx512_32",
    "x86-avx2": "x86_avx2",
    "x86-ib40g": "x86_ib40g",
})


def available_platforms() -> list[str]:
    out = []
    for name, mod in _MODULES.items():
        try:
            importlib.import_module(f"{__name__}.{mod}")
        except ModuleNotFoundError:
            continue
        out.append(name)
    return out


def get_platform(name: str) -> Platform:
    mod = _MODULES[check_choice(name, "platform", tuple(_MODULES), ", ".join(available_platforms()))]
    try:
        module = importlib.import_module(f"{__name__}.{mod}")
    except ModuleNotFoundError:
        raise ConfigError("platform", name, ", ".join(available_platforms())) from None
    return module.PLATFORM


__all__ = ["Fitted", "Platform", "available_platforms", "get_platform"]
