"""``memidex mcp`` driven by the MCP SDK's own client over stdio (issue 12, item 7).

Every answer is compared with the CLI's ``--json`` object for the same arguments. Writes
are compared on twin repositories: the same state copied, the server writing to one and
the CLI to the other, the answers and the resulting records equal.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import REPO_ROOT, make_record, run_cli, write_record

EXAMPLES = REPO_ROOT / "examples"
SCHEMAS = REPO_ROOT / "docs/schemas"
TOOLS = {"brief", "knowledge_search", "knowledge_show", "knowledge_list", "knowledge_diff",
         "knowledge_check", "knowledge_review", "doctor", "runs_list", "runs_show",
         "proposals_list", "proposals_show", "notes", "runs_ingest", "knowledge_add",
         "knowledge_confirm", "knowledge_quarantine", "knowledge_release",
         "knowledge_deprecate", "knowledge_supersede", "knowledge_rollback",
         "proposals_accept", "proposals_reject", "note_add"}
READ_ONLY = {"brief", "knowledge_search", "knowledge_show", "knowledge_list",
             "knowledge_diff", "knowledge_check", "knowledge_review", "doctor", "runs_list",
             "runs_show", "proposals_list", "proposals_show", "notes"}
DESTRUCTIVE = {"knowledge_quarantine", "knowledge_deprecate", "knowledge_supersede",
               "knowledge_rollback", "proposals_accept", "proposals_reject"}
SECRET = "hunter2-s3cr3t-value"


def _cli(root: Path, *args: str) -> dict[str, Any]:
    """The CLI's one JSON object (its result, or its error) for ``args --json``."""
    out = run_cli(root, *args, "--json")
    assert "Traceback" not in out.stderr, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def _docs_result(tool: str) -> dict[str, Any]:
    """The output schema a tool must publish: its command's result in docs/schemas/, as
    scripts/gen_mcp_schemas.py (`make docs`) derives it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "gen_mcp_schemas", REPO_ROOT / "scripts/gen_mcp_schemas.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result: dict[str, Any] = module.result_schema(tool)
    return result


@pytest.fixture
def repos(repo: Path, tmp_path: Path) -> tuple[Path, Path]:
    """``repo`` with three runs ingested (by the CLI), a policy, a record a person typed
    a secret into and an index; and its twin, a copy of the same state."""
    (repo / "memidex.toml").write_text('product = "shop-web"\n[learning]\nmax_rewrites = 0\n',
                                       encoding="utf-8")
    for n in (51, 52, 53):
        run_cli(repo, "runs", "ingest", str(EXAMPLES / f"runs/r-00{n}.json"), check=True)
    shutil.copy(REPO_ROOT / "policies/no-real-cards.yaml", repo / "policies")
    (repo / ".agent-qa").mkdir(exist_ok=True)
    (repo / ".agent-qa/secrets.yaml").write_text(f"db_password: {SECRET}\n", encoding="utf-8")
    write_record(repo, make_record(anchor="el:input:db-password",
                                   title=f"The password {SECRET} is typed here"))
    (repo / "runs").mkdir()
    shutil.copy(EXAMPLES / "runs/r-0058.json", repo / "runs/r-0058.json")
    run_cli(repo, "knowledge", "rebuild-index", check=True)
    twin = tmp_path / "twin"
    shutil.copytree(repo, twin, symlinks=True)
    return repo, twin


async def _session(root: Path, twin: Path, errlog: Any) -> None:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "memidex", "--root", str(root), "mcp"],
                                   env=env, cwd=str(root))
    async with stdio_client(params, errlog=errlog) as (read, write), \
            ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.server_info.name == "memidex"

        # --- the tools: schemas and annotations ------------------------------------
        listed = {t.name: t for t in (await session.list_tools()).tools}
        assert set(listed) == TOOLS
        for name, tool in listed.items():
            assert tool.input_schema["type"] == "object", name
            assert tool.input_schema["additionalProperties"] is False, name
            assert tool.output_schema == _docs_result(name), name
            ann = tool.annotations
            assert ann is not None and ann.read_only_hint is (name in READ_ONLY), name
            assert ann.open_world_hint is False
            if name not in READ_ONLY:
                assert ann.destructive_hint is (name in DESTRUCTIVE), name
        assert listed["knowledge_quarantine"].annotations.idempotent_hint is True  # type: ignore[union-attr]
        assert listed["runs_ingest"].annotations.idempotent_hint is True  # type: ignore[union-attr]
        assert listed["knowledge_confirm"].annotations.idempotent_hint is False  # type: ignore[union-attr]
        assert listed["knowledge_search"].input_schema["required"] == ["query"]

        async def call(tool: str, args: dict[str, Any], *, error: bool = False
                       ) -> dict[str, Any]:
            res = await session.call_tool(tool, args)
            assert res.is_error is error, (tool, args, res.content)
            if error:  # text only: the lines, then the JSON object; no structuredContent
                assert res.structured_content is None, (tool, res.structured_content)
                lines, obj = (c.text for c in res.content)  # type: ignore[union-attr]
                err: dict[str, Any] = json.loads(obj)
                assert lines.startswith("error: " + err["error"]["message"])
                for text in (err["error"]["message"], err["error"]["hint"] or ""):
                    # the tools' words, not the CLI's flags or files of memidex's source
                    assert not re.search(r"(?<![\w`])--[a-z]", text), (tool, text)
                    assert "docs/" not in text, (tool, text)
                return err
            data: dict[str, Any] = res.structured_content
            if tool != "brief":
                assert json.loads(res.content[0].text) == data  # type: ignore[union-attr]
            return data

        async def same(tool: str, args: dict[str, Any], *cli: str,
                       where: Path = root) -> dict[str, Any]:
            data = await call(tool, args)
            assert data == _cli(where, *cli), tool
            return data

        # --- reading: every answer equals the CLI's --json -------------------------
        listing = await same("knowledge_list", {}, "knowledge", "list")
        assert listing["count"] >= 20
        rid = next(r["id"] for r in listing["records"] if r["status"] == "active"
                   and r["kind"] == "fact" and "place-order" in r["id"])
        other = next(r["id"] for r in listing["records"] if r["status"] == "candidate")
        await same("knowledge_list", {"kinds": ["caution", "procedure"], "statuses": ["candidate"],
                            "limit": 3}, "knowledge", "list", "--kind", "caution", "--kind",
                   "procedure", "--status", "candidate", "--limit", "3")
        found = await same("knowledge_search", {"query": "place order"}, "knowledge", "search",
                           "place order")
        assert found["level"] == "lexical-only" and found["results"]
        await same("knowledge_search", {"query": "checkout", "near": ["page:/checkout*"],
                              "kinds": ["fact"], "statuses": ["any"], "limit": 5},
                   "knowledge", "search", "checkout", "--near", "page:/checkout*",
                   "--kind", "fact", "--status", "any", "--limit", "5")
        shown = await same("knowledge_show", {"id": rid}, "knowledge", "show", rid)
        await same("knowledge_show", {"id": rid[:-6]}, "knowledge", "show", rid[:-6])
        briefed = await same("brief", {"test_id": "checkout-happy-path", "record": False},
                             "brief", "checkout-happy-path", "--no-record")
        assert [p["id"] for p in briefed["policies"]] == ["no-real-cards"]
        assert briefed["records"]
        res = await session.call_tool("brief", {"test_id": "checkout-happy-path",
                                                "record": False})
        assert res.content[0].text == run_cli(  # type: ignore[union-attr]
            root, "brief", "checkout-happy-path", "--no-record").stdout  # the markdown
        await same("brief", {"test_id": "guest-checkout", "anchors": ["page:/cart"],
                             "budget": 200, "limit": 3, "explain": True, "record": False},
                   "brief", "guest-checkout", "--anchor", "page:/cart", "--budget", "200",
                   "--limit", "3", "--explain", "--no-record")
        await same("knowledge_diff", {"tag": "v1.4.2"}, "knowledge", "diff", "v1.4.2")
        assert await same("proposals_list", {}, "knowledge", "proposals") == {"proposals": []}

        # --- errors are tool errors, equal to the CLI's, and the server goes on --------
        for name, args, cli in [
            ("knowledge_show", {"id": "fact-no-such-record"}, ("knowledge", "show",
                                                     "fact-no-such-record")),
            ("knowledge_show", {"id": "fact-"}, ("knowledge", "show", "fact-")),  # ambiguous
            ("knowledge_search", {"query": "x", "near": ["not an anchor"]},
             ("knowledge", "search", "x", "--near", "not an anchor")),
            ("brief", {"test_id": "t", "product": "no product!"},
             ("brief", "t", "--product", "no product!", "--no-record")),
            ("knowledge_diff", {"tag": "no-such-build"}, ("knowledge", "diff", "no-such-build")),
            ("proposals_accept", {"id": "p-0000000000000000"},
             ("knowledge", "proposals", "accept", "p-0000000000000000")),
        ]:
            err = await call(name, args, error=True)
            want = _cli(root, *cli)["error"]
            assert err["error"]["code"] == want["code"], (name, err)
            assert err["error"]["exit_code"] == want["exit_code"], (name, err)
        bad = await call("knowledge_search", {"query": 3}, error=True)
        assert bad["error"]["code"] == "UsageError" and "query" in bad["error"]["message"]
        assert (await call("knowledge_search", {"query": "x", "typo": 1}, error=True)
                )["error"]["exit_code"] == 2
        assert (await call("no_such_tool", {}, error=True))["error"]["code"] == "UsageError"
        for outside in ("../r.json", "/etc/passwd", str(EXAMPLES / "runs/r-0058.json")):
            err = await call("runs_ingest", {"path": outside}, error=True)
            assert err["error"]["code"] == "UnsafePathError", err
        assert (await call("runs_ingest", {"path": "runs/missing.json"}, error=True)
                )["error"]["exit_code"] == 4
        assert await call("knowledge_show", {"id": rid}) == shown  # still answering
        # the first release's names are still answered (not listed)
        assert await call("show", {"id": rid}) == shown
        assert await call("search", {"query": "place order"}) == found
        assert await call("proposals", {}) == {"proposals": []}
        # a huge argument is not echoed whole (issue 19, item 29)
        huge = "x" * 1_000_000
        for tool, args in [("knowledge_show", {"id": huge}),
                           ("knowledge_search", {"query": "x", "near": [huge]}),
                           ("brief", {"test_id": huge}),
                           ("knowledge_search", {"query": huge, "limit": 0}),
                           ("knowledge_list", {"kinds": [huge]}), (huge, {})]:
            err = await call(tool, args, error=True)
            assert len(err["error"]["message"]) <= 600, (tool, len(err["error"]["message"]))
            assert len(err["error"]["hint"] or "") <= 600
        # messages in the tools' words: `budget`, not --budget
        err = await call("brief", {"test_id": "t", "product": "bad product!"}, error=True)
        assert "`product`" in (err["error"]["hint"] or ""), err

        # --- reading what runs taught, and the health reports ------------------------
        runs = await same("runs_list", {}, "runs", "list")
        assert [r["run_id"] for r in runs["runs"]] == ["r-0051", "r-0052", "r-0053"]
        await same("runs_list", {"product": "shop-web"}, "runs", "list", "--product",
                   "shop-web")
        await same("runs_show", {"run_id": "r-0052"}, "runs", "show", "r-0052")
        err = await call("runs_show", {"run_id": "r-005"}, error=True)  # ambiguous here
        assert err["error"]["code"] == "UsageError" and "ambiguous" in err["error"]["message"]
        checked = await same("knowledge_check", {}, "knowledge", "check")
        assert checked["ok"] is False  # the secret a person typed into a record
        assert any("secret" in e["reason"] for e in checked["errors"])
        doctor = await call("doctor", {})
        # `serving` (which path answered) is the CLI's alone
        assert doctor.keys() == _cli(root, "doctor").keys() - {"serving"} and \
            doctor["healthy"] is True

        # --- working memory ----------------------------------------------------------
        noted = await call("note_add", {"run_id": "r-0099", "text": f"login uses {SECRET}"})
        assert noted["count"] == 1 and SECRET not in noted["note"]["text"]
        assert "[secret:db_password]" in noted["note"]["text"]
        await call("note_add", {"run_id": "r-0099", "text": "the banner needs a second"})
        notes = await same("notes", {"run_id": "r-0099"}, "notes", "list", "--run", "r-0099")
        assert [n["text"] for n in notes["notes"]][1] == "the banner needs a second"
        err = await call("note_add", {"run_id": "r-0052", "text": "x"}, error=True)
        assert "already ingested" in err["error"]["message"]

        # --- writing: the same answers as the CLI's on the twin ----------------------
        confirmed = await same("knowledge_confirm", {"id": rid}, "knowledge", "confirm", rid,
                               where=twin)
        assert confirmed["change"] == "confirmed"
        assert (await call("knowledge_show", {"id": rid}))["trust"]["confirmations"] == \
            shown["trust"]["confirmations"] + 1  # its own write is seen at once
        await same("knowledge_confirm", {"id": other, "run_ordinal": 3}, "knowledge", "confirm",
                   other, "--run-ordinal", "3", where=twin)
        await same("knowledge_quarantine", {"id": other}, "knowledge", "quarantine", other,
                   where=twin)
        again = await same("knowledge_quarantine", {"id": other}, "knowledge", "quarantine", other,
                           where=twin)
        assert again["change"] == "unchanged"  # idempotent
        ingested = await same("runs_ingest", {"path": "runs/r-0058.json"}, "runs", "ingest",
                              str(twin / "runs/r-0058.json"), where=twin)
        assert ingested["proposals"]
        queue = await same("proposals_list", {}, "knowledge", "proposals", where=twin)
        first, second = (p["id"] for p in queue["proposals"][:2])
        await same("proposals_show", {"id": first[:9]}, "knowledge", "proposals", "show",
                   first[:9], where=twin)
        await same("proposals_show", {"id": second}, "knowledge", "proposals", "show", second,
                   where=twin)
        await same("proposals_accept", {"id": first}, "knowledge", "proposals", "accept",
                   first, where=twin)
        await same("proposals_reject", {"id": second}, "knowledge", "proposals", "reject",
                   second, where=twin)
        added = await same("knowledge_add", {
            "kind": "fact", "anchors": ["el:link:forgot-password", "page:/login"],
            "title": "Forgot password opens the reset form", "body": "It asks for an email.",
            "scope": {"aspect": "target"}}, "knowledge", "add", "--kind", "fact", "--anchor",
            "el:link:forgot-password", "--anchor", "page:/login", "--title",
            "Forgot password opens the reset form", "--body", "It asks for an email.",
            "--scope", "aspect=target", where=twin)
        new = added["id"]
        await same("knowledge_supersede", {"id": new, "title": "Forgot password opens /reset",
                                           "ordinal": 5},
                   "knowledge", "supersede", new, "--title", "Forgot password opens /reset",
                   "--ordinal", "5", where=twin)
        await same("knowledge_quarantine", {"id": new}, "knowledge", "quarantine", new,
                   where=twin)
        await same("knowledge_release", {"id": new}, "knowledge", "release", new, where=twin)
        await same("knowledge_deprecate", {"id": new, "ordinal": 7}, "knowledge", "deprecate",
                   new, "--ordinal", "7", where=twin)
        await same("knowledge_rollback", {"run_id": "r-0058"}, "knowledge", "rollback",
                   "r-0058", where=twin)
        await same("knowledge_list", {}, "knowledge", "list", where=twin)  # the same records
        await same("knowledge_list", {}, "knowledge", "list")  # the CLI sees the server's writes
        await same("brief", {"test_id": "checkout-happy-path", "record": False}, "brief",
                   "checkout-happy-path", "--no-record", where=twin)

        # --- resources ------------------------------------------------------------
        resources = {str(r.uri): r for r in (await session.list_resources()).resources}
        assert f"memidex://record/{rid}" in resources
        assert "memidex://policy/no-real-cards" in resources
        templates = (await session.list_resource_templates()).resource_templates
        assert {t.uri_template for t in templates} == {"memidex://record/{id}",
                                                       "memidex://policy/{id}"}
        secret_id = next(r["id"] for r in listing["records"] if "db-password" in r["id"])
        text = (await session.read_resource(f"memidex://record/{secret_id}")).contents[0]
        raw = run_cli(root, "knowledge", "show", secret_id, "--raw", check=True).stdout
        assert text.text == raw  # type: ignore[union-attr]
        assert SECRET not in raw and "[secret:db_password]" in raw
        policy = (await session.read_resource("memidex://policy/no-real-cards")).contents[0]
        assert json.loads(policy.text)["severity"] == "must"  # type: ignore[union-attr]
        from mcp import MCPError

        with pytest.raises(MCPError, match="no record"):
            await session.read_resource("memidex://record/fact-no-such-record")
        with pytest.raises(MCPError, match="no resource"):
            await session.read_resource("memidex://nothing/x")
        assert await call("knowledge_show", {"id": rid}) != shown  # still answering, confirmed


def test_mcp_answers_as_the_cli_does(repos: tuple[Path, Path], tmp_path: Path) -> None:
    root, twin = repos
    log = tmp_path / "server-stderr.txt"
    with log.open("w", encoding="utf-8") as errlog:
        anyio.run(_session, root, twin, errlog)
    assert "Traceback" not in log.read_text(encoding="utf-8")


def test_mcp_outside_a_repository_fails_like_any_command(tmp_path: Path) -> None:
    import subprocess

    out = subprocess.run([sys.executable, "-m", "memidex", "--root", str(tmp_path / "none"),
                          "mcp"], capture_output=True, text=True, input="", check=False,
                         cwd=tmp_path)
    assert out.returncode != 0 and out.stderr.startswith("error:"), out.stderr
    assert "Traceback" not in out.stderr


def test_the_sdk_is_imported_only_by_the_mcp_command() -> None:
    import subprocess

    code = ("import sys; from memidex.cli.commands import app; import memidex.mcpserver.tools;"
            " print(','.join(m for m in ('mcp', 'mcp_types', 'anyio', 'memidex.mcpserver.server')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""


def test_every_failure_is_a_tool_error_never_an_exception(repo: Path) -> None:
    # the error boundary itself, in process (no SDK): a facade that breaks in every way
    from memidex.errors import LeaseHeldError
    from memidex.mcpserver.tools import ToolAnswer, ToolError, run_file, run_tool

    class Broken:
        def __init__(self, exc: BaseException) -> None:
            self.exc = exc

        def show(self, _id: str) -> None:
            raise self.exc

    for exc, code, exit_code in [
        (LeaseHeldError("writer lease is held by pid 7"), "LeaseHeldError", 3),
        (OSError(5, "Input/output error", "rec.md"), "StorageError", 1),
        # a full disk is the same error over MCP as on the CLI (errors.from_os_error)
        (OSError(28, "No space left on device", "rec.md"), "NoSpaceError", 1),
        (RuntimeError("boom"), "InternalError", 1),
    ]:
        out = run_tool(Broken(exc), "show", {"id": "x"})  # type: ignore[arg-type]
        assert isinstance(out, ToolError)
        assert out.data["error"]["code"] == code and out.data["error"]["exit_code"] == exit_code
        assert out.text.startswith("error: ")
    from memidex.app import Memidex

    with Memidex(repo) as m:
        assert isinstance(run_tool(m, "proposals", None), ToolAnswer)
        assert run_file(repo, "runs/r.json") == (repo / "runs/r.json").resolve()
        (repo / "escape").symlink_to("/etc")
        out = run_tool(m, "runs_ingest", {"path": "escape/passwd"})
        assert isinstance(out, ToolError) and out.data["error"]["code"] == "UnsafePathError"
        out = run_tool(m, "runs_ingest", {"path": " "})
        assert isinstance(out, ToolError) and out.data["error"]["code"] == "UsageError"


def test_a_line_that_is_not_json_rpc_is_answered_as_json_rpc_says(repo: Path) -> None:
    import subprocess

    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}}
    lines = ["not json at all", '{"no": "jsonrpc"}', json.dumps(init), ""]
    out = subprocess.run([sys.executable, "-m", "memidex", "--root", str(repo), "mcp"],
                         input="\n".join(lines), capture_output=True, text=True, timeout=60,
                         check=False, cwd=repo)
    answers = [json.loads(line) for line in out.stdout.splitlines()]
    assert answers[0] == {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32700, "message": "Parse error: the line is not JSON"}}
    assert answers[1]["id"] is None and answers[1]["error"]["code"] == -32600
    assert answers[2]["id"] == 1 and answers[2]["result"]["serverInfo"]["name"] == "memidex"
    assert "Traceback" not in out.stderr


async def _review_session(root: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "memidex", "--root", str(root), "mcp"],
                                   cwd=str(root))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        res = await session.call_tool("knowledge_review", {"base": "main", "head": "HEAD"})
        assert res.is_error is False, res.content
        bad = await session.call_tool("knowledge_review", {"base": "nope"})
        assert bad.is_error is True
        return res.structured_content or {}, json.loads(bad.content[1].text)  # type: ignore[union-attr]


def test_the_review_tool_answers_as_the_cli_does_secrets_masked(repo: Path) -> None:
    from conftest import git

    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "branch", "-M", "main")
    git(repo, "checkout", "-qb", "pr")
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    write_record(repo, make_record(title=f"Log in with {token}"))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "pr")
    review, bad = anyio.run(_review_session, repo)
    assert review == _cli(repo, "knowledge", "review", "main", "HEAD")
    assert review["count"] == 1 and token not in json.dumps(review)
    assert bad["error"]["code"] == "UsageError"
