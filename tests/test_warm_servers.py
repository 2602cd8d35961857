"""The warm path from the other long-lived processes (issue 21): while ``memidex mcp``
(stdio or HTTP) or ``memidex dashboard`` runs, it also answers the CLI's reading commands
over the repository's warm socket, with the bytes a one-shot run prints — and the MCP
protocol on its stdout is untouched by the commands it answers.

Real processes: the MCP server is started by the official Python SDK client, the CLI is
``python -m memidex`` with ``MEMIDEX_WARM=require`` (a command the server did not answer
fails), compared with ``MEMIDEX_WARM=0``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from conftest import git, make_record, write_record

SOCKET = ".agent-qa/warm.sock"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
    env.update(extra)
    return env


def _cli(root: Path, *args: str, warm: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memidex", *args], cwd=root,
                          capture_output=True, text=True, check=False,
                          env=_env(MEMIDEX_WARM=warm))


def _repo(repo: Path) -> None:
    for i, title in enumerate(["Place order is disabled", "Coupon field trims spaces"]):
        write_record(repo, make_record(anchor=f"el:button:b{i}", title=title,
                                       anchors=("page:/checkout",)))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "records")
    assert _cli(repo, "knowledge", "rebuild-index", warm="0").returncode == 0


def _served_warm(repo: Path, pid: int, deadline: float = 30.0) -> dict[str, Any]:
    """``doctor --json`` once the warm server of process ``pid`` answers it."""
    end = time.monotonic() + deadline
    while True:
        out = _cli(repo, "doctor", "--json", warm="require")
        if out.returncode in (0, 1):
            report: dict[str, Any] = json.loads(out.stdout)
            assert report["serving"]["path"] == "warm", report["serving"]
            assert report["serving"]["pid"] == pid, report["serving"]
            return report
        assert time.monotonic() < end, f"no warm answer: {out.stderr}"
        time.sleep(0.1)


def _same_bytes(repo: Path, *args: str) -> None:
    warm = _cli(repo, *args, warm="require")
    cold = _cli(repo, *args, warm="0")
    assert warm.returncode == 0, warm.stderr
    assert (warm.returncode, warm.stdout, warm.stderr) == \
        (cold.returncode, cold.stdout, cold.stderr), args


async def _mcp_session(repo: Path) -> None:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "memidex", "mcp"],
                                   cwd=str(repo), env=_env())
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        found = await session.call_tool("knowledge_search", {"query": "place order"})
        assert found.is_error is False
        doctor = await anyio.to_thread.run_sync(_served_warm, repo, _server_pid(repo))
        assert doctor["healthy"] is True, json.dumps(doctor)[:1500]
        await anyio.to_thread.run_sync(_same_bytes, repo, "knowledge", "search",
                                       "coupon", "--json")
        await anyio.to_thread.run_sync(_same_bytes, repo, "knowledge", "list")
        # the protocol still flows after the commands it answered on the side
        again = await session.call_tool("knowledge_search", {"query": "coupon"})
        assert again.is_error is False and again.structured_content is not None
        assert again.structured_content["results"][0]["title"] == "Coupon field trims spaces"


def _server_pid(repo: Path) -> int:
    """The pid of the process holding the warm socket (the MCP server the SDK started)."""
    end = time.monotonic() + 30
    sock = (repo / SOCKET).resolve()
    while time.monotonic() < end:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmd = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"memidex" in cmd and b"mcp" in cmd and sock.exists():
                return int(entry.name)
        time.sleep(0.1)
    raise AssertionError("no memidex mcp process")


def test_an_mcp_server_over_stdio_answers_the_cli_warm(repo: Path) -> None:
    _repo(repo)
    anyio.run(_mcp_session, repo)
    assert not (repo / SOCKET).exists()  # gone with the server
    assert _cli(repo, "knowledge", "search", "coupon", warm="require").returncode == 3


def _started(proc: subprocess.Popen[str], marker: str) -> str:
    assert proc.stdout is not None
    end = time.monotonic() + 30
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            break
        if marker in line:
            return line
    proc.kill()
    raise AssertionError(f"did not start: {proc.communicate()}")


def test_the_dashboard_and_an_mcp_http_server_answer_the_cli_warm(repo: Path) -> None:
    _repo(repo)
    for command in (["dashboard", "--port", "0"], ["mcp", "--transport", "http",
                                                   "--port", "0"]):
        proc = subprocess.Popen([sys.executable, "-m", "memidex", *command], cwd=repo,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=_env())
        try:
            _started(proc, "dashboard" if command[0] == "dashboard" else "http://")
            _served_warm(repo, proc.pid)
            _same_bytes(repo, "knowledge", "search", "place order", "--json")
        finally:
            proc.send_signal(signal.SIGINT if command[0] == "dashboard" else signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
        assert "memidex warm server: serving reads on" in err, err
        assert not (repo / SOCKET).exists(), command


def test_a_second_server_leaves_the_socket_to_the_first(repo: Path) -> None:
    _repo(repo)
    daemon = subprocess.Popen([sys.executable, "-m", "memidex", "daemon", "--json"], cwd=repo,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env())
    try:
        _served_warm(repo, daemon.pid)
        dash = subprocess.Popen([sys.executable, "-m", "memidex", "dashboard", "--port", "0"],
                                cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=_env())
        try:
            _started(dash, "dashboard")
            _served_warm(repo, daemon.pid)  # still the daemon's
        finally:
            dash.send_signal(signal.SIGINT)
            _, err = dash.communicate(timeout=30)
        assert "memidex warm server: not serving (another warm server" in err, err
        _served_warm(repo, daemon.pid)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.communicate(timeout=30)
