"""The MCP tools that write: learning from a run, curating records, deciding proposals,
rolling a run back, and a note to self. Each calls the facade as its CLI command does
(through the writer lease, or a running daemon) and answers that command's ``--json``
object (no MCP SDK here)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from memidex.errors import UnsafePathError, UsageError
from memidex.mcpserver.spec import (
    ID,
    PRODUCT,
    PROPOSAL_ID,
    RUN_ID,
    WRITES,
    ToolAnswer,
    ToolSpec,
    flag,
    integer,
    json_answer,
    s,
)
from memidex.records.vocab import KINDS

if TYPE_CHECKING:
    from memidex.app import Memidex

__all__ = ["WRITING", "run_file"]


def run_file(root: Path, given: str) -> Path:
    """The run file ``given`` names (relative to the repository root, or absolute),
    refused unless it resolves — symlinks followed — inside the repository."""
    if not given.strip() or "\x00" in given:
        raise UsageError("give the path of a run file inside the repository")
    base = root.resolve()
    target = (base / given).resolve()
    if not target.is_relative_to(base):
        raise UnsafePathError(f"run file {given[:200]!r} is outside the repository",
                              hint="copy it into the repository and give its path "
                              "relative to the repository root")
    return target


def _runs_ingest(m: Memidex, a: dict[str, Any]) -> ToolAnswer:
    path = run_file(m.config.root, a["path"])
    result = m.ingest(path, ci=a.get("ci", False), build_tag=a.get("build_tag"))
    return json_answer(result.to_json())


def _add(m: Memidex, a: dict[str, Any]) -> ToolAnswer:
    return json_answer(m.add(kind=a["kind"], product=a.get("product"),
                             anchors=a["anchors"], title=a["title"], body=a.get("body", ""),
                             scope=a.get("scope") or {}).to_json())


def _supersede(m: Memidex, a: dict[str, Any]) -> ToolAnswer:
    title, by, body = a.get("title"), a.get("by"), a.get("body")
    if title is None and by is None:
        raise UsageError("supersede needs `title` (a new version of this record) or `by` "
                         "(the id of the record that replaces it)")
    if title is not None and by is not None:
        raise UsageError("give `title` or `by`, not both",
                         hint="`title` makes a new version; `by` replaces the record by "
                         "another one")
    if body is not None and by is not None:
        raise UsageError("`body` goes with `title`, not with `by`")
    return json_answer(m.supersede(a["id"], title=title, body=body,
                                   ordinal=a.get("ordinal"), by=by).to_json())


def _decide(accept: bool) -> Any:
    def call(m: Memidex, a: dict[str, Any]) -> ToolAnswer:
        return json_answer(m.decide_proposal(a["id"], accept=accept).to_json())

    return call


_ONE = ("Same as `memidex knowledge {} ID --json`. " + WRITES).format

WRITING: tuple[ToolSpec, ...] = (
    ToolSpec(
        "runs_ingest", "Ingest a test run",
        "Learn from one test run: mask its secrets, freeze it, give it the product's next "
        "run ordinal, classify each failure and turn what it showed into record changes; "
        "a change the checks hold back becomes a proposal. The same run again changes "
        "nothing; the run's notes (`note_add`) are gone once it is ingested. Same as "
        "`memidex runs ingest PATH --json`. " + WRITES,
        {"path": s("The run file (docs/runs.md, or a Playwright JSON / JUnit XML / CTRF "
                   "report), relative to the repository root; it must be inside the "
                   "repository.", minLength=1),
         "ci": flag("A CI run: nothing it teaches is promoted."),
         "build_tag": s("The build under test (replaces the run's own).")},
        call=_runs_ingest, required=("path",), idempotent=True),
    ToolSpec(
        "knowledge_add", "Add a record",
        "Write a person's record (trust.source human, status active); the same kind, "
        "anchor, product and scope again updates that record. Same as `memidex knowledge "
        "add --json`. " + WRITES,
        {"kind": {"enum": list(KINDS), "description": "The record's kind."},
         "anchors": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                     "description": "type:value anchors; the first is the main one."},
         "title": s("One line a reviewer reads.", minLength=1),
         "body": s("The record's text."),
         "product": PRODUCT,
         "scope": {"type": "object", "additionalProperties": {"type": "string"},
                   "description": "key: value pairs, part of the record's identity."}},
        call=_add, required=("kind", "anchors", "title"), idempotent=True),
    ToolSpec(
        "knowledge_confirm", "Confirm a record",
        "Count one more confirmation of a record (a candidate becomes active). "
        + _ONE("confirm"),
        {"id": ID,
         "run_ordinal": integer("The run that confirmed it (default: the later of "
                                "valid.from and the current last_confirmed).")},
        call=lambda m, a: json_answer(m.confirm(
            a["id"], run_ordinal=a.get("run_ordinal")).to_json()), required=("id",)),
    ToolSpec(
        "knowledge_quarantine", "Quarantine a record",
        "Take a record out of service: never served again until a person releases it. "
        + _ONE("quarantine"),
        {"id": ID}, call=lambda m, a: json_answer(m.quarantine(a["id"]).to_json()),
        required=("id",), destructive=True, idempotent=True),
    ToolSpec(
        "knowledge_release", "Release a quarantined record",
        "Give a quarantined record back its previous status (superseded when it names a "
        "replacement, deprecated when its window is closed, else active). "
        + _ONE("release"),
        {"id": ID}, call=lambda m, a: json_answer(m.release(a["id"]).to_json()),
        required=("id",), idempotent=True),
    ToolSpec(
        "knowledge_deprecate", "Deprecate a record",
        "Mark a record deprecated: no longer served. " + _ONE("deprecate"),
        {"id": ID, "ordinal": integer("Close its validity window at this run ordinal.")},
        call=lambda m, a: json_answer(m.deprecate(a["id"],
                                                  ordinal=a.get("ordinal")).to_json()),
        required=("id",), destructive=True, idempotent=True),
    ToolSpec(
        "knowledge_supersede", "Supersede a record",
        "With `title`: a new version of the record from `ordinal` on (the current one "
        "moves into its history). With `by`: the record is replaced by another record "
        "(relations on both). " + _ONE("supersede"),
        {"id": ID, "title": s("The new version's title.", minLength=1),
         "body": s("The new version's text (default: empty)."),
         "by": s("The id of the record (about another subject) that replaces this one.",
                 minLength=1),
         "ordinal": integer("The run ordinal where the change takes effect.")},
        call=_supersede, required=("id",), destructive=True),
    ToolSpec(
        "knowledge_rollback", "Roll a run back",
        "Undo every record change a run's curation made, as if it had never been "
        "ingested; refused when a later run changed the same record, unless `cascade`. "
        "Same as `memidex knowledge rollback RUN_ID --json`. " + WRITES,
        {"run_id": RUN_ID,
         "cascade": flag("Also roll back the later runs that changed the same records.")},
        call=lambda m, a: json_answer(m.rollback(
            a["run_id"], cascade=a.get("cascade", False)).to_json()),
        required=("run_id",), destructive=True, idempotent=True),
    ToolSpec(
        "proposals_accept", "Accept a proposal",
        "Apply one proposal through the writer (refused when the record changed since it "
        "was proposed). Same as `memidex knowledge proposals accept ID --json`. " + WRITES,
        {"id": PROPOSAL_ID}, call=_decide(True), required=("id",), destructive=True),
    ToolSpec(
        "proposals_reject", "Reject a proposal",
        "Drop one proposal from the queue. Same as `memidex knowledge proposals reject ID "
        "--json`.",
        {"id": PROPOSAL_ID}, call=_decide(False), required=("id",), destructive=True),
    ToolSpec(
        "note_add", "Note to self",
        "Working memory: one short note (at most 2,000 characters) for run RUN_ID, kept "
        "until that run is ingested (or a week by default), masked, never turned into a "
        "record or indexed; `notes` reads them back. Same as `memidex notes add --run "
        "RUN_ID TEXT --json`. Local state: takes no writer lease.",
        {"run_id": RUN_ID, "text": s("The note.", minLength=1)},
        call=lambda m, a: json_answer(m.note_add(a["run_id"], a["text"]).to_json()),
        required=("run_id", "text")),
)
