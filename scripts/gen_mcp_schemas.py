"""Regenerate src/memidex/mcpserver/output_schemas.json from docs/schemas/ (`make docs`).

Each MCP tool publishes its command's ``--json`` result schema as its output schema; the
package cannot read docs/, so it carries this copy, and tests/test_mcp.py holds the two
equal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "docs/schemas"
TARGET = ROOT / "src/memidex/mcpserver/output_schemas.json"
SCHEMA = {
    "brief": "brief", "knowledge_search": "search", "knowledge_show": "show",
    "knowledge_list": "list", "knowledge_diff": "diff", "knowledge_check": "check",
    "knowledge_review": "review", "doctor": "doctor", "runs_list": "runs-list",
    "runs_show": "runs-show", "proposals_list": "proposals", "proposals_show": "proposals",
    "notes": "notes-list", "runs_ingest": "runs-ingest", "knowledge_add": "add",
    "knowledge_confirm": "confirm", "knowledge_quarantine": "quarantine",
    "knowledge_release": "release", "knowledge_deprecate": "deprecate",
    "knowledge_supersede": "supersede", "knowledge_rollback": "rollback",
    "proposals_accept": "proposals", "proposals_reject": "proposals", "note_add": "notes-add",
}
"""Each MCP tool's command schema in docs/schemas/."""
TOOLS = tuple(SCHEMA)
_ONE_OF = {"proposals_list": 0, "proposals_accept": 1, "proposals_reject": 1,
           "proposals_show": 2, "runs_ingest": 0}
"""A schema whose result is one of several shapes: the one each tool answers (the
listing, a decision or one proposal; an ingest, not its --dry-run preview)."""


def result_schema(tool: str) -> dict[str, Any]:
    name = SCHEMA[tool]
    result: dict[str, Any] = json.loads((SCHEMAS / f"{name}.schema.json").read_text(
        encoding="utf-8"))["$defs"]["result"]
    if tool in _ONE_OF:
        result = {**result["oneOf"][_ONE_OF[tool]], "not": result["not"]}
    return {**result, "type": "object"}


def main() -> None:
    data = {tool: result_schema(tool) for tool in TOOLS}
    TARGET.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
