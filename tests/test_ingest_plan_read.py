"""The planner's read of an existing record: a canonical file read straight into its
record (:func:`memidex.records.canonical.read_canonical`) is exactly what the full path
— the front matter's mapping, then its validation — reads, or it declines; never another
record, never a record the full path refuses."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memidex.errors import RecordError
from memidex.records.canonical import read_canonical
from memidex.records.codec import (
    dump_record,
    load_front_matter,
    parse_record,
    split_front_matter,
)
from memidex.records.model import Evidence, HistoryEntry, Record, Relations, Trust, Valid
from memidex.records.validate import record_from_mapping
from strategies import canonical_texts, records, tricky_text

SAMPLE = (
    "---\nid: fact-el-button-b-000-2d1d843d42777bbc\nkind: fact\nstatus: candidate\n"
    "product: bench-shop\nscope: {aspect: text}\nanchor: el:button:b-000\n"
    "anchors: [page:/area-0, test:t-000]\n"
    'title: "The b 000 button shows \u201cButton 0 pressed\u201d on /area-0"\n'
    "written_by: template\n"
    "trust: {source: local, confirmations: 1, contradictions: 0, last_confirmed: 1}\n"
    "valid: {from: 1, until: null}\n"
    "relations: {supersedes: [], superseded_by: null, cites: [], contradicts: []}\n"
    "evidence:\n  - {run: bench-a, test: t-000, step: 1, observed: Button 0 pressed, "
    "check: assert-text, claim: 302bfccd127f}\n"
    "---\n`assert-text` held for el:button:b-000 on /area-0.\n"
)


def full(text: str) -> Record | None:
    """The reference: the front matter read (fast reader or PyYAML), then validated — the
    path ``parse_record`` takes for a file the canonical reader declines. None: refused."""
    try:
        front, body, first = split_front_matter(text, "x.md")
        data = load_front_matter(front, "x.md", first)
        return record_from_mapping(data, body, path="x.md", front_matter=front,
                                   first_line=first)
    except RecordError:
        return None


def agrees(text: str) -> Record | None:
    fast = read_canonical(text)
    if fast is not None:
        assert fast == full(text), text
        assert parse_record(text, "x.md") == fast
    return fast


def test_the_file_an_ingest_writes_is_read_straight() -> None:
    record = agrees(SAMPLE)
    assert record is not None
    assert record.evidence[0].extra == (("claim", "302bfccd127f"),)
    assert record.evidence[0].check == "assert-text"
    assert dump_record(record) == SAMPLE


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(canonical_texts())
def test_a_canonical_file_reads_as_the_full_path_reads_it(text: str) -> None:
    fast = agrees(text)
    if "{? " not in text and ", ? " not in text:  # over-long keys: the full path's
        assert fast is not None, text
        assert dump_record(fast) == text


ODD_VALUES = ["null", "~", "", "yes", "no", "true", "1", "-1", "0", "1e3", "0x1f", "012",
              "2024-01-01", "[]", "{}", '""', '"a\\nb"', '"a\\tb"', "a: b", "a #c", "[a, b]",
              "{a: b}", "{a: b}, c: d", "x", "fact", "active", "quarantined", "superseded",
              "{source: human}", "{from: 3, until: 2}", "'q'", "&a x", "*a", "!!str x",
              "{supersedes: [], superseded_by: fact-x, cites: [], contradicts: []}",
              "[el:x, el:x]", "[page:/a, 1]", '"\\u0000"', "a\x85b"]


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(canonical_texts(), st.data())
@example(SAMPLE, None)
def test_a_damaged_file_is_read_as_the_full_path_reads_it_or_declined(
        text: str, data: st.DataObject | None) -> None:
    if data is None:  # the sample as is
        assert agrees(text) is not None
        return
    lines = text.split("\n")
    for _ in range(data.draw(st.integers(1, 3))):
        j = data.draw(st.integers(0, len(lines) - 1))
        op = data.draw(st.sampled_from(["value", "drop", "dup", "swap", "char", "item"]))
        line = lines[j]
        if op == "value" and ": " in line:
            key = line.split(": ", 1)[0]
            lines[j] = f"{key}: {data.draw(st.sampled_from(ODD_VALUES))}"
        elif op == "drop":
            lines.pop(j)
        elif op == "dup":
            lines.insert(j, line)
        elif op == "swap":
            k = data.draw(st.integers(0, len(lines) - 1))
            lines[j], lines[k] = lines[k], lines[j]
        elif op == "char":
            i = data.draw(st.integers(0, len(line)))
            ch = data.draw(st.sampled_from(list(":,[]{}#&*!|>'\"-? \t\r1a\x00")))
            lines[j] = line[:i] + ch + line[i:]
        elif op == "item":
            value = data.draw(st.sampled_from(ODD_VALUES))
            lines.insert(j, f"  - {{run: r, claim: {value}}}")
        if not lines:
            lines = [""]
    agrees("\n".join(lines))


def _broken(r: Record, text: str) -> list[dict[str, object]]:
    """Field changes the validator refuses (or that only un-canonicalise the record)."""
    ev = Evidence(run="r-1", test="t", step=1, observed=text)
    return [
        {"title": text}, {"title": text + "\nsecond"}, {"title": ""}, {"anchor": text},
        {"anchor": "no-colon"}, {"anchors": (text,)}, {"id": r.id + "0"},
        {"status": "bogus"}, {"kind": "bogus"}, {"product": "bad product"},
        {"status": "active", "relations": Relations(superseded_by=r.id)},
        {"previous_status": "active"},
        {"status": "quarantined", "previous_status": "quarantined"},
        {"status": "quarantined", "previous_status": "active",
         "relations": Relations(superseded_by=r.id)},
        {"written_by": "robot"}, {"trust": replace(r.trust, source="elsewhere")},
        {"trust": Trust(confirmations=-1)}, {"valid": Valid(from_=5, until=3)},
        {"evidence": (ev,), "evidence_total": 0},
        {"evidence": (ev, replace(ev, step=-2))},
        {"evidence": (replace(ev, extra=(("claim", text),)),), "evidence_total": 3},
        {"evidence": (replace(ev, extra=(("claim", 1), ("a", None))),)},
        {"history": (HistoryEntry(valid=Valid(0, r.valid.from_ + 1), title=text,
                                  body=text),)},
        {"history": (HistoryEntry(valid=Valid(0, 0), title="old", body=""),)},
        {"relations": Relations(cites=(text,))}, {"scope": (("page", text),)},
        {"body": text + "\x00"},
    ]


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(records(), tricky_text(), st.data())
def test_a_record_the_full_path_refuses_is_declined(record: Record, text: str,
                                                   data: st.DataObject) -> None:
    changes = data.draw(st.sampled_from(_broken(record, text)))
    try:
        broken = replace(record, **changes)  # type: ignore[arg-type]
        written = dump_record(broken)
    except (TypeError, ValueError):
        return
    agrees(written)
