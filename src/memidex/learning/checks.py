"""The checks that hold a change back for a person (SPEC §3.6, ``docs/learning.md``).

A change the curator decided becomes a *proposal* (kept in the queue, listed by
``memidex knowledge proposals``) instead of being written when it:

* **contradicts its own anchors** — the same run both verified and failed the check
  its claim rests on (:func:`self_contradiction`);
* **rewrites a record a person wrote**, or **rewrites too much at once** — more than
  ``max_body_change`` of a template body (:func:`rewrite`), or more supersessions and
  deprecations in one run than ``max_rewrites`` (:func:`too_many_rewrites`);
* **cites a missing record** — a relation names a record that is neither on disk nor
  written by the same run (:func:`missing_citations`);
* **looks like an existing record about another anchor** — a new record whose vector is
  a near duplicate of one already known (a renamed element, the same caution again):
  the check is the caller's (``plan_run(duplicate=...)``,
  :func:`memidex.app.semantic.duplicate_check`), as it needs the embedding model.

A change whose record would not load back from its file is never written nor proposed
(:func:`unloadable`, :func:`encoded`). Pure functions: each returns the reason, or
nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from memidex.config.tables import LearningSettings
from memidex.errors import RecordError
from memidex.learning.candidates import Candidate
from memidex.learning.curator import Decision
from memidex.records.codec import (
    content_hash,
    dump_record,
    front_matter_of,
    parse_record,
    remember,
)
from memidex.records.loadback import loads_back
from memidex.records.model import Record
from memidex.records.validate import record_from_mapping

__all__ = ["changed_share", "encoded", "missing_citations", "rewrite", "self_contradiction",
           "too_many_rewrites", "unloadable"]


def self_contradiction(c: Candidate, d: Decision) -> str | None:
    if c.self_contradiction and d.record is not None:
        return ("contradicts its own anchors: the same run both verified and failed "
                f"`{c.evidence.check}` on {c.anchor}")
    return None


def changed_share(old: str, new: str) -> float:
    """How much of ``old`` a rewrite to ``new`` changes (0 .. 1)."""
    if not old:
        return 0.0
    import difflib  # only for a rewrite of an existing text

    return 1.0 - difflib.SequenceMatcher(None, old, new, autojunk=False).ratio()


def rewrite(c: Candidate, d: Decision, existing: Record | None,
            settings: LearningSettings) -> str | None:
    """A supersession of a person's record, or of too much of a template body at once."""
    if d.op != "supersede" or existing is None:
        return None
    if existing.trust.source == "human":
        return "rewrites a record a person wrote"
    if existing.written_by == "template" and d.record is not None \
            and d.record.written_by == "template" \
            and changed_share(existing.body, c.body) > settings.max_body_change:
        return f"rewrites more than {settings.max_body_change:.0%} of the body at once"
    return None


def too_many_rewrites(touched: Mapping[str, Decision],
                      settings: LearningSettings) -> dict[str, str]:
    """Every supersession and deprecation of a run that makes more than ``max_rewrites``."""
    rewrites = [rid for rid, d in touched.items() if d.op in ("supersede", "deprecate")]
    if len(rewrites) <= settings.max_rewrites:
        return {}
    return {rid: f"the run rewrites {len(rewrites)} records at once (more than "
                 f"{settings.max_rewrites})" for rid in rewrites}


def missing_citations(touched: Mapping[str, Decision],
                      exists: Callable[[str], bool]) -> dict[str, str]:
    """Changes whose relations name a record that neither exists (``exists(id)``) nor is
    written by the same run."""
    out: dict[str, str] = {}
    for rid, d in touched.items():
        if d.record is None:
            continue
        rel = d.record.relations
        for other in (*rel.cites, *rel.contradicts, *rel.supersedes,
                      *([rel.superseded_by] if rel.superseded_by else [])):
            if other not in touched and not exists(other):
                out.setdefault(rid, f"cites a missing record: {other}")
    return out


def unloadable(record: Record | None) -> str | None:
    """Why ``record`` would not load back from its file (None: it would)."""
    if record is None:
        return None
    return encoded(record)[1]


def encoded(record: Record) -> tuple[str, str | None]:
    """The canonical text of ``record`` (:func:`dump_record`) and why it would not load
    back from it (None: it would).

    The record's fields are validated as the parser validates the front matter it reads
    (:func:`record_from_mapping` over the very mapping the text's front matter holds),
    without parsing the text back: by the codec's contract — ``parse_record(
    dump_record(r)) == r`` for every valid record, a property test in
    ``tests/test_codec.py``, and this function's agreement with the round trip, one in
    ``tests/test_learning_encoded.py`` — that is the parse's answer. Only a record the
    check refuses is parsed, so its reason is the parser's own words. A record already
    valid and in the form the validator returns (:func:`loads_back`, the usual case: the
    curator builds records from validated ones) is its own answer, without the mapping
    (``tests/test_ingest_plan_encoded.py`` holds that check to this one). The index refresh
    after the ingest reads these bytes back: it takes the validated record
    (:func:`remember`)."""
    text = dump_record(record)
    if loads_back(record):  # valid, and in the form the parse returns: it is the answer
        remember(content_hash(text.encode("utf-8")), record)
        return text, None
    body = record.body.strip("\n").rstrip()
    try:
        parsed = record_from_mapping(front_matter_of(record), body, path=record.relpath,
                                     front_matter="", first_line=2)
    except RecordError:
        try:
            parsed = parse_record(text, record.relpath)
        except RecordError as exc:
            return text, exc.message
    remember(content_hash(text.encode("utf-8")), parsed)
    return text, None
