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
TOOLS = ("brief", "search", "show", "list", "runs_ingest", "diff", "confirm", "quarantine",
         "proposals", "proposals_accept", "proposals_reject")


def result_schema(tool: str) -> dict[str, Any]:
    name = {"runs_ingest": "runs-ingest", "proposals_accept": "proposals",
            "proposals_reject": "proposals"}.get(tool, tool)
    result: dict[str, Any] = json.loads((SCHEMAS / f"{name}.schema.json").read_text(
        encoding="utf-8"))["$defs"]["result"]
    if name == "proposals":  # one schema for the listing, one for a decision
        result = {**result["oneOf"][0 if tool == "proposals" else 1], "not": result["not"]}
    return {**result, "type": "object"}


def main() -> None:
    data = {tool: result_schema(tool) for tool in TOOLS}
    TARGET.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
