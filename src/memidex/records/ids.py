"""Deterministic record ids (SPEC §2): ``<kind>-<slug>-<hash>``, never from wording."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from memidex.records.vocab import Scalar

__all__ = ["ANCHOR_RE", "ID_RE", "PRODUCT_RE", "RUN_ID_PATTERN", "anchor_slug", "record_id",
           "scope_json"]

RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
"""A run id (the run-evidence schema's pattern; here so that local state can check one
without loading the evidence format)."""

ANCHOR_RE = re.compile(r"[a-z][a-z0-9_-]*:\S(?:.*\S)?")
"""``type:value`` — a lowercase type, a colon, a non-empty value without edge spaces."""

ID_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,199}")
"""Ids are file names: lowercase letters, digits and ``-`` only, so they cannot escape."""

PRODUCT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")

_NON_SLUG = re.compile(r"[^a-z0-9]+")


def anchor_slug(anchor: str) -> str:
    """Lower-case, runs outside ``[a-z0-9]`` become ``-``, trimmed, cut to 48, trimmed again."""
    slug = _NON_SLUG.sub("-", anchor.lower()).strip("-")
    return slug[:48].strip("-")


def scope_json(scope: Mapping[str, Scalar]) -> str:
    if not scope:
        return "{}"  # most records have no scope; json.dumps costs ~10 us
    return json.dumps(dict(scope), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def record_id(kind: str, anchor: str, product: str, scope: Mapping[str, Scalar] | None) -> str:
    """The id SPEC §2 defines; any runner in any language computes the same."""
    import hashlib  # here: OpenSSL costs a search's start-up ~2 ms

    material = "\x1f".join((kind, anchor, product, scope_json(scope or {})))
    digest = hashlib.sha256(material.encode("utf-8")).hexdigest()[:16]
    slug = anchor_slug(anchor)
    return f"{kind}-{slug}-{digest}"
