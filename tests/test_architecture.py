"""Layer rules from STYLE.md, enforced on the source tree."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO_ROOT

SRC = REPO_ROOT / "src" / "memidex"


def _unmeasured_env() -> dict[str, str]:
    """The environment without coverage's subprocess hook: these tests weigh start-up,
    and coverage itself loads sqlite3 and hashlib into a measured process."""
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_PROCESS")}


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


def _memidex_imports(tree: ast.Module) -> set[str]:
    """Every memidex module a module imports, at the top or inside a function."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("memidex"))
        elif isinstance(node, ast.ImportFrom) and node.module and \
                node.module.startswith("memidex"):
            out.add(node.module)
            # `from memidex.store import fsio` names a module, not just a package
            out.update(f"{node.module}.{a.name}" for a in node.names
                       if (SRC / node.module.removeprefix("memidex").replace(".", "/").lstrip("/")
                           / f"{a.name}.py").exists())
    return out


def _unit(module: str) -> str:
    """The layer a module belongs to: its package under memidex, or the module itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "memidex"


# The layers, lowest first (STYLE.md). A module may import its own layer and any lower
# one, never a higher one and never another layer of the same rank.
RANK = {
    "errors": 0, "_version": 0,
    "lazy": 0,  # the lazy exports of a package (PEP 562): the standard library only
    "plain": -1,  # value types without dataclasses (start-up): the standard library only
    "tomlfast": -1,  # the quick reader of memidex.toml's usual TOML: the standard library only
    "fileread": -1,  # a small regular file read without blocking: the standard library only
    "records": 1, "config": 1,
    "masking": 2, "trust": 2,  # trust: pure arithmetic over records (docs/trust.md)
    "fence": 2,  # the untrusted-data fence: pure text, for briefs and model prompts
    "store": 3,
    # the warm path's socket, protocol and file watcher: the standard library (and
    # inotify_simple) only; the CLI serves its commands through it (cli/warmserve.py)
    "warm": 3.2,
    # the local servers' listening socket, loopback test and ASGI types (standard library)
    "listening": 3.3,
    "_testing": 3.5,  # the fault-injection seam: swaps a name in store.fsio, used by write
    "evidence": 3.6,  # the run-evidence format: schema, values, validation, loading
    "vectors": 3.8,  # embedding models, sparse tf-idf, hybrid ranking: pure, numpy lazily
    # the importers (runner reports -> evidence), the learning core (pure: plans), search
    # and the writer share a rank: none of them knows the others
    "importers": 4, "learning": 4, "search": 4, "write": 4,
    "runstate": 4.5,  # local run state: frozen runs, tests, ordinals, proposals, served
    "index": 5,
    "teamindex": 5.1,  # the team index on PostgreSQL: the local index's row types
    "serve": 6.2,  # briefs: rank records from the index, runs and trust
    "review": 6.5,  # git-native review and the secret scan: read records and the store
    "app": 7,
    # `memidex mcp`: MCP tools and resources over one facade; only the `mcp` command
    # imports it, and only it imports the MCP SDK
    "mcpserver": 7.2,
    # `memidex dashboard`: web pages over one facade, imported only by that command
    "dashboard": 7.2,
    # the package root re-exports `Memidex` lazily (PEP 562), so it sits above the facade;
    # a lower layer reads the version from `_version`, never from the root
    "memidex": 7.5,
    "cli": 8, "__main__": 9,
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def test_every_module_has_a_layer() -> None:
    for path, _tree in _modules():
        assert _unit(_module_name(path)) in RANK, _module_name(path)


def test_imports_point_down_only() -> None:
    for path, tree in _modules():
        me = _module_name(path)
        mine = _unit(me)
        for target in _memidex_imports(tree):
            theirs = _unit(target)
            if theirs == mine:
                continue
            assert RANK[theirs] < RANK[mine], f"{me} imports {target} (an arrow up or across)"


def test_records_import_nothing_of_memidex_but_errors_and_plain() -> None:
    for path, tree in _modules():
        me = _module_name(path)
        if _unit(me) == "records":
            for target in _memidex_imports(tree):
                assert _unit(target) in ("records", "errors", "plain"), f"{me} imports {target}"


def test_write_and_index_do_not_know_each_other() -> None:
    for path, tree in _modules():
        me = _module_name(path)
        for target in _memidex_imports(tree):
            pair = (_unit(me), _unit(target))
            assert pair not in (("write", "index"), ("write", "search"), ("index", "write"),
                                ("search", "write"), ("search", "index")), f"{me} → {target}"


def test_the_learning_core_and_its_state_never_touch_the_writer_or_the_index() -> None:
    """The run-evidence format, the importers, the pure learning core and the local run
    state know nothing of how records are written or indexed: the ingest job
    (``app/ingest.py``) composes them with the writer."""
    for path, tree in _modules():
        me = _module_name(path)
        if _unit(me) in ("evidence", "importers", "learning", "runstate"):
            for target in _memidex_imports(tree):
                assert _unit(target) not in ("write", "index", "teamindex", "search",
                                             "serve", "app"), f"{me} imports {target}"


def test_adapters_never_import_the_index() -> None:
    """The CLI, the MCP server and the dashboard parse, call the facade and render: the
    index (local or team) is the reading service's. One exception: the CLI's entry point
    and fast path start the staleness check's ``git`` calls before they import the facade,
    so that the calls and the imports overlap (``memidex.index.prefetch``;
    ``Reading.prefetch`` is the same call for a process that has the facade already)."""
    for path, tree in _modules():
        me = _module_name(path)
        if _unit(me) in ("cli", "mcpserver", "dashboard"):
            for target in _memidex_imports(tree) - {"memidex.index.prefetch"}:
                assert _unit(target) not in ("index", "teamindex"), f"{me} imports {target}"
            if "memidex.index.prefetch" in _memidex_imports(tree):
                assert me in ("memidex.cli.main", "memidex.cli.fast"), \
                    f"{me} imports memidex.index.prefetch"


def test_no_import_cycles_between_modules() -> None:
    """Counting imports inside functions too: the module graph is acyclic."""
    graph = {_module_name(p): {t for t in _memidex_imports(tree)} for p, tree in _modules()}
    # a package import (`from memidex.store import fsio`) is an edge to the submodule
    graph = {m: {t for t in ts if t in graph and t != m and not m.startswith(t + ".")}
             for m, ts in graph.items()}
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = trail[trail.index(nxt):] + [nxt] if nxt in trail else [node, nxt]
                raise AssertionError("import cycle: " + " → ".join(cycle))
            if nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_only_the_cli_imports_typer_and_rich() -> None:
    for path, tree in _modules():
        if not _rel(path).startswith("cli/"):
            roots = {name.split(".")[0] for name in _imports(tree)}
            assert not roots & {"typer", "rich", "click"}, _rel(path)


def test_only_the_mcp_server_imports_the_mcp_sdk() -> None:
    # the SDK (and its pydantic, starlette, anyio) is paid for by `memidex mcp` alone
    for path, tree in _modules():
        roots = {name.split(".")[0] for name in _imports(tree)}
        if roots & {"mcp", "mcp_types", "anyio"}:
            assert _rel(path) == "mcpserver/server.py", _rel(path)
    for path, tree in _modules():
        me = _module_name(path)
        if "memidex.mcpserver.server" in _memidex_imports(tree):
            assert me == "memidex.cli.mcpcmd", f"{me} imports the MCP server"


def test_sqlite_only_in_the_index_and_the_lease() -> None:
    allowed = ("index/", "write/authority.py", "write/lease.py", "write/status.py",
               "write/ledger.py")
    for path, tree in _modules():
        if "sqlite3" in _imports(tree) or "sqlite_utils" in _imports(tree):
            assert _rel(path).startswith(allowed), f"{_rel(path)} imports sqlite3"


def test_cli_has_no_sql() -> None:
    for path, tree in _modules():
        if _rel(path).startswith("cli/"):
            assert "sqlite3" not in _imports(tree), _rel(path)
            assert "sqlite_utils" not in _imports(tree), _rel(path)


def test_os_replace_only_in_fsio() -> None:
    for path, tree in _modules():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr in ("replace", "rename")
                    and isinstance(node.value, ast.Name) and node.value.id == "os"):
                assert _rel(path) == "store/fsio.py", f"os.{node.attr} in {_rel(path)}"


def test_exit_codes_decided_in_one_place() -> None:
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                # typer.Exit only for --version, beside the typer app
                if name == "Exit" and _rel(path) != "cli/base.py":
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
                         check=True, env=_unmeasured_env())
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
    heavy = ("typer", "click", "rich", "yaml", "sqlite_utils", "jsonschema", "detect_secrets",
             "memidex.records.yamlfast",
             "memidex.records.model", "hashlib",
             "memidex.records.validate", "memidex.cli.commands",
             # result types it does not return (each frozen dataclass costs ~0.5 ms to
             # define), the vectors' layer, the pager's and the CSV writer's modules
             "memidex.app.results", "memidex.app.semantic", "memidex.app.notes",
             "memidex.app.history", "shutil", "csv", "memidex.index.build",
             # nor dataclasses itself (~5 ms with inspect, ast, dis, tokenize): its types
             # are memidex.plain's; nor subprocess (~2 ms): git is spawned directly;
             # nor typing (~2 ms: annotations only) or tomllib (memidex.tomlfast reads
             # memidex.toml's usual forms)
             "dataclasses", "inspect", "subprocess", "typing", "tomllib")
    code = ("import sys, runpy; sys.argv = ['memidex', '--root', sys.argv[1], 'knowledge', "
            "'search', 'place order'] + sys.argv[2:]\n"
            "try:\n    runpy.run_module('memidex', run_name='__main__')\n"
            "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
            f"print('LOADED', ','.join(m for m in {heavy!r} if m in sys.modules))")
    for extra in ([], ["--json"]):
        out = subprocess.run([sys.executable, "-c", code, str(repo), *extra],
                             capture_output=True, text=True, check=True,
                             env=_unmeasured_env())
        assert "Place order is disabled" in out.stdout
        assert out.stdout.strip().endswith("LOADED"), out.stdout
    # a brief reads its test's state without the learning (run evidence, candidates)
    brief = code.replace("'knowledge', 'search', 'place order'", "'brief', 't-1'").replace(
        repr(heavy), repr(("typer", "rich", "memidex.learning.fold", "memidex.evidence",
                           "memidex.learning.candidates", "memidex.app.results",
                           # nor the record model, dataclasses, subprocess or fractions:
                           # the brief ranks index rows (~10 ms of imports)
                           "memidex.records.model", "dataclasses", "subprocess",
                           "fractions", "typing", "tomllib")))
    out = subprocess.run([sys.executable, "-c", brief, str(repo), "--no-record"],
                         capture_output=True, text=True, check=True, env=_unmeasured_env())
    assert "# Brief: test t-1" in out.stdout, out.stdout
    assert out.stdout.strip().endswith("LOADED"), out.stdout
    # a rebuild parses records, but starts without typer or rich either
    code = code.replace("'search', 'place order'", "'rebuild-index'")
    out = subprocess.run([sys.executable, "-c", code, str(repo)], capture_output=True,
                         text=True, check=True, env=_unmeasured_env())
    loaded = out.stdout.strip().rsplit("LOADED", 1)[1].strip()
    assert "indexed 1 records" in out.stdout
    assert not set(loaded.split(",")) & {"typer", "click", "rich", "memidex.cli.commands"}


def test_importing_the_package_loads_no_submodule() -> None:
    # `import memidex` is on every start-up path: the facade is exported lazily
    import subprocess
    import sys

    code = ("import sys, memidex; "
            "print(','.join(sorted(m for m in sys.modules if m.startswith('memidex.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=_unmeasured_env())
    assert out.stdout.strip() == "memidex._version"


def test_no_module_is_over_500_lines() -> None:
    """Small modules with one owner each: none over 500 lines. The one exception is the
    YAML fast path (records/yamlfast.py), a single hand-tuned state machine whose parts
    are only ever read together."""
    over = []
    for path, _tree in _modules():
        lines = path.read_text(encoding="utf-8").count("\n")
        if lines > 500 and not path.as_posix().endswith("records/yamlfast.py"):
            over.append(f"{path.name}: {lines}")
    assert not over, over


def test_the_first_search_after_an_edit_reads_it_without_the_record_model(repo: Path) -> None:
    # the refresh reads a canonical file by the rebuild's row reader: no Record, no codec,
    # no YAML reader, no build module (~20 ms of imports), and the edit is found
    import os
    import subprocess
    import sys
    import time

    from conftest import make_record, write_record

    path = write_record(repo, make_record(title="Place order is disabled"))
    old = time.time() - 60
    os.utime(path, (old, old))
    os.utime(path.parent, (old, old))
    subprocess.run([sys.executable, "-m", "memidex", "--root", str(repo), "knowledge",
                    "rebuild-index"], check=True, capture_output=True)
    path.write_text(path.read_text(encoding="utf-8").replace(
        "Place order is disabled", "Place order is greyed out"), encoding="utf-8")
    heavy = ("memidex.records.model", "memidex.records.codec", "memidex.records.yamlfast",
             "yaml", "dataclasses", "memidex.index.build",
             # nor typing (~2 ms), nor the rebuild's segment merger (threading, queue)
             "typing", "threading")
    code = ("import sys, runpy; sys.argv = ['memidex', '--root', sys.argv[1], 'knowledge', "
            "'search', 'greyed', '--json']\n"
            "try:\n    runpy.run_module('memidex', run_name='__main__')\n"
            "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
            f"print('LOADED', ','.join(m for m in {heavy!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(repo)], capture_output=True,
                         text=True, check=True, env=_unmeasured_env())
    assert "Place order is greyed out" in out.stdout, out.stdout
    assert out.stdout.strip().endswith("LOADED"), out.stdout
