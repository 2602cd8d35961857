"""Every command's ``--json`` — its result and its errors — validates against the JSON
Schema published for it in docs/schemas/ (issue 10, item 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO_ROOT, run_cli

SCHEMAS = REPO_ROOT / "docs/schemas"
# git's merge-driver protocol (%O %A %B %P, exit status) is its output: no JSON; `mcp`
# speaks the MCP protocol on stdout (its tools answer the other commands' objects); `help`
# prints a command's help or a page of the docs; `dashboard` serves pages
NO_JSON = {"merge-driver", "mcp", "help", "dashboard"}


def _validate(name: str, out: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    import jsonschema

    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    doc = json.loads(out.stdout)  # one JSON object and nothing else on stdout
    jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)
    assert isinstance(doc, dict)
    return doc


def _error(name: str, out: subprocess.CompletedProcess[str], code: str) -> None:
    doc = _validate(name, out)
    error = json.loads((SCHEMAS / "error.schema.json").read_text(encoding="utf-8"))
    import jsonschema

    jsonschema.validate(doc, error, cls=jsonschema.Draft202012Validator)
    assert doc["error"]["code"] == code, doc
    assert doc["error"]["exit_code"] == out.returncode != 0
    lines = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) <= 1 and ("error:" in out.stderr or code == "UsageError"), out.stderr
    assert "Traceback" not in out.stderr


def _outside(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """memidex run where there is no repository at all."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
    return subprocess.run([sys.executable, "-m", "memidex", "--root",
                           str(tmp_path / "missing"), *args], cwd=tmp_path,
                          capture_output=True, text=True, env=env, check=False)


def _commands() -> list[list[str]]:
    import typer.main

    from memidex.cli.commands import app

    out: list[list[str]] = []

    def walk(cmd: object, path: list[str]) -> None:
        subs = getattr(cmd, "commands", None)
        if isinstance(subs, dict):
            for name, sub in subs.items():
                walk(sub, [*path, name])
        else:
            out.append(path)
            assert path[-1] in NO_JSON or "--json" in [
                o for p in cmd.params for o in p.opts], f"{path} has no --json"  # type: ignore[attr-defined]

    walk(typer.main.get_command(app), [])
    return out


def _schema_name(path: list[str]) -> str:
    """A command's schema file: its name (``runs``, ``notes``, ``models`` and ``index``
    commands: ``runs-<name>``, ``notes-<name>``, ``models-<name>``, ``index-<name>``)."""
    return "-".join(path) if path[0] in ("runs", "notes", "models", "index") else path[-1]


def test_every_command_takes_json_and_has_a_schema() -> None:
    names = {_schema_name(path) for path in _commands()} - NO_JSON
    published = {p.name.removesuffix(".schema.json") for p in SCHEMAS.glob("*.schema.json")}
    assert names <= published, f"no schema in docs/schemas/ for {names - published}"
    assert published - names == {"error"}, "a schema for a command that does not exist"
    error = json.loads((SCHEMAS / "error.schema.json").read_text(encoding="utf-8"))
    for name in names:
        schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))
        assert schema["$defs"]["error"]["properties"] == error["properties"], name


def test_json_results_match_their_schemas(repo: Path) -> None:
    def ok(name: str, *args: str) -> dict[str, Any]:
        out = run_cli(repo, *args, "--json")
        assert out.returncode == 0, out.stderr
        return _validate(name, out)

    ok("init", "init")
    ok("rebuild-index", "knowledge", "rebuild-index")
    added = ok("add", "knowledge", "add", "--kind", "fact", "--anchor", "el:button:pay",
               "--anchor", "page:/checkout", "--title", "Pay is disabled", "--body", "Pay.")
    other = ok("add", "knowledge", "add", "--kind", "fact", "--anchor", "el:button:buy",
               "--title", "Buy replaces pay")
    rid = added["id"]
    ok("doctor", "doctor")
    ok("check", "knowledge", "check")
    shown = ok("show", "knowledge", "show", rid)
    listed = ok("list", "knowledge", "list")
    found = ok("search", "knowledge", "search", "pay disabled")
    ok("confirm", "knowledge", "confirm", rid)
    ok("supersede", "knowledge", "supersede", rid, "--title", "Pay needs the terms box")
    ok("quarantine", "knowledge", "quarantine", rid)
    ok("release", "knowledge", "release", rid)
    ok("deprecate", "knowledge", "deprecate", rid)
    ok("purge", "knowledge", "purge", other["id"], "--yes")
    ok("daemon", "daemon", "--once")
    briefed = ok("brief", "brief", "checkout", "--anchor", "el:button:pay", "--explain")
    assert rid in briefed["withheld"]["deprecated"]["ids"]
    ok("brief", "brief", "checkout", "--budget", "1", "--at", "0")
    # `anchors` is one concept: every anchor, main first, in show, list and search
    row = next(r for r in listed["records"] if r["id"] == rid)
    hit = next(h for h in found["results"] if h["id"] == rid)
    assert shown["anchors"] == row["anchors"] == hit["anchors"] == [
        "el:button:pay", "page:/checkout"]
    assert shown["anchor"] == row["anchor"] == "el:button:pay"


def test_learning_and_working_memory_json_match_their_schemas(repo: Path) -> None:
    """Every key the learning commands, notes and review emit is in their (closed)
    schemas: runs ingest (and --dry-run), runs list|show|import, diff, proposals (list,
    show, accept, reject), rollback, notes add|list, review."""
    from conftest import git

    examples = REPO_ROOT / "examples"

    def ok(name: str, *args: str) -> dict[str, Any]:
        out = run_cli(repo, *args, "--json")
        assert out.returncode == 0, (args, out.stderr)
        return _validate(name, out)

    (repo / "memidex.toml").write_text('product = "shop-web"\n[learning]\nmax_rewrites = 0\n',
                                       encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "branch", "-M", "main")
    git(repo, "checkout", "-qb", "learn")
    ok("notes-add", "notes", "add", "--run", "r-0051", "the banner hides Pay")
    assert ok("notes-list", "notes", "list", "--run", "r-0051")["notes"]
    preview = ok("runs-ingest", "runs", "ingest", str(examples / "runs/r-0051.json"),
                 "--dry-run")
    assert preview["dry_run"] is True and preview["changes"]
    for n in (51, 52, 53, 58):
        ok("runs-ingest", "runs", "ingest", str(examples / f"runs/r-00{n}.json"))
    assert ok("notes-list", "notes", "list", "--run", "r-0051")["notes"] == []  # gone
    again = ok("runs-ingest", "runs", "ingest", str(examples / "runs/r-0051.json"),
               "--dry-run")
    assert again["already_ingested"] is True
    ok("runs-list", "runs", "list")
    ok("runs-show", "runs", "show", "r-0052")
    ok("diff", "knowledge", "diff", "v1.4.2")
    queue = ok("proposals", "knowledge", "proposals")["proposals"]
    assert len(queue) >= 2
    shown = ok("proposals", "knowledge", "proposals", "show", queue[0]["id"][:10])
    assert shown["id"] == queue[0]["id"] and shown["text"].startswith("---")
    ok("proposals", "knowledge", "proposals", "accept", queue[0]["id"])
    ok("proposals", "knowledge", "proposals", "reject", queue[1]["id"])
    ok("rollback", "knowledge", "rollback", "r-0058")
    ok("runs-import", "runs", "import", str(examples / "reports/playwright-report.json"))
    ok("search", "knowledge", "search", "place order", "--near", "page:/checkout")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "learned")
    assert ok("review", "knowledge", "review", "main", "HEAD")["count"] > 0


def test_rebuild_index_json_path_is_relative_like_every_other(repo: Path) -> None:
    out = json.loads(run_cli(repo, "knowledge", "rebuild-index", "--json", check=True).stdout)
    assert out["path"] == "agent-qa-knowledge/memory/index/memidex.sqlite"
    assert "errors" in out and "problems" not in out


def test_check_json_is_format_json_and_names_its_list_errors(repo: Path) -> None:
    a = run_cli(repo, "knowledge", "check", "--json")
    b = run_cli(repo, "knowledge", "check", "--format", "json")
    assert a.stdout == b.stdout and a.returncode == b.returncode == 0
    assert json.loads(a.stdout)["errors"] == []
    (repo / "agent-qa-knowledge/memory/records/fact/bad.md").write_text("---\nid: x\n---\n")
    bad = run_cli(repo, "knowledge", "check", "--json")
    assert bad.returncode == 1
    doc = _validate("check", bad)  # the report, not a second (error) object
    assert doc["errors"] and doc["errors"][0]["path"].endswith("bad.md")
    doctor = _validate("doctor", run_cli(repo, "doctor", "--json"))
    assert doctor["records"]["errors"]


@pytest.mark.parametrize(("name", "args", "code"), [
    ("init", ["init", "--product", "not a name!"], "UsageError"),
    ("search", ["knowledge", "search", "x", "--all-products", "--product", "p"], "UsageError"),
    ("search", ["knowledge", "search", "x", "--limit", "0"], "UsageError"),
    ("show", ["knowledge", "show", "nope"], "NotFoundError"),
    ("list", ["knowledge", "list", "--all-products", "-p", "x"], "UsageError"),
    ("check", ["knowledge", "check", "--format", "github"], "UsageError"),
    ("add", ["knowledge", "add", "--kind", "fact", "--anchor", "nocolon", "--title", "t"],
     "InvalidInputError"),
    ("add", ["knowledge", "add", "--kind", "fact", "--anchor", "el:a", "--title", "t",
             "--scope", "a=1", "--scope", "a=2"], "UsageError"),
    ("confirm", ["knowledge", "confirm", "nope"], "NotFoundError"),
    ("supersede", ["knowledge", "supersede", "nope"], "UsageError"),
    ("deprecate", ["knowledge", "deprecate", "nope"], "NotFoundError"),
    ("quarantine", ["knowledge", "quarantine", "nope"], "NotFoundError"),
    ("release", ["knowledge", "release", "nope"], "NotFoundError"),
    ("purge", ["knowledge", "purge", "nope"], "NotFoundError"),
    ("daemon", ["daemon", "--wait", "-1"], "UsageError"),
    ("list", ["knowledge", "list", "--bogus"], "UsageError"),
    ("brief", ["brief", "t", "--anchor", "NoType"], "UsageError"),
    ("brief", ["brief", "t", "--product", "bad product!"], "UsageError"),
    ("brief", ["brief", "t", "--at", "99"], "UsageError"),
])
def test_json_errors_match_their_schemas(repo: Path, name: str, args: list[str],
                                         code: str) -> None:
    out = run_cli(repo, *args, "--json")
    _error(name, out, code)


@pytest.mark.parametrize(("name", "args"), [
    ("doctor", ["doctor"]), ("rebuild-index", ["knowledge", "rebuild-index"]),
    ("search", ["knowledge", "search", "x"]),
])
def test_json_errors_without_a_repository(tmp_path: Path, name: str, args: list[str]) -> None:
    _error(name, _outside(tmp_path, *args, "--json"), "NotFoundError")


def test_without_json_an_error_leaves_stdout_empty(repo: Path) -> None:
    out = run_cli(repo, "knowledge", "show", "nope")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("error: ")
