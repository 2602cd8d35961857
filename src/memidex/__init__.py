"""memidex: a git-native knowledge store for AI testing agents.

The library API is :class:`memidex.Memidex` (defined in :mod:`memidex.app`); the CLI is
a thin layer over it. ``import memidex`` stays light so that ``memidex --help`` and a
search start fast: the names below are imported on first use (PEP 562).
"""

from __future__ import annotations

from memidex._version import __version__

TYPE_CHECKING = False  # not `typing`'s: its import costs a warm command ~5 ms
if TYPE_CHECKING:
    from typing import Any

    from memidex.app import Memidex
    from memidex.errors import MemidexError

__all__ = ["Memidex", "MemidexError", "__version__"]

# name -> the module that defines it, imported on first access
_LAZY = {
    "Memidex": "memidex.app",
    "MemidexError": "memidex.errors",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memidex' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
