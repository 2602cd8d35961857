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
                if name == "Exit" and _rel(path) != "cli/main.py":
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

    code = ("import sys; from memidex.cli.main import app; "
            "print(','.join(m for m in ('sqlite3','sqlite_utils','yaml','rich.console') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""
