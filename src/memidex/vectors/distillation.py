"""A static floor distilled from the full model in the cache — the model2vec idea with
onnxruntime and numpy, no torch:

1. every token of the full model's vocabulary (special and ``[unused…]`` tokens aside)
   is embedded once, as ``[CLS] token [SEP]``, mean-pooled;
2. the token vectors are reduced with PCA (``dims`` components, 256 by default);
3. each is weighted by SIF over a Zipf estimate of its frequency (rank = token id):
   ``w = a / (a + p)``, ``a = 1e-4``;
4. they are written as a model2vec folder (float16 ``embeddings``, the full model's
   ``tokenizer.json``, ``config.json``) and imported into the cache like any model.

Then it **measures** the result before keeping it: the Spearman correlation between the
pairwise cosines of the full model and of the static one over probe texts (built-in
sentences about web tests, or the caller's, e.g. the records). Below ``min_fidelity``
nothing is imported.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memidex.vectors.cache import ModelCache, ModelEntry
from memidex.vectors.errors import ModelCacheError, ModelUnavailable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["MIN_FIDELITY", "PROBES", "DistillReport", "distill", "fidelity"]

MIN_FIDELITY = 0.5
"""The least Spearman correlation with the full model a distilled floor must reach
(docs/vectors.md gives what bench/retrieval measured)."""

PROBES = (
    "The place order button stays disabled until the terms box is ticked",
    "Submit order cannot be clicked before accepting the conditions",
    "The cookie banner covers the checkout button on small screens",
    "A consent popup hides the buy button on mobile",
    "Search suggestions time out on staging and the test is flaky",
    "The autocomplete list sometimes fails to appear in time",
    "The payment sandbox rejects too many requests per minute",
    "Card authorisations are rate limited when tests run in parallel",
    "Five wrong passwords lock the account for fifteen minutes",
    "Repeated failed logins block the user temporarily",
    "The confirmation page shows an order number",
    "After paying, a thank you page lists the order reference",
    "Guest checkout asks for an email address",
    "You can buy without creating an account",
    "The admin session expires after ten idle minutes",
    "Back office users are logged out when inactive",
    "An expired promo code shows an error under the field",
    "Old discount vouchers are refused with a message",
    "The toast after adding to cart covers the header icon",
    "A notification hides the basket link for a few seconds",
    "Product images load lazily while scrolling",
    "The invoice can be downloaded as a PDF",
    "Shipping costs are added on the payment step",
    "Delivery fees appear in the total before paying",
    "The DNS name of the payment host cannot be resolved",
    "A network error reaches the payment provider",
    "Empty search results suggest popular products",
    "When nothing matches, the page offers trending items",
    "The profile page greets the user by first name",
    "Order history lists the newest orders first",
    "The weather is lovely today",
    "He drove to the stadium on Sunday",
)


@dataclass(frozen=True)
class DistillReport:
    entry: ModelEntry
    source_model_id: str
    tokens: int
    dims: int
    explained_variance: float
    fidelity: float
    seconds: float
    change: str

    def as_dict(self) -> dict[str, Any]:
        return {**self.entry.as_dict(), "source_model_id": self.source_model_id,
                "tokens": self.tokens, "dims": self.dims,
                "explained_variance": round(self.explained_variance, 4),
                "fidelity": round(self.fidelity, 4), "seconds": round(self.seconds, 2),
                "change": self.change}


def _spearman(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> float:
    import numpy as np

    ra = np.argsort(np.argsort(a)).astype(np.float64)
    rb = np.argsort(np.argsort(b)).astype(np.float64)
    ra -= ra.mean()
    rb -= rb.mean()
    denom = float(np.sqrt((ra * ra).sum() * (rb * rb).sum()))
    return float((ra * rb).sum() / denom) if denom else 0.0


def fidelity(full: Any, static: Any, texts: Sequence[str]) -> float:
    """Spearman correlation of the pairwise cosines of two embedders over ``texts``."""
    import numpy as np

    a = full.embed(list(texts)).astype(np.float64)
    b = static.embed(list(texts)).astype(np.float64)
    iu = np.triu_indices(len(texts), k=1)
    return _spearman((a @ a.T)[iu], (b @ b.T)[iu])


def distill(cache: ModelCache, *, source: str | None = None, name: str | None = None,
            dims: int = 256, sif: float = 1e-4, probes: Sequence[str] | None = None,
            min_fidelity: float = MIN_FIDELITY, replace_existing: bool = False
            ) -> DistillReport:
    """Distill a static floor from the full model ``source`` (default: the first full
    model of the cache) and import it as ``name`` (default ``<source>-static``)."""
    import numpy as np

    from memidex.store.fsio import atomic_write
    from memidex.vectors.embedders import OnnxEmbedder
    from memidex.vectors.tensors import encode_safetensors

    started = time.perf_counter()
    if source is None:
        fulls = [e for e in cache.of_kind("onnx") if e.ok]
        if not fulls:
            raise ModelUnavailable(f"no full model (ONNX) in the model cache {cache.root} "
                                   "to distill from", hint="`memidex models import PATH`")
        entry = fulls[0]
    else:
        entry = cache.entry(source)
    full = cache.load(entry)
    if not isinstance(full, OnnxEmbedder):
        raise ModelCacheError(f"{entry.name} is a static model: distill from a full "
                              "(ONNX) model")
    vocab = full.vocabulary()
    skip = full.special_token_ids() | {i for t, i in vocab.items()
                                       if re.fullmatch(r"\[unused\d+\]", t)}
    size = max(vocab.values()) + 1
    keep = sorted(i for i in set(vocab.values()) if i not in skip)
    raw = full.token_vectors(keep)
    hidden = raw.shape[1]
    k = min(dims, hidden, max(1, len(keep) - 1))
    centred = raw.astype(np.float64) - raw.mean(axis=0)
    cov = centred.T @ centred / max(1, len(keep) - 1)
    vals, vecs = np.linalg.eigh(cov)
    order = np.argsort(vals)[::-1]
    vals, vecs = np.clip(vals[order], 0, None), vecs[:, order]
    reduced = centred @ vecs[:, :k]
    explained = float(vals[:k].sum() / vals.sum()) if vals.sum() > 0 else 0.0
    inv_rank = 1.0 / np.arange(2, len(keep) + 2)
    p = inv_rank / inv_rank.sum()
    weights = sif / (sif + p)
    table = np.zeros((size, k), dtype=np.float32)
    table[keep] = (reduced * weights[:, None]).astype(np.float32)
    target = name or f"{entry.name}-static"
    with tempfile.TemporaryDirectory(prefix="memidex-distill-") as tmp:
        folder = Path(tmp)
        atomic_write(folder / "model.safetensors",
                     encode_safetensors({"embeddings": table.astype(np.float16)}),
                     durable=False)
        (folder / "tokenizer.json").write_bytes((entry.path / "tokenizer.json").read_bytes())
        config = {"model_type": "model2vec", "architectures": ["StaticModel"],
                  "tokenizer_name": entry.name, "apply_pca": k, "sif_coefficient": sif,
                  "hidden_dim": k, "seq_length": 1000000, "normalize": True,
                  "max_length": 512, "embedding_dtype": "float16",
                  "derived_from": full.model_id}
        (folder / "config.json").write_text(json.dumps(config, indent=1) + "\n",
                                            encoding="utf-8")
        for prov in ("LICENSE", "NOTICE"):
            if (entry.path / prov).is_file():
                (folder / prov).write_bytes((entry.path / prov).read_bytes())
        from memidex.vectors.embedders import StaticEmbedder
        from memidex.vectors.manifest import Manifest

        trial = StaticEmbedder(folder, Manifest(name=target, kind="static", dim=k,
                                                files={}, max_length=512))
        score = fidelity(full, trial, list(probes or PROBES))
        if score < min_fidelity:
            raise ModelCacheError(
                f"the static floor distilled from {entry.name} measures {score:.3f} "
                f"against it (Spearman over {len(probes or PROBES)} probe texts), below "
                f"{min_fidelity}: not imported",
                hint="lower --min-fidelity to keep it anyway, or import a static model "
                "you have")
        result = cache.import_model(folder, name=target, replace_existing=replace_existing,
                                    derived_from=full.model_id)
    return DistillReport(result.entry, full.model_id, len(keep), k, explained, score,
                         time.perf_counter() - started, result.change)
