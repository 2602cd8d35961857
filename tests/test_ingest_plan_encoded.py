"""The planner's load-back check without the front-matter mapping:
:func:`memidex.records.loadback.loads_back` says a record is its own answer only when
validating the mapping ``dump_record`` writes gives that very record (and its text reads
back as it) — for valid records, and for every way of breaking or un-normalising one."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memidex.errors import RecordError
from memidex.learning.checks import encoded
from memidex.records.codec import content_hash, dump_record, front_matter_of, parse_record, recall
from memidex.records.loadback import loads_back
from memidex.records.model import Evidence, HistoryEntry, Record, Relations, Trust, Valid
from memidex.records.validate import record_from_mapping
from strategies import records, tricky_text


def reference(r: Record) -> Record | None:
    """What ``encoded`` answered before: the mapping validated (None: refused)."""
    try:
        return record_from_mapping(front_matter_of(r), r.body.strip("\n").rstrip(),
                                   path=r.relpath, front_matter="", first_line=2)
    except (RecordError, TypeError, AttributeError):
        return None


def holds(r: Record) -> None:
    if not loads_back(r):
        return
    ref = reference(r)
    assert ref is not None and ref == r, r
    text = dump_record(r)
    assert dump_record(ref) == text  # same types too: True is not written as 1
    assert parse_record(text, r.relpath) == r


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(records())
def test_a_valid_normalised_record_is_its_own_answer(record: Record) -> None:
    assert loads_back(record)
    holds(record)
    text, problem = encoded(record)
    assert problem is None
    assert recall(content_hash(text.encode("utf-8"))) == record


def _changes(r: Record, text: str) -> list[dict[str, Any]]:
    t, v = r.trust, r.valid
    ev = Evidence(run="r-1", test="t", step=1, observed=text)
    return [
        {"title": text}, {"title": text + "\nx"}, {"title": ""}, {"body": text},
        {"body": text + "  "}, {"body": "\n" + text}, {"body": text + "\x00"},
        {"anchor": text}, {"anchor": "no-colon"}, {"anchors": (text,)},
        {"anchors": (r.anchor,)}, {"anchors": ("page:/b", "page:/a")},
        {"anchors": ("page:/a", "page:/a")}, {"anchors": ["page:/a"]},
        {"id": r.id + "0"}, {"id": "Not-An-Id"}, {"kind": "bogus"}, {"status": "bogus"},
        {"status": "active", "relations": Relations(superseded_by=r.id)},
        {"status": "quarantined", "previous_status": "deprecated",
         "relations": Relations(superseded_by=r.id)},
        {"previous_status": "active"}, {"previous_status": "quarantined",
                                        "status": "quarantined"},
        {"product": "bad product"}, {"written_by": "robot"},
        {"trust": replace(t, source="elsewhere")}, {"trust": replace(t, confirmations=-1)},
        {"trust": replace(t, confirmations=True)}, {"trust": replace(t, last_confirmed=False)},
        {"trust": replace(t, contradictions=2**63)},
        {"valid": Valid(from_=5, until=3)}, {"valid": Valid(from_=-1)},
        {"valid": Valid(from_=True)}, {"valid": Valid(from_=v.from_, until=v.from_)},
        {"evidence": (ev,), "evidence_total": 0}, {"evidence_total": True},
        {"evidence": (ev, replace(ev, step=-2))}, {"evidence": (replace(ev, step=True),)},
        {"evidence": (replace(ev, extra=(("claim", text),)),), "evidence_total": 3},
        {"evidence": (replace(ev, extra=(("b", 1), ("a", 2))),)},
        {"evidence": (replace(ev, extra=(("a", 1), ("a", 2))),)},
        {"evidence": (replace(ev, extra=(("check", "x"),)),)},
        {"evidence": (replace(ev, extra=(("run", "x"),)),)},
        {"evidence": (replace(ev, extra=(("", "x"),)),)},
        {"evidence": (replace(ev, extra=(("a", 1.5),)),)},
        {"evidence": [ev]},
        {"history": (HistoryEntry(valid=Valid(0, v.from_ + 1), title=text, body=text),)},
        {"history": (HistoryEntry(valid=Valid(0, 0), title="old", body=""),)},
        {"history": (HistoryEntry(valid=Valid(0, None), title="old", body=""),)},
        {"history": (HistoryEntry(valid=Valid(0, 1), title="", body=""),)},
        {"history": (HistoryEntry(valid=Valid(0, 1), title="a", body="", status="bogus"),)},
        {"history": (HistoryEntry(valid=Valid(0, 1), title="a", body="",
                                  anchors=(r.anchor,)),)},
        {"history": (HistoryEntry(valid=Valid(0, 1), title="a", body="",
                                  trust=Trust(source="x")),)},
        {"history": (HistoryEntry(valid=Valid(2, 3), title="a", body=""),
                     HistoryEntry(valid=Valid(0, 1), title="b", body=""))},
        {"relations": Relations(cites=(text,))}, {"relations": Relations(cites=("b", "a"))},
        {"relations": Relations(supersedes=("a", "a"))},
        {"relations": Relations(superseded_by="Bad")},
        {"scope": (("page", text),)}, {"scope": (("b", 1), ("a", 2))},
        {"scope": (("a", 1), ("a", 2))}, {"scope": (("", 1),)}, {"scope": [("a", 1)]},
        {"scope": (("a", [1]),)},
    ]


@settings(max_examples=250, suppress_health_check=[HealthCheck.too_slow])
@given(records(), tricky_text(), st.data())
def test_a_broken_or_unnormalised_record_is_never_its_own_answer_wrongly(
        record: Record, text: str, data: st.DataObject) -> None:
    changes = data.draw(st.sampled_from(_changes(record, text)))
    try:
        broken = replace(record, **changes)
    except (TypeError, ValueError):
        return
    holds(broken)
    # and the id recomputed, so that only the change itself is judged
    from memidex.records.ids import record_id

    try:
        again = replace(broken, id=record_id(broken.kind, broken.anchor, broken.product,
                                             dict(broken.scope)))
    except (TypeError, ValueError, AttributeError):
        return
    holds(again)


def reference_dump(r: Record) -> str:
    """``dump_record`` as it was written: each line of ``front_matter_of``'s mapping."""
    from memidex.records.yamlfast import dump_value

    lines = ["---"]
    for key, value in front_matter_of(r).items():
        if key in ("evidence", "history"):
            lines.append(f"{key}:")
            lines += [f"  - {dump_value(item)}" for item in value]
        else:
            lines.append(f"{key}: {dump_value(value)}")
    lines.append("---")
    body = r.body.strip("\n").rstrip()
    return "\n".join(lines) + "\n" + (body + "\n" if body else "")


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(records(), tricky_text(), st.data())
def test_the_record_is_written_as_its_mapping_is(record: Record, text: str,
                                                 data: st.DataObject) -> None:
    assert dump_record(record) == reference_dump(record)
    changes = data.draw(st.sampled_from(_changes(record, text)))
    try:
        broken = replace(record, **changes)
        expected = reference_dump(broken)
    except (TypeError, ValueError):
        return
    assert dump_record(broken) == expected
