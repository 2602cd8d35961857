"""The MCP client set-ups in docs/mcp.md (Claude Desktop, Claude Code, Cursor, VS Code)
parse, and the server each describes starts and answers (issue 25, item 1)."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import anyio

from conftest import REPO_ROOT, make_record, run_cli, write_record

DOC = REPO_ROOT / "docs/mcp.md"
MEMIDEX = Path(sys.executable).with_name("memidex")  # this venv's console script


def _section() -> str:
    text = DOC.read_text(encoding="utf-8")
    return text[text.index("## Configuring a client"):text.index("## Tools")]


def _servers() -> dict[str, dict[str, Any]]:
    """Each client's memidex entry from the section's JSON blocks, and the one
    `claude mcp add` writes (the words after `--`)."""
    out: dict[str, dict[str, Any]] = {}
    section = _section()
    for m in re.finditer(r"\*\*([^*]+)\*\*(?:(?!\*\*).)*?```json\n(.*?)```", section, re.S):
        doc = json.loads(m.group(2))
        servers = doc.get("mcpServers") or doc["servers"]
        out[m.group(1)] = servers["memidex"]
    adds = re.findall(r"```sh\n(claude mcp add .*?)\n```", section)
    assert len(adds) == 1
    words = shlex.split(adds[0].replace('"$PWD"', "/path/to/your/repo"))
    command, *args = words[words.index("--") + 1:]
    assert words[:4] == ["claude", "mcp", "add", "memidex"]
    out["claude mcp add"] = {"command": command, "args": args}
    return out


def test_every_client_snippet_parses() -> None:
    servers = _servers()
    assert {"Claude Desktop", "Claude Code", "Cursor", "VS Code", "claude mcp add"} <= \
        set(servers)
    for name, entry in servers.items():
        assert entry["command"] == "memidex", name
        args = entry["args"]
        assert args[0] == "--root" and args[2:] == ["mcp"], name
        assert entry.get("type", "stdio") == "stdio", name
    assert servers["VS Code"]["args"][1] == "${workspaceFolder}"
    assert servers["claude mcp add"] == {k: v for k, v in servers["Claude Code"].items()
                                         if k != "type"}


async def _start(entry: dict[str, Any], root: Path, cwd: Path) -> list[str]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    args = [str(root) if a in ("/path/to/your/repo", "${workspaceFolder}") else a
            for a in entry["args"]]
    params = StdioServerParameters(command=str(MEMIDEX), args=args, cwd=str(cwd))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.server_info.name == "memidex"
        tools = [t.name for t in (await session.list_tools()).tools]
        found = await session.call_tool("knowledge_search", {"query": "place order"})
        assert found.is_error is False
        assert found.structured_content is not None
        assert found.structured_content["results"][0]["title"] == "Place order is disabled"
        return tools


def test_the_server_each_snippet_describes_starts_from_anywhere(repo: Path,
                                                                tmp_path: Path) -> None:
    assert MEMIDEX.is_file(), f"{MEMIDEX}: memidex is not installed in this venv"
    write_record(repo, make_record())
    run_cli(repo, "knowledge", "rebuild-index", check=True)
    elsewhere = tmp_path / "client-folder"  # clients start servers outside the repo
    elsewhere.mkdir()
    for name, entry in _servers().items():
        tools = anyio.run(_start, entry, repo, elsewhere)
        assert "brief" in tools and "note_add" in tools, name
