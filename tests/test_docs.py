"""Docs that come from code stay true: the CLI reference, tables, exit codes."""

from __future__ import annotations

import importlib.util
import re
from typing import Any

from conftest import REPO_ROOT


def _script(name: str) -> object:
    """``scripts/<name>.py`` loaded as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / f"scripts/{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _gen() -> object:
    return _script("gen_cli_docs")


def test_cli_reference_is_current() -> None:
    gen = _gen()
    expected = gen.render()  # type: ignore[attr-defined]
    actual = (REPO_ROOT / "docs/cli.md").read_text(encoding="utf-8")
    assert actual == expected, "docs/cli.md is stale: run `make docs`"


def test_every_command_is_in_the_reference() -> None:
    gen = _gen()
    text = (REPO_ROOT / "docs/cli.md").read_text(encoding="utf-8")
    for path in gen.commands():  # type: ignore[attr-defined]
        assert f"## `{' '.join(['memidex', *path])}`" in text


def test_index_doc_lists_every_table() -> None:
    from memidex.index.schema import TABLES

    text = (REPO_ROOT / "docs/index.md").read_text(encoding="utf-8")
    for table in TABLES:
        assert f"`{table}`" in text, f"docs/index.md does not describe table {table}"


def test_exit_codes_doc_matches_the_error_tree() -> None:
    import memidex.errors as errors

    text = (REPO_ROOT / "docs/exit-codes.md").read_text(encoding="utf-8")
    for name in errors.__all__:
        obj = getattr(errors, name)
        if isinstance(obj, type) and issubclass(obj, errors.MemidexError):
            row = re.search(rf"^\| `{name}` \| (\d) \|", text, re.MULTILINE)
            assert row, f"docs/exit-codes.md does not list {name}"
            assert int(row.group(1)) == obj.exit_code, name


def test_readme_leads_with_the_two_commands() -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    head = readme[:1500]
    assert "make demo" in head and "make test" in head
    ci = (REPO_ROOT / ".ci/run").read_text(encoding="utf-8")
    assert "make test" in ci


def test_architecture_diagram_is_current() -> None:
    graph: Any = _script("import_graph")
    text = (REPO_ROOT / "docs/architecture.md").read_text(encoding="utf-8")
    block = graph.render()
    assert block.startswith("```mermaid\nflowchart TD\n") and "    app --> search\n" in block
    assert graph.replace_block(text, block) == text, \
        "docs/architecture.md is stale: run `make docs`"
    assert text.count("```mermaid") == 1
