"""The public API: ``memidex.__all__`` is complete, resolves, and costs nothing to import."""

from __future__ import annotations

import subprocess
import sys

import pytest

import memidex


def test_every_public_name_resolves() -> None:
    for name in memidex.__all__:
        assert getattr(memidex, name) is not None, name
    assert sorted(memidex.__all__) == sorted(set(memidex.__all__))


def test_the_facade_is_exported() -> None:
    from memidex import Memidex
    from memidex.app import Memidex as Facade
    from memidex.errors import MemidexError

    assert Memidex is Facade
    assert memidex.MemidexError is MemidexError
    assert {"Memidex", "MemidexError", "__version__"} <= set(dir(memidex))


def test_every_lazy_export_is_public() -> None:
    # a name added to the lazy table but not to __all__ (or the reverse) is caught here
    lazy = memidex._LAZY
    assert set(memidex.__all__) == {*lazy, "__version__"}
    for name, module in lazy.items():
        assert getattr(memidex, name).__module__ == module, name


def test_an_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        memidex.nope  # noqa: B018


def test_the_export_is_lazy() -> None:
    code = ("import sys, memidex; before = 'memidex.app' in sys.modules; "
            "from memidex import Memidex; print(before, 'memidex.app' in sys.modules, "
            "Memidex.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["False", "True", "memidex.app"]
