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


def _gen_api() -> object:
    import importlib.util

    from conftest import REPO_ROOT

    spec = importlib.util.spec_from_file_location("gen_api_docs",
                                                  REPO_ROOT / "scripts/gen_api_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_public_method_returns_any_or_a_dictionary() -> None:
    import typing
    from collections.abc import Mapping

    for name, _sig, ret, _doc in _gen_api().methods():  # type: ignore[attr-defined]
        assert ret is not None, f"Memidex.{name} has no return annotation"
        assert ret is not typing.Any, f"Memidex.{name} returns Any"
        origin = typing.get_origin(ret) or ret
        assert origin not in (dict, Mapping), f"Memidex.{name} returns a dictionary"


def test_every_result_type_is_exported_and_documented() -> None:
    import memidex.app
    from conftest import REPO_ROOT

    gen = _gen_api()
    doc = (REPO_ROOT / "docs/api.md").read_text(encoding="utf-8")
    assert doc == gen.render(), "docs/api.md is stale: run `make docs`"  # type: ignore[attr-defined]
    for t in gen.result_types():  # type: ignore[attr-defined]
        assert hasattr(t, "to_json") or hasattr(t, "as_dict"), t
        assert f"`{t.__module__}.{t.__name__}`" in doc
        if t.__module__.startswith("memidex.app"):
            assert t.__name__ in memidex.app.__all__, f"{t.__name__} is not in memidex.app.__all__"
