"""``memidex mcp --transport http`` (docs/mcp.md, "Over HTTP"): a real server in
a subprocess, driven by the official MCP SDK's streamable HTTP client (and the TypeScript
SDK's), reading a team index on a real PostgreSQL.

Two HTTP clients at once get the answers a stdio client gets, with the same tool
schemas; off loopback a token is required (exit 2 without one); a wrong token is a 401,
a client past its limit a 429 with Retry-After; the write tools are not listed without
``--allow-writes``, and with it the server holds the writer lease (a second writer is
refused; a CLI write goes through the server's daemon); SIGTERM stops it cleanly.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import REPO_ROOT, git
from memidex.teamindex import push

TOKEN = "a-team-token-of-32-characters-xx"
RECORDS = "agent-qa-knowledge/memory/records"
READ_ONLY = {"brief", "knowledge_search", "knowledge_show", "knowledge_list",
             "knowledge_diff", "knowledge_check", "knowledge_review", "doctor", "runs_list",
             "runs_show", "proposals_list", "proposals_show", "notes"}


def _env(url: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
    if url is not None:
        env["MEMIDEX_INDEX_URL"] = url
    return env


class Server:
    """``memidex mcp --transport http --port 0 ARGS`` in a subprocess; its address is
    read from the first line it prints."""

    def __init__(self, root: Path, *args: str, url: str | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memidex", "--root", str(root), "mcp", "--transport",
             "http", "--port", "0", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=_env(url), cwd=root)
        self.lines: list[str] = []
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready.wait(60) or not self.lines:
            self.proc.kill()
            raise AssertionError(f"the server did not start: {self._finish()}")
        first = self.lines[0]
        assert first.startswith("memidex mcp: http://"), self.lines
        self.url = first.split(": ", 1)[1].strip()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("  SIGTERM"):
                self._ready.set()
        self._ready.set()

    def _finish(self) -> str:
        """What the (stopped) server printed on stderr; its pipes closed."""
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.wait(20)
        err = self.proc.stderr.read()
        self._reader.join(10)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return err

    def stop(self) -> str:
        """SIGTERM; the exit status must be 0 (atexit runs: coverage is saved)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("the server did not stop on SIGTERM") from None
        err = self._finish()
        assert self.proc.returncode == 0, err
        assert "Traceback" not in err, err
        return err


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """The example knowledge committed on main, with its local index built."""
    root = tmp_path / "shop"
    root.mkdir()
    for name in (RECORDS, "policies"):
        shutil.copytree(REPO_ROOT / name, root / name)
    shutil.copy(REPO_ROOT / "memidex.toml", root / "memidex.toml")
    (root / ".gitignore").write_text(".agent-qa/\nagent-qa-knowledge/memory/index/\n"
                                     "agent-qa-knowledge/memory/queue/\n", encoding="utf-8")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "examples")
    return root


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("knowledge_search", {"query": "place order disabled"}),
    ("knowledge_search", {"query": "cookie banner", "all_products": True, "limit": 3}),
    ("knowledge_show", {"id": "fact-el-button-place-order-b9ec"}),
    ("knowledge_list", {"kinds": ["caution"]}),
    ("brief", {"test_id": "checkout-happy-path", "anchors": ["page:/checkout"],
               "record": False}),
]


async def _client(session: Any) -> dict[str, Any]:
    init = await session.initialize()
    listed = (await session.list_tools()).tools
    answers = []
    for tool, args in CALLS:
        res = await session.call_tool(tool, args)
        assert res.is_error is False, (tool, res.content)
        answers.append(res.structured_content)
    refused = await session.call_tool("knowledge_add", {"kind": "fact", "anchors": ["el:a:b"],
                                                        "title": "t"})
    return {"instructions": init.instructions, "answers": answers,
            "tools": {t.name: (t.input_schema, t.output_schema,
                               t.annotations.model_dump() if t.annotations else None)
                      for t in listed},
            "refused": (refused.is_error, [c.text for c in refused.content])}  # type: ignore[union-attr]


async def _over_http(url: str, token: str | None, clients: int) -> list[dict[str, Any]]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    out: list[dict[str, Any]] = [{} for _ in range(clients)]

    async def one(i: int) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(headers=headers) as http, \
                streamable_http_client(url, http_client=http) as streams, \
                ClientSession(streams[0], streams[1]) as session:
            out[i] = await _client(session)

    async with anyio.create_task_group() as tasks:
        for i in range(clients):
            tasks.start_soon(one, i)
    return out


async def _over_stdio(root: Path, url: str) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "memidex", "--root", str(root), "mcp"],
                                   env=_env(url), cwd=str(root))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        return await _client(session)


def test_two_http_clients_get_the_stdio_answers_from_the_team_index(
        shop: Path, pg_url: str) -> None:
    push(shop, pg_url)
    commit = git(shop, "rev-parse", "HEAD").strip()
    server = Server(shop, "--token", TOKEN, url=pg_url)
    try:
        assert any("reads from the team index" in line for line in server.lines)
        assert any("13 tools (read-only)" in line for line in server.lines)
        first, second = anyio.run(_over_http, server.url, TOKEN, 2)
    finally:
        server.stop()
    stdio = anyio.run(_over_stdio, shop, pg_url)
    assert first["answers"] == second["answers"] == stdio["answers"]
    for answer in first["answers"]:
        assert (answer["source"], answer["commit"]) == ("team", commit)
    assert first["answers"][0]["results"] and first["answers"][4]["records"]
    # the same schemas and annotations as stdio, for the read-only tools only
    assert set(first["tools"]) == READ_ONLY
    assert first["tools"] == {name: stdio["tools"][name] for name in READ_ONLY}
    assert "knowledge_add" in stdio["tools"]
    # a write tool is refused, as a tool error, and the instructions say why
    assert first["refused"][0] is True and "read-only" in first["refused"][1][0]
    assert "This server is read-only" in first["instructions"]
    assert "read-only" not in stdio["instructions"]


def test_the_typescript_client_reads_over_http(shop: Path, pg_url: str) -> None:
    from test_mcp_ts import _client_installed

    push(shop, pg_url)
    _client_installed()
    server = Server(shop, "--token", TOKEN, url=pg_url)
    try:
        calls = [{"tool": t, "arguments": a} for t, a in CALLS]
        out = subprocess.run(["node", str(REPO_ROOT / "tests/mcp_ts/client.mjs"), "--http",
                              server.url, TOKEN], input=json.dumps(calls),
                             capture_output=True, text=True, check=False, timeout=120)
        assert out.returncode == 0, out.stderr[-3000:]
        python = anyio.run(_over_http, server.url, TOKEN, 1)[0]
    finally:
        server.stop()
    ts = json.loads(out.stdout)
    assert set(ts["tools"]) == READ_ONLY
    assert [c["thrown"] for c in ts["calls"]] == [None] * len(CALLS)
    assert [c["structured"] for c in ts["calls"]] == python["answers"]


def _post(url: str, token: str | None, host: str | None = None
          ) -> tuple[int, dict[str, str]]:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}}).encode()
    headers = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if host is not None:
        headers["Host"] = host
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read(1)
            return response.status, {k.lower(): v for k, v in response.headers.items()}
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}


def test_tokens_and_per_client_limits(shop: Path) -> None:
    other, third = "another-agents-token-0123456789", "a-third-agents-token-0123456789"
    server = Server(shop, "--token", TOKEN, "--token", other, "--token", third, "--rate",
                    "0.1")
    try:
        assert _post(server.url, TOKEN)[0] == 200
        status, headers = _post(server.url, TOKEN)  # this token's bucket is empty
        assert status == 429 and 1 <= int(headers["retry-after"]) <= 10, headers
        assert _post(server.url, other)[0] == 200  # another client: its own bucket
        # a page of another site pointing a name at 127.0.0.1 (DNS rebinding): 421
        assert _post(server.url, third, host="evil.example")[0] == 421
        status, headers = _post(server.url, None)
        assert status == 401 and headers["www-authenticate"].startswith("Bearer")
        # a wrong token counts against the address (guessing is limited too)
        assert _post(server.url, "x" * 32)[0] == 429
    finally:
        server.stop()


def test_no_token_off_loopback_is_a_usage_error(shop: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "memidex", "--root", str(shop), "mcp",
                               *args], capture_output=True, text=True, env=_env(),
                              check=False, timeout=60)

    for args, words in ((("--transport", "http", "--host", "0.0.0.0", "--port", "0"),
                         "reachable from other machines"),
                        (("--transport", "http", "--host", "0.0.0.0", "--token", "short"),
                         "at least 16 characters"),
                        (("--transport", "smoke",), "unknown --transport"),
                        (("--allow-writes",), "--allow-writes is for --transport http")):
        out = run(*args)
        assert out.returncode == 2, (args, out.stderr)
        assert out.stderr.count("error:") == 1 and words in out.stderr, out.stderr
        assert "Traceback" not in out.stderr and out.stdout == ""
    env_token = subprocess.Popen(
        [sys.executable, "-m", "memidex", "--root", str(shop), "mcp", "--transport", "http",
         "--host", "0.0.0.0", "--port", "0"], stdout=subprocess.PIPE, text=True,
        env={**_env(), "MEMIDEX_MCP_TOKEN": TOKEN}, cwd=shop)
    try:  # the token from the environment is enough
        assert env_token.stdout is not None
        assert env_token.stdout.readline().startswith("memidex mcp: http://0.0.0.0:")
    finally:
        env_token.send_signal(signal.SIGTERM)
        assert env_token.wait(20) == 0
        assert env_token.stdout is not None
        env_token.stdout.close()


async def _write(url: str) -> tuple[set[str], str, dict[str, Any]]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient() as http, \
            streamable_http_client(url, http_client=http) as streams, \
            ClientSession(streams[0], streams[1]) as session:
        init = await session.initialize()
        tools = {t.name for t in (await session.list_tools()).tools}
        added = await session.call_tool("knowledge_add", {
            "kind": "fact", "anchors": ["el:button:gift-wrap", "page:/checkout"],
            "title": "Gift wrap toggle hides the note field"})
        assert added.is_error is False, added.content
        assert added.structured_content is not None
        return tools, init.instructions or "", added.structured_content


def test_write_tools_only_with_allow_writes_holding_the_lease(shop: Path) -> None:
    server = Server(shop, "--allow-writes")
    try:
        tools, instructions, added = anyio.run(_write, server.url)
        assert READ_ONLY < tools and {"knowledge_add", "runs_ingest", "note_add"} <= tools
        assert f"holds the repository's writer lease (pid {server.proc.pid})" in instructions
        assert (shop / added["path"]).is_file() and added["change"] == "added"
        # the lease is the server's for its life: a second writer is refused at once ...
        second = subprocess.run(
            [sys.executable, "-m", "memidex", "--root", str(shop), "mcp", "--transport",
             "http", "--port", "0", "--allow-writes"], capture_output=True, text=True,
            env=_env(), check=False, timeout=60)
        assert second.returncode == 3, second.stderr
        assert second.stderr.count("error:") == 1 and str(server.proc.pid) in second.stderr
        # ... a maintenance command too; a CLI write goes through the server's daemon
        rebuild = subprocess.run([sys.executable, "-m", "memidex", "--root", str(shop),
                                  "knowledge", "rebuild-index"], capture_output=True,
                                 text=True, env=_env(), check=False, timeout=60)
        assert rebuild.returncode == 3 and str(server.proc.pid) in rebuild.stderr
        confirm = subprocess.run([sys.executable, "-m", "memidex", "--root", str(shop),
                                  "knowledge", "confirm", added["id"], "--json"],
                                 capture_output=True, text=True, env=_env(), check=False,
                                 timeout=60)
        assert confirm.returncode == 0, confirm.stderr
        assert json.loads(confirm.stdout)["change"] == "confirmed"
        doctor = json.loads(subprocess.run(
            [sys.executable, "-m", "memidex", "--root", str(shop), "doctor", "--json"],
            capture_output=True, text=True, env=_env(), check=False).stdout)
        assert doctor["lease"]["held"] is True and doctor["lease"]["pid"] == server.proc.pid
    finally:
        server.stop()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # released on SIGTERM
        doctor = json.loads(subprocess.run(
            [sys.executable, "-m", "memidex", "--root", str(shop), "doctor", "--json"],
            capture_output=True, text=True, env=_env(), check=False).stdout)
        if not doctor["lease"]["held"]:
            break
        time.sleep(0.1)
    assert doctor["lease"]["held"] is False, doctor["lease"]
    assert not (shop / "agent-qa-knowledge/memory/queue/daemon.json").exists()

