"""``memidex mcp`` read by a TypeScript-SDK client (``@modelcontextprotocol/sdk``, the SDK
the MCP Inspector and many hosts are built on): every tool error reaches it as a tool
error with memidex's message — not as "Structured content does not match the tool's
output schema" (issue 19, item 24).

The client is ``tests/mcp_ts/client.mjs``; its package is pinned by
``tests/mcp_ts/package-lock.json`` and installed with ``npm ci`` when ``node_modules`` is
missing. Without node or npm the test fails, saying so.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO_ROOT, make_record, run_cli, write_record

CLIENT = REPO_ROOT / "tests/mcp_ts"


def _client_installed() -> None:
    """``npm ci`` in tests/mcp_ts/ once (a lock keeps parallel workers from racing)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail("node and npm are needed for the TypeScript MCP client test "
                    "(apt-get install nodejs npm)")
    with open(CLIENT / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (CLIENT / "node_modules/@modelcontextprotocol/sdk/package.json").is_file():
            out = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=CLIENT,
                                 capture_output=True, text=True, check=False, timeout=600)
            if out.returncode != 0:
                pytest.fail(f"npm ci in {CLIENT} failed:\n{out.stderr[-2000:]}")


def _ts_calls(root: Path, calls: list[dict[str, Any]]) -> dict[str, Any]:
    _client_installed()
    out = subprocess.run(["node", str(CLIENT / "client.mjs"), sys.executable, str(root)],
                         input=json.dumps(calls), capture_output=True, text=True,
                         check=False, timeout=300, cwd=root)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


ERRORS: list[tuple[str, dict[str, Any], str]] = [
    # (tool, arguments, the error code memidex answers)
    ("knowledge_show", {"id": "fact-no-such-record"}, "NotFoundError"),
    ("knowledge_show", {"id": "fact-"}, "AmbiguousIdError"),
    ("knowledge_search", {"query": "x", "anchors": ["bad"]}, "UsageError"),
    ("knowledge_search", {"query": 3}, "UsageError"),  # breaks the input schema
    ("knowledge_list", {"anchors": ["bad"]}, "UsageError"),
    ("knowledge_list", {"kinds": ["nope"]}, "UsageError"),
    ("brief", {"test_id": "t", "anchors": ["bad"]}, "UsageError"),
    ("brief", {"test_id": "t", "at": 99}, "UsageError"),
    ("knowledge_diff", {"tag": "no-such-build"}, "UsageError"),
    ("runs_show", {"run_id": "../../x"}, "UsageError"),
    ("runs_show", {"run_id": "r-none"}, "NotFoundError"),
    ("runs_ingest", {"path": "../outside.json"}, "UnsafePathError"),
    ("runs_ingest", {"path": "missing.json"}, "ReportError"),
    ("knowledge_add", {"kind": "fact", "anchors": ["nocolon"], "title": "t"},
     "InvalidInputError"),
    ("knowledge_confirm", {"id": "fact-nope"}, "NotFoundError"),
    ("knowledge_quarantine", {"id": "fact-nope"}, "NotFoundError"),
    ("knowledge_release", {"id": "fact-nope"}, "NotFoundError"),
    ("knowledge_deprecate", {"id": "fact-nope"}, "NotFoundError"),
    ("knowledge_supersede", {"id": "fact-nope"}, "UsageError"),
    ("knowledge_rollback", {"run_id": "r-none"}, "NotFoundError"),
    ("knowledge_review", {"base": "no-such-revision"}, "UsageError"),
    ("proposals_show", {"id": "p-0000000000000000"}, "NotFoundError"),
    ("proposals_accept", {"id": "p-0000000000000000"}, "NotFoundError"),
    ("proposals_reject", {"id": "not-a-proposal"}, "UsageError"),
    ("notes", {"run_id": "../x"}, "UsageError"),
    ("note_add", {"run_id": "r-1", "text": "x" * 3000}, "InvalidInputError"),
]


def test_a_typescript_client_reads_every_tool_error(repo: Path) -> None:
    write_record(repo, make_record())
    write_record(repo, make_record(anchor="el:button:pay", title="Pay is disabled"))
    run_cli(repo, "knowledge", "rebuild-index", check=True)
    doc = _ts_calls(repo, [{"tool": t, "arguments": a} for t, a, _ in ERRORS]
                    + [{"tool": "knowledge_list", "arguments": {}}])
    assert {t for t, _, _ in ERRORS} <= set(doc["tools"])
    for (tool, args, code), got in zip(ERRORS, doc["calls"], strict=False):
        assert got["thrown"] is None, (tool, args, got["thrown"])  # the SDK gave it to us
        assert got["isError"] is True, (tool, args, got)
        lines, data = got["text"][0], json.loads(got["text"][1])
        assert lines.startswith("error: "), (tool, lines)
        assert data["error"]["code"] == code, (tool, args, data)
        assert lines.splitlines()[0] == f"error: {data['error']['message']}"
        assert got["structured"] is None  # never checked against a success's schema
    listed = doc["calls"][-1]  # and a success is read with its structured content
    assert listed["thrown"] is None and listed["isError"] is False
    assert listed["structured"]["count"] == 2
