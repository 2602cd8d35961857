"""Hardening, `runs ingest` and `runs import` under attack: a FIFO, a device or a socket
is refused at once (it would block forever, or never end), from the CLI and from the MCP
server, whose one worker must go on answering; an empty or cut-off report says so in the
words `runs import` uses.

Real FIFOs and sockets, the real `memidex` command and MCP server.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import run_cli
from learnkit import error_lines, example

TIMEOUT = 120  # generous: the refusal is immediate, a block would be forever


def _memidex(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
    return subprocess.run([sys.executable, "-m", "memidex", "--root", str(root), *args],
                          cwd=root, capture_output=True, text=True, env=env,
                          timeout=TIMEOUT)


def _specials(repo: Path) -> dict[str, Path]:
    fifo = repo / "runs" / "run.fifo"
    fifo.parent.mkdir(exist_ok=True)
    os.mkfifo(fifo)
    sock_path = repo / "runs" / "run.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(sock_path))
    sock.close()
    link = repo / "runs" / "link.json"
    link.symlink_to(fifo)
    return {"fifo": fifo, "socket": sock_path, "link to a fifo": link,
            "device": Path("/dev/zero")}


@pytest.mark.parametrize("command", [("runs", "ingest"), ("runs", "ingest", "--dry-run"),
                                     ("runs", "import"),
                                     ("runs", "ingest", "--format", "evidence"),
                                     ("runs", "ingest", "--format", "junit")])
def test_ingest_and_import_refuse_what_is_not_a_regular_file(repo: Path,
                                                              command: tuple[str, ...]) -> None:
    for what, path in _specials(repo).items():
        out = _memidex(repo, *command, str(path))
        assert out.returncode == 4, (what, out.returncode, out.stderr)
        lines = error_lines(out.stderr)
        assert len(lines) == 1 and "Traceback" not in out.stderr, (what, out.stderr)
        assert path.name in lines[0] and "not a regular file" in lines[0], (what, lines)
    assert not (repo / ".agent-qa/runs").exists()  # nothing frozen, nothing counted


def test_the_mcp_server_refuses_a_fifo_and_goes_on_answering(repo: Path) -> None:
    specials = _specials(repo)
    run = repo / "runs" / "r-0051.json"
    run.write_bytes(example("r-0051").read_bytes())

    async def session() -> list[Any]:
        from mcp import ClientSession, StdioServerParameters, stdio_client

        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
        params = StdioServerParameters(command=sys.executable,
                                       args=["-m", "memidex", "--root", str(repo), "mcp"],
                                       env=env, cwd=str(repo))
        out: list[Any] = []
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), \
                    ClientSession(read, write) as s:
                await s.initialize()
                with anyio.fail_after(TIMEOUT):
                    for name in ("run.fifo", "link.json"):
                        res = await s.call_tool("runs_ingest",
                                                {"path": str(specials["fifo"].parent.name
                                                             + "/" + name)})
                        out.append(res)
                    out.append(await s.call_tool("runs_ingest", {"path": "runs/r-0051.json"}))
        return out

    fifo, link, good = anyio.run(session)
    for res in (fifo, link):
        assert res.is_error, res.content
        err = json.loads(res.content[1].text)["error"]
        assert err["code"] == "InvalidInputError" and "not a regular file" in err["message"]
    assert not good.is_error, good.content
    assert good.structured_content["run_id"] == "r-0051"


@pytest.mark.parametrize(("content", "words"), [
    (b"", "the report is empty"), (b"   \n\n", "the report is empty"),
    (b'{"run_id": "r-1", "product": "shop-web", "tests": [{"test_id": "a", ',
     "unexpected end of the file"),
    (b'<?xml version="1.0"?><testsuites><testsuite name="s"><testcase name="t">',
     "unexpected end of the file"),
    (b'{"suites": [{"title": "x", "specs": [', "unexpected end of the file"),
])
def test_an_empty_or_cut_off_report_says_so_like_runs_import(
        repo: Path, content: bytes, words: str) -> None:
    path = repo / "report.json"
    path.write_bytes(content)
    for command in (("runs", "ingest"), ("runs", "import")):
        out = run_cli(repo, *command, str(path))
        assert out.returncode == 4, (command, out.stderr)
        lines = error_lines(out.stderr)
        assert len(lines) == 1 and "Traceback" not in out.stderr, (command, out.stderr)
        assert words in lines[0] and "report.json" in lines[0], (command, lines)
