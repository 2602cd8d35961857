"""What an MCP tool is: its answer, its error, its description (input and output
schemas, annotations) and the schema pieces the tool tables share. No MCP SDK here."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memidex.app import Memidex

__all__ = ["ToolAnswer", "ToolError", "ToolSpec", "json_answer", "output_schemas"]


@dataclass(frozen=True)
class ToolAnswer:
    """A tool's result: ``data`` is the CLI's ``--json`` object; ``text`` what a client
    that reads only text content gets (the JSON, or the markdown brief)."""

    data: dict[str, Any]
    text: str


@dataclass(frozen=True)
class ToolError:
    """A tool error: the ``{"error": {code, message, hint, exit_code}}`` object and its
    ``error:`` / ``hint:`` lines. The server sends both as text content of an
    ``isError`` result and never as ``structuredContent`` (which a client validates
    against the tool's output schema, the schema of a success)."""

    data: dict[str, Any]
    text: str


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its name, description, input schema (JSON Schema 2020-12), output
    schema, annotations and the facade call behind it."""

    name: str
    title: str
    description: str
    properties: dict[str, Any]
    call: Callable[[Memidex, dict[str, Any]], ToolAnswer]
    required: tuple[str, ...] = ()
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    annotations: dict[str, bool] = field(init=False)

    def __post_init__(self) -> None:
        hints = {"readOnlyHint": self.read_only, "openWorldHint": False}
        if not self.read_only:  # meaningful only for a tool that writes
            hints.update(destructiveHint=self.destructive, idempotentHint=self.idempotent)
        object.__setattr__(self, "annotations", hints)

    @property
    def input_schema(self) -> dict[str, Any]:
        return {"type": "object", "properties": self.properties,
                "required": list(self.required), "additionalProperties": False}

    @property
    def output_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = output_schemas()[self.name]
        return schema


@cache
def output_schemas() -> dict[str, Any]:
    """Each tool's output schema: its command's result in ``docs/schemas/`` (packaged)."""
    data: dict[str, Any] = json.loads(
        (Path(__file__).with_name("output_schemas.json")).read_text(encoding="utf-8"))
    return data


def json_answer(data: dict[str, Any]) -> ToolAnswer:
    return ToolAnswer(data, json.dumps(data, ensure_ascii=False, indent=2))


# --- input schema pieces --------------------------------------------------------------

def s(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def strings(description: str, **items: Any) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string", **items},
            "description": description}


def integer(description: str, minimum: int = 0, **extra: Any) -> dict[str, Any]:
    return {"type": "integer", "minimum": minimum, "description": description, **extra}


def flag(description: str, default: bool = False) -> dict[str, Any]:
    return {"type": "boolean", "default": default, "description": description}


PRODUCT = s("The product to scope to (default: `product` in memidex.toml).")
ALL_PRODUCTS = flag("Every product instead of one (explicitly unscoped).")
ANCHORS = strings("Only records with one of these anchors (type:value; a trailing * "
                  "matches a prefix).")
ID = s("A record id, or a unique prefix of one.", minLength=1)
PROPOSAL_ID = s("A proposal id (p-…), or a unique prefix of one, as `proposals_list` "
                "lists it.", minLength=1)
RUN_ID = s("A run id, as in the run evidence (e.g. r-0051).", minLength=1)
WRITES = ("Writes through the writer lease, or hands the change to a running `memidex "
          "daemon` through its inbox and waits for it.")
