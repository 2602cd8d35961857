"""Exact nearest neighbours by dot product: all vectors of one model in one float32
matrix, ranked with numpy. At 100,000 × 384 the matrix is 154 MB and one query is one
matrix-vector product (docs/vectors.md gives the measured times)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["VectorHit", "VectorMatrix"]


@dataclass(frozen=True, slots=True)
class VectorHit:
    id: str
    score: float  # cosine similarity (the vectors are normalised), rounded to 6 places
    row: int


class VectorMatrix:
    """Record ids and their vectors (one row each, L2-normalised)."""

    def __init__(self, ids: Sequence[str], matrix: npt.ArrayLike, *, model_id: str = "",
                 normalise: bool = True) -> None:
        import numpy as np

        m = np.ascontiguousarray(matrix, dtype=np.float32)
        if m.ndim != 2 or m.shape[0] != len(ids):
            raise ValueError(f"{len(ids)} ids but a matrix of shape {m.shape}")
        if normalise and m.size:
            norms = np.linalg.norm(m, axis=1, keepdims=True)
            np.divide(m, np.where(norms > 0, norms, 1.0), out=m)
        self.ids: tuple[str, ...] = tuple(ids)
        self.matrix: npt.NDArray[np.float32] = m
        self.model_id = model_id

    @classmethod
    def from_blobs(cls, ids: Sequence[str], blobs: Sequence[bytes], dim: int, *,
                   model_id: str = "") -> VectorMatrix:
        """From float16 blobs (:func:`memidex.vectors.blobs.encode_f16`), in one pass."""
        import numpy as np

        if any(len(b) != 2 * dim for b in blobs):
            bad = next(i for i, b in enumerate(blobs) if len(b) != 2 * dim)
            raise ValueError(f"vector of {ids[bad]!r} is {len(blobs[bad])} bytes, "
                             f"not {2 * dim}")
        flat = np.frombuffer(b"".join(blobs), dtype="<f2")
        return cls(ids, flat.reshape(len(ids), dim).astype(np.float32), model_id=model_id,
                   normalise=False)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def scores(self, query: npt.ArrayLike, rows: slice | None = None
               ) -> npt.NDArray[np.float32]:
        """The dot product of ``query`` (normalised here) with every row (of ``rows``)."""
        import numpy as np

        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise ValueError(f"a query of {q.shape[0]} components against vectors of "
                             f"{self.dim}")
        norm = float(np.linalg.norm(q))
        if norm > 0:
            q = q / norm
        m = self.matrix if rows is None else self.matrix[rows]  # a slice is a view
        out: npt.NDArray[np.float32] = m @ q
        return out

    def top_k(self, query: npt.ArrayLike, k: int, mask: npt.ArrayLike | None = None,
              *, min_score: float | None = None, rows: slice | None = None
              ) -> list[VectorHit]:
        """The ``k`` best rows for ``query``, best first; ``mask`` (a boolean per row)
        keeps only the rows it marks (product, status, kind filters); ``min_score``
        drops rows below it. ``rows``: a contiguous range of rows to look at only (the
        records of one product, when the caller keeps them together): the product is
        read from memory, not the whole matrix. Ties break on id, so equal inputs give
        equal output."""
        import numpy as np

        if k <= 0 or not self.ids:
            return []
        start = 0 if rows is None else range(len(self.ids))[rows].start
        if rows is not None and (rows.step or 1) != 1:
            raise ValueError("rows must be a contiguous slice")
        s = self.scores(query, rows)
        if mask is not None:
            keep = np.asarray(mask, dtype=bool)
            if keep.shape == (len(self.ids),) and rows is not None:
                keep = keep[rows]
            if keep.shape != s.shape:
                raise ValueError(f"a mask of shape {keep.shape} for {len(s)} rows")
            s = np.where(keep, s, np.float32(-np.inf))
        n = len(s)
        if k < n:
            part = np.argpartition(-s, k - 1)[:k]
            # rows tied with the k-th score outside the partition: take them too, then
            # cut after sorting on (score, id)
            kth = s[part].min()
            ties = np.nonzero(s == kth)[0]
            cand = np.union1d(part, ties)
        else:
            cand = np.arange(n)
        ids = self.ids
        order = sorted(cand.tolist(), key=lambda r: (-float(s[r]), ids[start + r]))
        out: list[VectorHit] = []
        for r in order:
            score = float(s[r])
            if score == float("-inf") or (min_score is not None and score < min_score):
                continue
            out.append(VectorHit(ids[start + r], round(score, 6), start + r))
            if len(out) == k:
                break
        return out
