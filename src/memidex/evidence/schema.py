"""The run-evidence format: its limits, patterns and JSON Schema (SPEC §3).

The schema is built here (:func:`run_schema`) and published, byte for byte, as
``docs/run-evidence.schema.json`` (a test keeps the two equal: regenerate with
``python -m memidex.evidence.schema > docs/run-evidence.schema.json``).
"""

from __future__ import annotations

import json
from typing import Any

from memidex.records.ids import ANCHOR_RE, ID_RE, PRODUCT_RE, RUN_ID_PATTERN
from memidex.records.model import MAX_ORDINAL

__all__ = ["ANCHOR_WORDS", "ARTIFACT_PATTERN", "ATTEMPT_STATUSES", "BUILD_TAG_PATTERN", "HINTS",
           "MAX_ATTEMPTS", "MAX_MESSAGES", "MAX_RUN_BYTES", "RUN_ID_PATTERN",
           "SCOPE_KEY_PATTERN", "TEST_ID_PATTERN", "VERDICTS", "WORD_PATTERN", "run_schema",
           "schema_text"]

MAX_RUN_BYTES = 50 * 1024 * 1024
"""A run file this big or bigger is refused before it is read."""

VERDICTS: tuple[str, ...] = ("pass", "fail", "skip", "error")
HINTS: tuple[str, ...] = ("flaky", "environment", "app-bug", "test-bug", "unknown")
ATTEMPT_STATUSES: tuple[str, ...] = ("pass", "fail", "timeout", "skip", "interrupted",
                                     "error")
"""How one attempt of a test ended (a runner's retries: one attempt each)."""
MAX_ATTEMPTS = 100
MAX_MESSAGES = 20
"""How many violations the error's one-line message spells out (all are in ``.violations``)."""

BUILD_TAG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._+/-]{0,127}$"
TEST_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,199}$"
WORD_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"
SCOPE_KEY_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
ARTIFACT_PATTERN = r"^artifacts(/(?!\.\.?(/|$))[A-Za-z0-9._@+=-]{1,255})+$"
ANCHOR_WORDS = ("an anchor, type:value (a lowercase type, a colon, a value without edge "
                "spaces)")


# -- the schema -------------------------------------------------------------------------

def _str(pattern: str | None = None, *, max_len: int = 200, nullable: bool = False,
         description: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": ["string", "null"] if nullable else "string",
                           "maxLength": max_len}
    if pattern is not None:
        out["pattern"] = pattern
    if description is not None:
        out["description"] = description
    return out


def _count(*, nullable: bool = False, description: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": ["integer", "null"] if nullable else "integer",
                           "minimum": 0, "maximum": MAX_ORDINAL}
    if description is not None:
        out["description"] = description
    return out


def _list(items: dict[str, Any], max_items: int) -> dict[str, Any]:
    return {"type": ["array", "null"], "items": items, "maxItems": max_items}


def run_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a run file."""
    anchor = {"$ref": "#/$defs/anchor"}
    extensions = {"^x-": {"description": "extension keys, kept out of memidex's way"}}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://memidex.dev/schemas/run-evidence.schema.json",
        "title": "memidex run evidence",
        "description": "What one test run saw, step by step (docs/runs.md).",
        "type": "object",
        "required": ["run_id", "product", "tests"],
        "additionalProperties": False,
        "patternProperties": extensions,
        "properties": {
            "run_id": _str(RUN_ID_PATTERN, max_len=128, description=(
                "a run id: a letter or digit, then letters, digits, `.`, `_`, `-`")),
            "product": _str("^" + PRODUCT_RE.pattern + "$", max_len=100, description=(
                "a product name: a letter or digit, then letters, digits, `.`, `_`, `-`")),
            "build_tag": _str(BUILD_TAG_PATTERN, max_len=128, nullable=True, description=(
                "a build tag: a letter or digit, then letters, digits, `.`, `_`, `+`, "
                "`/`, `-`")),
            "ci": {"type": ["boolean", "null"]},
            "tests": {"type": "array", "items": {"$ref": "#/$defs/test"},
                      "minItems": 1, "maxItems": 100_000},
        },
        "$defs": {
            "anchor": _str("^" + ANCHOR_RE.pattern + "$", max_len=500,
                           description=ANCHOR_WORDS),
            "artifact": _str(ARTIFACT_PATTERN, max_len=1000, description=(
                "a relative path inside artifacts/ (no `..`, `.` or empty parts)")),
            "record_id": _str("^" + ID_RE.pattern + "$", description=(
                "a record id: lowercase letters, digits and `-`")),
            "text": _str(max_len=10_000, nullable=True),
            "test": {
                "type": "object",
                "required": ["test_id", "verdict"],
                "additionalProperties": False,
                "patternProperties": extensions,
                "properties": {
                    "test_id": _str(TEST_ID_PATTERN, description=(
                        "a test id: a letter or digit, then letters, digits, "
                        "`.`, `_`, `:`, `/`, `@`, `-`")),
                    "verdict": {"enum": list(VERDICTS)},
                    "title": _str(max_len=1000, nullable=True, description=(
                        "the test's own title, for people (the runner's name of it)")),
                    "project": _str(max_len=200, nullable=True, description=(
                        "the runner's project (a Playwright browser project): the same "
                        "spec in several projects is one spec")),
                    "retries": _count(nullable=True, description=(
                        "attempts before the verdict, beyond the first")),
                    "flaky": {"type": ["boolean", "null"], "description": (
                        "the runner saw the test fail, then pass on a retry")},
                    "attempts": _list({"$ref": "#/$defs/attempt"}, MAX_ATTEMPTS),
                    "duration_ms": _count(nullable=True),
                    "anchors": _list(anchor, 64),
                    "steps": _list({"$ref": "#/$defs/step"}, 10_000),
                    "failure": {"$ref": "#/$defs/failure"},
                    "artifacts": _list({"$ref": "#/$defs/artifact"}, 100),
                },
            },
            "attempt": {
                "type": "object",
                "required": ["status"],
                "additionalProperties": False,
                "properties": {
                    "status": {"enum": list(ATTEMPT_STATUSES)},
                    "error": {"$ref": "#/$defs/text"},
                    "duration_ms": _count(nullable=True),
                },
            },
            "step": {
                "type": "object",
                "required": ["index", "action"],
                "additionalProperties": False,
                "patternProperties": extensions,
                "properties": {
                    "index": _count(),
                    "action": _str(WORD_PATTERN, max_len=64, description=(
                        "an action word: lowercase letters, digits, `_`, `-`")),
                    "title": _str(max_len=1000, nullable=True, description=(
                        "the step's own words (a test.step title)")),
                    "target": _str("^" + ANCHOR_RE.pattern + "$", max_len=500,
                                   nullable=True, description=ANCHOR_WORDS),
                    "anchors": _list(anchor, 64),
                    "value": {"$ref": "#/$defs/text"},
                    "observed": {"$ref": "#/$defs/text"},
                    "check": {
                        "type": ["object", "null"],
                        "required": ["kind", "passed"],
                        "additionalProperties": False,
                        "properties": {
                            "kind": _str(WORD_PATTERN, max_len=64, description=(
                                "a check kind: lowercase letters, digits, `_`, `-`")),
                            "passed": {"type": "boolean"},
                            "expected": {"$ref": "#/$defs/text"},
                            "not_found": {"type": ["boolean", "null"], "description": (
                                "the check failed because the element was not found")},
                        },
                    },
                    "error": {"$ref": "#/$defs/text"},
                    "served_records": _list({"$ref": "#/$defs/record_id"}, 1000),
                    "scope": {
                        "type": ["object", "null"],
                        "maxProperties": 16,
                        "propertyNames": {"pattern": SCOPE_KEY_PATTERN, "maxLength": 64,
                                          "description": "a scope key (lowercase letters, "
                                                         "digits, `_`)"},
                        "additionalProperties": {
                            "type": ["string", "integer", "boolean"], "maxLength": 200,
                            "minimum": -MAX_ORDINAL - 1, "maximum": MAX_ORDINAL},
                    },
                    "artifacts": _list({"$ref": "#/$defs/artifact"}, 100),
                    "duration_ms": _count(nullable=True),
                },
            },
            "failure": {
                "type": ["object", "null"],
                "required": ["message"],
                "additionalProperties": False,
                "properties": {
                    "message": _str(max_len=10_000),
                    "hint": {"enum": [*HINTS, None]},
                    "step": _count(nullable=True, description="the index of the failing step"),
                },
            },
        },
    }


def schema_text() -> str:
    """The schema as published in ``docs/run-evidence.schema.json``."""
    return json.dumps(run_schema(), indent=2, ensure_ascii=False) + "\n"




if __name__ == "__main__":  # pragma: no cover - regenerates the published schema
    print(schema_text(), end="")
