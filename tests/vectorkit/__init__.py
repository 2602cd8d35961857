"""Tiny real models for the vectors tests, made here (nothing downloaded):

* :func:`make_tokenizer` — a WordPiece ``tokenizer.json`` built by the ``tokenizers``
  library over a small vocabulary, with ``[CLS] … [SEP]`` added like BERT's;
* :func:`make_onnx_model` — an ONNX graph built with the ``onnx`` package: a Gather on
  an embedding table, plus a token-type table, a MatMul and a Tanh, output
  ``last_hidden_state`` — real ops onnxruntime runs — and :func:`onnx_reference`, the
  same computation in numpy, for the expected vectors;
* :func:`make_static_model` — a model2vec folder (``model.safetensors`` written with the
  ``safetensors`` package, ``tokenizer.json``, ``config.json``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

WORDS = ("place order button disabled enabled checkout terms cookie banner covers "
         "payment card sandbox search suggestions flaky timeout login lockout account "
         "guest email promo code expired cart toast admin session staging the is on a "
         "to until ticked").split()
SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")


def vocab(words: tuple[str, ...] | list[str] = WORDS) -> dict[str, int]:
    out = {t: i for i, t in enumerate(SPECIALS)}
    for w in words:
        out.setdefault(w, len(out))
    for w in words:  # a few word pieces, so unknown words split
        if len(w) > 4:
            out.setdefault("##" + w[-3:], len(out))
    return out


def make_tokenizer(folder: Path, words: tuple[str, ...] | list[str] = WORDS) -> Any:
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    v = vocab(words)
    tok = Tokenizer(WordPiece(v, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", v["[CLS]"]), ("[SEP]", v["[SEP]"])])
    for t in SPECIALS:
        tok.add_special_tokens([t])
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    return tok


def tables(n: int, dim: int, seed: int = 7) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"E": rng.normal(size=(n, dim)).astype(np.float32),
            "T": rng.normal(scale=0.1, size=(2, dim)).astype(np.float32),
            "W": rng.normal(scale=0.5, size=(dim, dim)).astype(np.float32)}


def make_onnx_model(folder: Path, *, dim: int = 8, seed: int = 7, token_types: bool = True,
                    pooling: str | None = "mean", words: tuple[str, ...] | list[str] = WORDS
                    ) -> dict[str, np.ndarray]:
    """Write model.onnx and tokenizer.json (and 1_Pooling/config.json unless ``pooling``
    is None); return the weight tables."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    make_tokenizer(folder, words)
    w = tables(len(vocab(words)), dim, seed)
    nodes = [helper.make_node("Gather", ["E", "input_ids"], ["emb"])]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "s"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["b", "s"])]
    x = "emb"
    if token_types:
        inputs.append(helper.make_tensor_value_info("token_type_ids", TensorProto.INT64,
                                                    ["b", "s"]))
        nodes += [helper.make_node("Gather", ["T", "token_type_ids"], ["typ"]),
                  helper.make_node("Add", ["emb", "typ"], ["x0"])]
        x = "x0"
    nodes += [helper.make_node("MatMul", [x, "W"], ["mm"]),
              helper.make_node("Tanh", ["mm"], ["last_hidden_state"])]
    inits = [numpy_helper.from_array(w["E"], "E"), numpy_helper.from_array(w["W"], "W")]
    if token_types:
        inits.append(numpy_helper.from_array(w["T"], "T"))
    graph = helper.make_graph(nodes, "tiny", inputs, [helper.make_tensor_value_info(
        "last_hidden_state", TensorProto.FLOAT, ["b", "s", dim])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(folder / "model.onnx"))
    if pooling is not None:
        (folder / "1_Pooling").mkdir(exist_ok=True)
        (folder / "1_Pooling" / "config.json").write_text(json.dumps({
            "word_embedding_dimension": dim, "pooling_mode_cls_token": pooling == "cls",
            "pooling_mode_mean_tokens": pooling == "mean"}))
    return w


def onnx_reference(w: dict[str, np.ndarray], ids: list[list[int]], pooling: str,
                   token_types: bool = True) -> np.ndarray:
    """What the tiny graph computes, pooled and normalised, in plain numpy."""
    out = []
    for row in ids:
        e = w["E"][row] + (w["T"][0] if token_types else 0)
        h = np.tanh(e @ w["W"])
        v = h[0] if pooling == "cls" else h.mean(axis=0)
        out.append(v / np.linalg.norm(v))
    return np.array(out, dtype=np.float32)


def make_static_model(folder: Path, *, dim: int = 6, seed: int = 3, normalize: bool = True,
                      weights: bool = False, words: tuple[str, ...] | list[str] = WORDS,
                      dtype: Any = np.float32) -> np.ndarray:
    """A model2vec folder; returns its embedding table."""
    from safetensors.numpy import save_file

    make_tokenizer(folder, words)
    n = len(vocab(words))
    rng = np.random.default_rng(seed)
    table = rng.normal(size=(n, dim)).astype(dtype)
    tensors = {"embeddings": table}
    if weights:
        tensors["weights"] = np.linspace(0.5, 1.5, n).astype(np.float32)
    save_file(tensors, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({
        "model_type": "model2vec", "architectures": ["StaticModel"], "hidden_dim": dim,
        "normalize": normalize, "max_length": 512}))
    return table
