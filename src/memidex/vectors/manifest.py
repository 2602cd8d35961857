"""The checksum manifest of a cached model, ``memidex-model.json`` (format 1): what
``models import`` writes and every reader checks (docs/vectors.md, "The model cache")."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from memidex.vectors.errors import ModelCacheError

__all__ = ["FORMAT", "MANIFEST", "Kind", "Manifest", "level_of"]

MANIFEST = "memidex-model.json"
FORMAT = 1

Kind = Literal["onnx", "static"]


def level_of(kind: str) -> str:
    """The search level a model of ``kind`` serves."""
    return "memidex" if kind == "onnx" else "static-floor"



@dataclass(frozen=True)
class Manifest:
    name: str
    kind: Kind
    dim: int
    files: Mapping[str, Mapping[str, Any]]
    pooling: Literal["cls", "mean"] = "mean"
    normalize: bool = True
    max_length: int = 512
    query_prefix: str = ""
    source: str = ""
    derived_from: str | None = None
    format: int = FORMAT

    @property
    def level(self) -> str:
        return level_of(self.kind)

    @property
    def digest(self) -> str:
        """SHA-256 over the files' names and hashes: the model's content identity."""
        h = hashlib.sha256()
        for name in sorted(self.files):
            h.update(f"{name}\x1f{self.files[name]['sha256']}\n".encode())
        h.update(f"{self.pooling}\x1f{self.max_length}\x1f{self.query_prefix}".encode())
        return h.hexdigest()

    @property
    def model_id(self) -> str:
        """``name@`` and 12 hex digits of :attr:`digest`: what the index stores beside
        each vector, so vectors of another model (or other files) are never mixed."""
        return f"{self.name}@{self.digest[:12]}"

    def as_dict(self) -> dict[str, Any]:
        return {"format": self.format, "name": self.name, "kind": self.kind,
                "level": self.level, "model_id": self.model_id, "dim": self.dim,
                "pooling": self.pooling, "normalize": self.normalize,
                "max_length": self.max_length, "query_prefix": self.query_prefix,
                "files": {k: dict(v) for k, v in sorted(self.files.items())},
                "source": self.source, "derived_from": self.derived_from}

    @classmethod
    def parse(cls, data: Any, where: str) -> Manifest:
        def bad(why: str) -> ModelCacheError:
            return ModelCacheError(f"{where}: {why}", hint="import the model again: "
                                   "`memidex models import PATH --replace`")

        if not isinstance(data, dict):
            raise bad("not a JSON object")
        if data.get("format") != FORMAT:
            raise bad(f"unknown manifest format {data.get('format')!r} (this memidex "
                      f"reads format {FORMAT})")
        kind, pooling = data.get("kind"), data.get("pooling", "mean")
        files = data.get("files")
        if kind not in ("onnx", "static"):
            raise bad(f"kind must be onnx or static, got {kind!r}")
        if pooling not in ("cls", "mean"):
            raise bad(f"pooling must be cls or mean, got {pooling!r}")
        if not isinstance(files, dict) or not files or not all(
                isinstance(k, str) and isinstance(v, dict) and
                str(v.get("sha256", "")).startswith("sha256:") and
                isinstance(v.get("size"), int) for k, v in files.items()):
            raise bad("`files` must map file names to {sha256, size}")
        for key, typ in (("name", str), ("dim", int), ("max_length", int),
                         ("query_prefix", str), ("normalize", bool)):
            if key in data and not isinstance(data[key], typ):
                raise bad(f"`{key}` must be a {typ.__name__}")
        return cls(name=str(data.get("name", "")), kind=kind, dim=int(data.get("dim", 0)),
                   files=files, pooling=pooling, normalize=bool(data.get("normalize", True)),
                   max_length=int(data.get("max_length", 512)),
                   query_prefix=str(data.get("query_prefix", "")),
                   source=str(data.get("source", "")),
                   derived_from=data.get("derived_from"))
