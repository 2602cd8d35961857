"""The content hash of a file's exact bytes (``sha256:<hex>``): how the index, the
writer and the staleness check tell bytes apart. Kept apart from the codec so that
comparing files never imports the YAML reader."""

from __future__ import annotations

import hashlib

__all__ = ["HASH_TAG", "content_hash", "verify_hash"]

HASH_TAG = "sha256:"


def content_hash(data: bytes) -> str:
    return HASH_TAG + hashlib.sha256(data).hexdigest()


def verify_hash(data: bytes, tagged: str) -> bool:
    """Re-derive the tagged hash of ``data`` and compare."""
    if not tagged.startswith(HASH_TAG):
        return False
    return content_hash(data) == tagged
