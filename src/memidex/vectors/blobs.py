"""Vectors as bytes for the index, and a cache keyed by content hash.

A vector is stored as a **float16 blob** (little-endian, ``2 * dim`` bytes) beside the
model id and the dimension (the index's columns); :func:`encode_i8` is the compact
alternative (one signed byte a component and a float32 scale, ``dim + 4`` bytes), and
:func:`decode_vector` tells the two apart by length. The key of a vector is
:func:`content_key`: the SHA-256 of the model id and the exact text embedded, so an
unchanged record keeps its vector and a new model (another id) recomputes them all.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["VectorCache", "content_key", "decode_f16", "decode_i8", "decode_vector",
           "encode_f16", "encode_i8"]


def encode_f16(vector: npt.ArrayLike) -> bytes:
    """One vector as float16 bytes (little-endian)."""
    import numpy as np

    arr = np.asarray(vector, dtype=np.float32).reshape(-1)
    if not np.all(np.isfinite(arr)):
        raise ValueError("a vector with NaN or infinite components cannot be stored")
    return arr.astype("<f2").tobytes()


def decode_f16(blob: bytes, dim: int) -> npt.NDArray[np.float32]:
    """A float16 blob of ``dim`` components, as float32."""
    import numpy as np

    if len(blob) != 2 * dim:
        raise ValueError(f"a float16 vector of {dim} components is {2 * dim} bytes, "
                         f"got {len(blob)}")
    return np.frombuffer(blob, dtype="<f2").astype(np.float32)


def encode_i8(vector: npt.ArrayLike) -> bytes:
    """One vector as int8 components and a float32 scale (``max |x| / 127``) in front."""
    import numpy as np

    arr = np.asarray(vector, dtype=np.float32).reshape(-1)
    if not np.all(np.isfinite(arr)):
        raise ValueError("a vector with NaN or infinite components cannot be stored")
    peak = float(np.max(np.abs(arr))) if arr.size else 0.0
    scale = peak / 127.0
    if not scale >= np.finfo(np.float32).tiny:  # zero, or a subnormal vector: all zeros
        scale = 1.0
    q = np.clip(np.rint(arr / scale), -127, 127).astype(np.int8)
    head: bytes = np.asarray([scale], dtype="<f4").tobytes()
    body: bytes = q.tobytes()
    return head + body


def decode_i8(blob: bytes, dim: int) -> npt.NDArray[np.float32]:
    import numpy as np

    if len(blob) != dim + 4:
        raise ValueError(f"an int8 vector of {dim} components is {dim + 4} bytes, "
                         f"got {len(blob)}")
    scale = np.frombuffer(blob[:4], dtype="<f4")[0]
    return np.frombuffer(blob[4:], dtype=np.int8).astype(np.float32) * np.float32(scale)


def decode_vector(blob: bytes, dim: int) -> npt.NDArray[np.float32]:
    """A blob of either format, told apart by its length."""
    if len(blob) == 2 * dim:
        return decode_f16(blob, dim)
    if len(blob) == dim + 4:
        return decode_i8(blob, dim)
    raise ValueError(f"a vector blob of {len(blob)} bytes is neither float16 nor int8 "
                     f"for {dim} components")


def content_key(model_id: str, text: str) -> str:
    """The cache key of one embedding: ``sha256:`` of model id, a separator and text."""
    digest = hashlib.sha256(f"{model_id}\x1f{text}".encode()).hexdigest()
    return f"sha256:{digest}"


@dataclass(frozen=True)
class Refresh:
    """What :meth:`VectorCache.plan` found: the texts to embed (by key) and the keys
    that no record uses any more."""

    to_embed: dict[str, str]  # key -> text
    unused: frozenset[str]


class VectorCache:
    """Blobs by content key for one model, for an incremental refresh: :meth:`plan`
    says which texts need embedding, :meth:`put` stores the new blobs. Storage is the
    caller's (the index's ``vectors`` table); this keeps the rule in one place."""

    def __init__(self, model_id: str, blobs: Mapping[str, bytes] | None = None) -> None:
        self.model_id = model_id
        self._blobs: dict[str, bytes] = dict(blobs or {})

    def __len__(self) -> int:
        return len(self._blobs)

    def __contains__(self, key: object) -> bool:
        return key in self._blobs

    def get(self, key: str) -> bytes | None:
        return self._blobs.get(key)

    def key(self, text: str) -> str:
        return content_key(self.model_id, text)

    def plan(self, texts: Iterable[str]) -> Refresh:
        """The texts (of every record now) whose key has no blob yet, and the keys no
        text has any more."""
        wanted: dict[str, str] = {}
        for text in texts:
            wanted.setdefault(self.key(text), text)
        missing = {k: t for k, t in wanted.items() if k not in self._blobs}
        return Refresh(missing, frozenset(set(self._blobs) - set(wanted)))

    def put(self, keys: Sequence[str], vectors: npt.ArrayLike) -> None:
        import numpy as np

        arr = np.asarray(vectors, dtype=np.float32)
        if arr.ndim != 2 or arr.shape[0] != len(keys):
            raise ValueError(f"{len(keys)} keys but vectors of shape {arr.shape}")
        for key, row in zip(keys, arr, strict=True):
            self._blobs[key] = encode_f16(row)

    def drop(self, keys: Iterable[str]) -> None:
        for key in keys:
            self._blobs.pop(key, None)

    def items(self) -> list[tuple[str, bytes]]:
        return sorted(self._blobs.items())
