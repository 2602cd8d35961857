"""Layer rules from STYLE.md, enforced on the source tree."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO_ROOT

SRC = REPO_ROOT / "src" / "memidex"


def _modules() -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text(encoding="utf-8"))) for p in sorted(SRC.rglob("*.py"))]


def _imports(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def _rel(path: Path) -> str:
    return path.relative_to(SRC).as_posix()


def test_sqlite_only_in_the_index_and_the_lease() -> None:
    allowed = ("index/", "lease.py", "writer.py", "journal.py", "app.py")
    for path, tree in _modules():
        if "sqlite3" in _imports(tree):
            assert _rel(path).startswith(allowed), f"{_rel(path)} imports sqlite3"


def test_cli_and_mcp_have_no_sql_and_no_file_replacing() -> None:
    for path, tree in _modules():
        rel = _rel(path)
        if rel.startswith("cli/") or rel == "mcp_server.py":
            assert "sqlite3" not in _imports(tree), rel
            assert "sqlite_utils" not in _imports(tree), rel


def test_os_replace_only_in_the_store() -> None:
    for path, tree in _modules():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr in ("replace", "rename")
                    and isinstance(node.value, ast.Name) and node.value.id == "os"):
                assert _rel(path) == "store.py", f"os.{node.attr} in {_rel(path)}"


def test_exit_codes_decided_in_one_place() -> None:
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                # typer.Exit only for --version, beside the typer app
                if name == "Exit" and _rel(path) != "cli/commands.py":
                    raise AssertionError(f"typer.Exit in {_rel(path)}")
                if name == "exit" and isinstance(func, ast.Attribute) and \
                        getattr(func.value, "id", "") == "sys":
                    assert _rel(path) in ("cli/main.py", "__main__.py"), _rel(path)


def test_records_layer_does_no_io() -> None:
    for path, tree in _modules():
        if _rel(path).startswith("records/"):
            imports = _imports(tree)
            assert not imports & {"os", "sqlite3", "shutil", "subprocess", "pathlib"}, _rel(path)


def test_help_imports_nothing_heavy() -> None:
    import subprocess
    import sys

    code = ("import sys; from memidex.cli.commands import app; "
            "print(','.join(m for m in ('sqlite3','sqlite_utils','yaml','rich.console') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""


def test_search_imports_neither_typer_nor_rich_nor_the_record_parser(repo: Path) -> None:
    # A search's start-up is most of its cost: the fast path leaves typer and rich out,
    # and an index that is up to date needs no YAML reader or validator.
    import os
    import subprocess
    import sys
    import time

    from conftest import make_record, write_record

    path = write_record(repo, make_record(title="Place order is disabled"))
    old = time.time() - 60  # not in the racy window, where files are hashed to be sure
    os.utime(path, (old, old))
    os.utime(path.parent, (old, old))
    subprocess.run([sys.executable, "-m", "memidex", "--root", str(repo), "knowledge",
                    "rebuild-index"], check=True, capture_output=True)
    heavy = ("typer", "click", "rich", "yaml", "sqlite_utils", "memidex.records.yamlfast",
             "memidex.records.model", "hashlib",
             "memidex.records.validate", "memidex.cli.commands")
    code = ("import sys, runpy; sys.argv = ['memidex', '--root', sys.argv[1], 'knowledge', "
            "'search', 'place order'] + sys.argv[2:]\n"
            "try:\n    runpy.run_module('memidex', run_name='__main__')\n"
            "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
            f"print('LOADED', ','.join(m for m in {heavy!r} if m in sys.modules))")
    for extra in ([], ["--json"]):
        out = subprocess.run([sys.executable, "-c", code, str(repo), *extra],
                             capture_output=True, text=True, check=True)
        assert "Place order is disabled" in out.stdout
        assert out.stdout.strip().endswith("LOADED"), out.stdout
    # a rebuild parses records, but starts without typer or rich either
    code = code.replace("'search', 'place order'", "'rebuild-index'")
    out = subprocess.run([sys.executable, "-c", code, str(repo)], capture_output=True,
                         text=True, check=True)
    loaded = out.stdout.strip().rsplit("LOADED", 1)[1].strip()
    assert "indexed 1 records" in out.stdout
    assert not set(loaded.split(",")) & {"typer", "click", "rich", "memidex.cli.commands"}
