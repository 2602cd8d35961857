"""The planner's load-back check (:func:`memidex.learning.checks.encoded`) gives the round
trip's answer without parsing the text back: for every record — valid, non-canonical or
broken in any way the validator knows — the same verdict, the same reason, and the same
record remembered for the index refresh as ``parse_record(dump_record(r))``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memidex.errors import RecordError
from memidex.learning.checks import encoded, unloadable
from memidex.records.codec import content_hash, dump_record, parse_record, recall
from memidex.records.model import Evidence, HistoryEntry, Record, Relations, Trust, Valid
from strategies import records, tricky_text


def _round_trip(record: Record) -> tuple[Record | None, str | None]:
    """The reference: the record's text parsed back, or why it is refused."""
    try:
        return parse_record(dump_record(record), record.relpath), None
    except RecordError as exc:
        return None, exc.message


def _agrees(record: Record) -> None:
    text, problem = encoded(record)
    assert text == dump_record(record)
    parsed, reason = _round_trip(record)
    assert problem == reason
    assert unloadable(record) == reason
    if reason is None:
        assert recall(content_hash(text.encode("utf-8"))) == parsed


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(records())
def test_a_valid_record_loads_back_as_itself(record: Record) -> None:
    text, problem = encoded(record)
    assert problem is None
    assert recall(content_hash(text.encode("utf-8"))) == record
    _agrees(record)


def _mutations(r: Record, text: str) -> list[dict[str, Any]]:
    """Field changes that break (or only un-canonicalise) a record in every way the
    validator knows; ``text`` is arbitrary text to put where a string goes."""
    t, v = r.trust, r.valid
    ev = Evidence(run="r-1", test="t", step=1, observed=text)
    return [
        {"title": text},
        {"title": text + "\nsecond line"},
        {"title": ""},
        {"body": text},
        {"body": text + "\x00"},
        {"anchor": text},
        {"anchor": "no-colon"},
        {"anchors": (text,)},
        {"anchors": tuple(reversed(sorted({"page:/b", "page:/a", r.anchor})))},
        {"id": r.id + "0"},
        {"id": "Not-An-Id"},
        {"status": "bogus"},
        {"status": "active", "relations": Relations(superseded_by=r.id)},
        {"previous_status": "active"},
        {"status": "quarantined", "previous_status": "quarantined"},
        {"product": "bad product"},
        {"written_by": "robot"},
        {"trust": replace(t, source="elsewhere")},
        {"trust": replace(t, confirmations=-1)},
        {"trust": Trust(source="local", confirmations=1, contradictions=0,
                        last_confirmed=10**13)},
        {"valid": Valid(from_=5, until=3)},
        {"valid": Valid(from_=-1, until=None)},
        {"evidence": (ev,), "evidence_total": 0},
        {"evidence": (ev, replace(ev, step=-2))},
        {"evidence": (replace(ev, extra=(("claim", text),)),), "evidence_total": 3},
        {"history": (HistoryEntry(valid=Valid(from_=0, until=v.from_ + 1), title=text,
                                  body=text),)},
        {"history": (HistoryEntry(valid=Valid(from_=0, until=0), title="old", body=""),)},
        {"relations": Relations(cites=(text,))},
        {"scope": (("page", text),)},
    ]


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(records(), tricky_text(), st.data())
def test_any_record_gets_the_round_trips_answer(record: Record, text: str,
                                                data: st.DataObject) -> None:
    changes = data.draw(st.sampled_from(_mutations(record, text)))
    try:
        broken = replace(record, **changes)
    except (TypeError, ValueError):  # a value the dataclass itself refuses
        return
    try:
        dump_record(broken)
    except TypeError:  # not writable at all: both ways raise alike
        return
    _agrees(broken)


def test_a_refused_record_names_the_parsers_reason() -> None:
    good = Record(id="x", kind="fact", status="active", product="shop", anchor="page:/a",
                  title="t")
    text, problem = encoded(replace(good, title="two\nlines"))
    assert problem is not None and "title" in problem
    assert problem == _round_trip(replace(good, title="two\nlines"))[1]
    assert text.startswith("---\n")
