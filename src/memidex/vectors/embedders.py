"""The two kinds of embedding model memidex runs, both loaded from a folder of the model
cache and never from anywhere else:

* :class:`OnnxEmbedder` — the full model (level ``memidex``): a sentence-embedding
  export in ONNX (inputs ``input_ids``, ``attention_mask`` and, if it has one,
  ``token_type_ids``; output ``last_hidden_state``) run by ``onnxruntime``, its
  ``tokenizer.json`` run by ``tokenizers``; CLS or mean pooling, then L2 normalisation.
* :class:`StaticEmbedder` — the static floor (level ``static-floor``): a model2vec
  folder (``model.safetensors`` with the token vectors, ``tokenizer.json``,
  ``config.json``); a text's vector is the mean of its tokens' vectors, with numpy only
  (and ``tokenizers`` to split the text).

Both return float32 arrays of shape ``(len(texts), dim)`` with unit rows (a row of
zeros for a text with no known token). Texts are masked by the caller.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memidex.vectors.errors import ModelUnavailable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from memidex.vectors.manifest import Manifest

__all__ = ["Embedder", "OnnxEmbedder", "StaticEmbedder", "broken_reason", "runtime_reason"]

BATCH = 32


class Embedder(Protocol):
    name: str
    model_id: str  # name@digest: a new model file is a new id, so vectors are recomputed
    dim: int
    level: str  # "memidex" or "static-floor"

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...

    def embed_query(self, text: str) -> npt.NDArray[np.float32]: ...


def runtime_reason(exc: ImportError, package: str) -> str:
    """The reason a level gives when its runtime cannot be imported: ``runtime missing:
    onnxruntime is not installed (…)`` — what ``doctor`` prints."""
    missing = getattr(exc, "name", None)
    what = (f"{package} is not installed" if missing in (package, None) or
            str(missing).split(".")[0] == package.split(".")[0]
            else f"{package} cannot be imported")
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"runtime missing: {what} ({detail}); `pip install 'memidex[vectors]'`"


def broken_reason(name: str, file: str, exc: BaseException) -> str:
    """The reason for a model file the runtime refused: its first line, shortened."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if len(text) > 200:
        text = text[:197] + "..."
    return f"model {name}: {file} is broken ({text})"


def _import_tokenizers(name: str) -> Any:
    try:
        import tokenizers
    except ImportError as exc:
        raise ModelUnavailable(runtime_reason(exc, "tokenizers")) from None
    return tokenizers


def _tokenizer(folder: Path, name: str, max_length: int | None) -> Any:
    tokenizers = _import_tokenizers(name)
    try:
        tok = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception as exc:  # the Rust library raises plain Exceptions
        raise ModelUnavailable(broken_reason(name, "tokenizer.json", exc)) from None
    tok.no_padding()
    if max_length:
        tok.enable_truncation(max_length)
    else:
        tok.no_truncation()
    return tok


def _normalise(m: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    import numpy as np

    norms = np.linalg.norm(m, axis=1, keepdims=True)
    out: npt.NDArray[np.float32] = (m / np.where(norms > 0, norms, 1.0)).astype(np.float32)
    return out


class OnnxEmbedder:
    """A sentence-embedding model in ONNX (the ``memidex`` level)."""

    level = "memidex"

    def __init__(self, folder: Path, manifest: Manifest, *, threads: int = 0) -> None:
        try:
            import numpy  # noqa: F401
        except ImportError as exc:
            raise ModelUnavailable(runtime_reason(exc, "numpy")) from None
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise ModelUnavailable(runtime_reason(exc, "onnxruntime")) from None
        self.name = manifest.name
        self.model_id = manifest.model_id
        self.pooling = manifest.pooling
        self.normalize = manifest.normalize
        self.query_prefix = manifest.query_prefix
        self.max_length = manifest.max_length
        self._tok = _tokenizer(folder, self.name, manifest.max_length)
        self._pad = next((i for t in ("[PAD]", "<pad>") if (i := self._tok.token_to_id(t))
                          is not None), 0)
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        if threads:
            opts.intra_op_num_threads = threads
        try:
            self._session = ort.InferenceSession(str(folder / "model.onnx"), opts,
                                                 providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's own exception types (InvalidProtobuf, Fail)
            raise ModelUnavailable(broken_reason(self.name, "model.onnx", exc)) from None
        inputs = {i.name: i for i in self._session.get_inputs()}
        if "input_ids" not in inputs:
            raise ModelUnavailable(f"model {self.name}: model.onnx has no `input_ids` input "
                                   f"(inputs: {', '.join(sorted(inputs))})")
        self._inputs = inputs
        outputs = self._session.get_outputs()
        rank3 = [o.name for o in outputs if isinstance(o.shape, list) and len(o.shape) == 3]
        rank2 = [o.name for o in outputs if isinstance(o.shape, list) and len(o.shape) == 2]
        names = [o.name for o in outputs]
        if "last_hidden_state" in names:
            self._output, self._pooled = "last_hidden_state", False
        elif rank3:
            self._output, self._pooled = rank3[0], False
        elif "sentence_embedding" in names or rank2:
            self._output = "sentence_embedding" if "sentence_embedding" in names else rank2[0]
            self._pooled = True
        else:
            raise ModelUnavailable(f"model {self.name}: model.onnx has no "
                                   "`last_hidden_state` output")
        probe = self._run(["memidex"])
        self.dim = int(probe.shape[1])
        if manifest.dim and manifest.dim != self.dim:
            raise ModelUnavailable(f"model {self.name}: gives vectors of {self.dim} "
                                   f"components, its manifest says {manifest.dim}")

    def _feed(self, ids: list[list[int]]) -> dict[str, Any]:
        import numpy as np

        width = max(1, max(len(x) for x in ids))
        input_ids = np.full((len(ids), width), self._pad, dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for i, row in enumerate(ids):
            input_ids[i, :len(row)] = row
            mask[i, :len(row)] = 1
        feed: dict[str, Any] = {"input_ids": input_ids}
        if "attention_mask" in self._inputs:
            feed["attention_mask"] = mask
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        for name, arg in self._inputs.items():
            if name in feed and arg.type == "tensor(int32)":
                feed[name] = feed[name].astype(np.int32)
        unknown = set(self._inputs) - set(feed)
        if unknown:
            raise ModelUnavailable(f"model {self.name}: model.onnx wants inputs memidex "
                                   f"does not give: {', '.join(sorted(unknown))}")
        return feed

    def _run(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        encs = self._tok.encode_batch(list(texts))
        ids = [e.ids for e in encs]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out: npt.NDArray[np.float32] | None = None
        for start in range(0, len(order), BATCH):
            chunk = order[start:start + BATCH]
            feed = self._feed([ids[i] for i in chunk])
            try:
                (h,) = self._session.run([self._output], feed)
            except Exception as exc:  # a graph that loads but cannot run these inputs
                raise ModelUnavailable(broken_reason(self.name, "model.onnx", exc)) from None
            h = np.asarray(h, dtype=np.float32)
            if self._pooled:
                pooled = h
            elif self.pooling == "cls":
                pooled = h[:, 0, :]
            else:
                m = feed.get("attention_mask", np.ones(feed["input_ids"].shape))
                m = m.astype(np.float32)[:, :, None]
                pooled = (h * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
            if out is None:
                out = np.zeros((len(ids), pooled.shape[1]), dtype=np.float32)
            out[chunk] = pooled
        assert out is not None
        return _normalise(out) if self.normalize else out

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._run(texts)

    def vocabulary(self) -> dict[str, int]:
        """The tokenizer's vocabulary (token → id)."""
        vocab: dict[str, int] = self._tok.get_vocab()
        return vocab

    def special_token_ids(self) -> set[int]:
        """The ids of the tokenizer's special tokens ([CLS], [PAD], …)."""
        decoder = getattr(self._tok, "get_added_tokens_decoder", None)
        if decoder is None:
            return set()
        return {int(i) for i, t in decoder().items() if getattr(t, "special", False)}

    def token_vectors(self, ids: Sequence[int], batch: int = 256
                      ) -> npt.NDArray[np.float32]:
        """Each token id embedded alone between the tokenizer's special tokens
        (``[CLS] token [SEP]``), mean-pooled over the whole sequence, not normalised —
        what a distilled static model is made of."""
        import numpy as np

        empty = self._tok.encode("", add_special_tokens=True).ids
        prefix, suffix = empty[:1], empty[1:]
        seqs = [[*prefix, i, *suffix] for i in ids]
        parts = []
        for start in range(0, len(seqs), batch):
            feed = self._feed(seqs[start:start + batch])
            (h,) = self._session.run([self._output], feed)
            h = np.asarray(h, dtype=np.float32)
            parts.append(h if h.ndim == 2 else h.mean(axis=1))
        if not parts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out: npt.NDArray[np.float32] = np.nan_to_num(np.concatenate(parts, axis=0))
        return out

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        out: npt.NDArray[np.float32] = self._run([self.query_prefix + text])[0]
        return out


class StaticEmbedder:
    """A model2vec-format static model (the ``static-floor`` level)."""

    level = "static-floor"

    def __init__(self, folder: Path, manifest: Manifest) -> None:
        try:
            import numpy as np
        except ImportError as exc:
            raise ModelUnavailable(runtime_reason(exc, "numpy")) from None
        from memidex.errors import MemidexError
        from memidex.vectors.tensors import read_safetensors

        self.name = manifest.name
        self.model_id = manifest.model_id
        self.normalize = manifest.normalize
        self.query_prefix = manifest.query_prefix
        self.max_length = manifest.max_length
        try:
            tensors = read_safetensors(folder / "model.safetensors")
        except MemidexError as exc:
            raise ModelUnavailable(f"model {self.name}: {exc.message}") from None
        table = tensors.get("embeddings", tensors.get("embedding.weight"))
        if table is None or table.ndim != 2:
            raise ModelUnavailable(f"model {self.name}: model.safetensors has no 2-D "
                                   "`embeddings` tensor")
        self._table = np.asarray(table, dtype=np.float32)
        weights = tensors.get("weights")
        mapping = tensors.get("mapping")
        self._weights = None if weights is None else np.asarray(weights, dtype=np.float32)
        self._mapping = None if mapping is None else np.asarray(mapping, dtype=np.int64)
        self.dim = int(self._table.shape[1])
        if manifest.dim and manifest.dim != self.dim:
            raise ModelUnavailable(f"model {self.name}: has vectors of {self.dim} "
                                   f"components, its manifest says {manifest.dim}")
        self._tok = _tokenizer(folder, self.name, manifest.max_length)
        vocab: dict[str, int] = self._tok.get_vocab()
        rows = len(self._mapping) if self._mapping is not None else len(self._table)
        if vocab and max(vocab.values()) >= rows:
            raise ModelUnavailable(f"model {self.name}: tokenizer.json has ids up to "
                                   f"{max(vocab.values())} but model.safetensors has "
                                   f"{rows} rows")
        lengths = sorted(len(t) for t in vocab) or [1]
        self._chars = (manifest.max_length or 0) * max(1, lengths[len(lengths) // 2])
        self._unk = self._unk_id(folder)

    def _unk_id(self, folder: Path) -> int | None:
        try:
            spec = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
            unk = spec.get("model", {}).get("unk_token")
        except (OSError, ValueError, AttributeError):
            unk = None
        if not isinstance(unk, str):
            return None
        tid = self._tok.token_to_id(unk)
        return int(tid) if tid is not None else None

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's token ids, as model2vec takes them: no special tokens, the
        unknown token dropped, the text cut to ``max_length`` × the median token length
        in characters first."""
        cut = [t[:self._chars] for t in texts] if self._chars else list(texts)
        encs = self._tok.encode_batch(cut, add_special_tokens=False)
        unk = self._unk
        return [[i for i in e.ids if i != unk] if unk is not None else list(e.ids)
                for e in encs]

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, ids in enumerate(self.token_ids(texts)):
            if not ids:
                continue
            idx = np.asarray(ids, dtype=np.int64)
            rows = self._table[self._mapping[idx] if self._mapping is not None else idx]
            if self._weights is not None:
                rows = rows * self._weights[idx][:, None]
            out[i] = rows.mean(axis=0)
        return _normalise(out) if self.normalize else out

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        out: npt.NDArray[np.float32] = self.embed([self.query_prefix + text])[0]
        return out
