"""A package's names exported lazily (PEP 562): each imported from its module the first
time it is asked for, so importing the package costs nothing it does not use.

``__getattr__ = exports(__name__, {"Name": "module", ...}, globals())`` in a package's
``__init__``; a module name without a dot is the package's own submodule. Type checkers
see the names through imports under ``TYPE_CHECKING``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["exports"]


def exports(package: str, homes: Mapping[str, str], namespace: dict[str, Any]
            ) -> Callable[[str], Any]:
    """The module ``__getattr__`` that imports ``homes[name]`` and returns its ``name``
    (kept in ``namespace``, so it is looked up once)."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        import importlib

        module = importlib.import_module(home if "." in home else f"{package}.{home}")
        value = getattr(module, name)
        namespace[name] = value
        return value

    return __getattr__
