"""Records and policies: the model, validation, the canonical codec and ids. No I/O."""

from memidex.records.codec import (
    content_hash,
    dump_record,
    parse_record,
    parse_record_bytes,
    verify_hash,
)
from memidex.records.ids import anchor_slug, record_id
from memidex.records.model import (
    KINDS,
    SERVABLE_STATUSES,
    STATUSES,
    HistoryEntry,
    Policy,
    Record,
    Relations,
    Trust,
    Valid,
)
from memidex.records.policy import parse_policies

__all__ = [
    "KINDS",
    "SERVABLE_STATUSES",
    "STATUSES",
    "HistoryEntry",
    "Policy",
    "Record",
    "Relations",
    "Trust",
    "Valid",
    "anchor_slug",
    "content_hash",
    "dump_record",
    "parse_policies",
    "parse_record",
    "parse_record_bytes",
    "record_id",
    "verify_hash",
]
