"""The model cache: one folder per model under ``model_cache_dir`` (``memidex.toml``,
``MEMIDEX_MODEL_CACHE_DIR``; default ``~/.cache/memidex/models``), each with a checksum
manifest, ``memidex-model.json``, written when the model was imported.

* ``import_model(PATH)`` copies the files a model needs out of a folder you have (an
  ONNX sentence-embedding export with ``tokenizer.json``, or a model2vec folder), hashes
  them as it copies, loads the copy once (so a broken model is refused at import, with
  the runtime's reason), writes the manifest and moves the folder into place in one
  rename. Nothing is ever downloaded.
* ``verify()`` re-hashes every file against its manifest.
* Names are plain folder names; a name that would leave the cache, a model folder or
  file that is a symlink, or a file the manifest does not name, is refused.

The manifest (``format`` 1) holds: ``name``, ``kind`` (``onnx`` or ``static``), the
``level`` it serves, ``dim``, ``pooling``, ``normalize``, ``max_length``,
``query_prefix``, ``files`` (``{file: {"sha256": "sha256:…", "size": N}}``), ``source``
(the folder it was imported from), ``derived_from`` (a distilled model's full model).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from memidex.vectors.errors import ModelCacheError, ModelUnavailable, UnsafeModelPath
from memidex.vectors.manifest import MANIFEST, Kind, Manifest, level_of

if TYPE_CHECKING:
    from memidex.config import Config
    from memidex.vectors.embedders import Embedder

__all__ = ["MANIFEST", "Manifest", "ModelCache", "ModelEntry", "cache_dir_of", "level_of"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$")
_PROVENANCE = ("LICENSE", "LICENSE.txt", "LICENSE.md", "NOTICE", "README.md")
_PROVENANCE_MAX = 1 << 20
_CHUNK = 1 << 20


def cache_dir_of(config: Config) -> Path:
    """The model cache folder of a configuration (``~`` expanded; a relative path is
    relative to the repository root)."""
    path = Path(config.model_cache_dir).expanduser()
    return path if path.is_absolute() else config.root / path


@dataclass(frozen=True)
class ModelEntry:
    """One folder of the cache, as listed (a quick look: manifest and file sizes)."""

    name: str
    path: Path
    manifest: Manifest | None
    problems: tuple[str, ...] = ()

    @property
    def kind(self) -> str | None:
        return self.manifest.kind if self.manifest else None

    @property
    def level(self) -> str | None:
        return self.manifest.level if self.manifest else None

    @property
    def ok(self) -> bool:
        return self.manifest is not None and not self.problems

    def as_dict(self) -> dict[str, Any]:
        m = self.manifest
        return {"name": self.name, "path": str(self.path), "ok": self.ok,
                "kind": self.kind, "level": self.level,
                "model_id": m.model_id if m else None, "dim": m.dim if m else None,
                "pooling": m.pooling if m else None,
                "bytes": sum(int(f["size"]) for f in m.files.values()) if m else None,
                "derived_from": m.derived_from if m else None,
                "problems": list(self.problems)}


@dataclass(frozen=True)
class VerifyResult:
    name: str
    ok: bool
    checked: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "checked": list(self.checked),
                "problems": list(self.problems)}


@dataclass(frozen=True)
class ImportResult:
    entry: ModelEntry
    change: Literal["added", "replaced", "unchanged"]
    files: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return {**self.entry.as_dict(), "change": self.change, "files": list(self.files)}


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return f"sha256:{h.hexdigest()}"


def _copy_hashing(src: Path, dst: Path) -> dict[str, Any]:
    """Copy ``src`` (a symlink in the source is followed: the bytes are copied) to the new
    file ``dst``, fsynced; its hash and size."""
    h = hashlib.sha256()
    size = 0
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        with open(src, "rb") as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
                size += len(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    return {"sha256": f"sha256:{h.hexdigest()}", "size": size}


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None


class ModelCache:
    """The folder of models. Nothing here downloads; ``root`` may not exist yet."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @classmethod
    def from_config(cls, config: Config) -> ModelCache:
        return cls(cache_dir_of(config))

    # --- names and paths -------------------------------------------------------------

    def path_of(self, name: str) -> Path:
        """The folder of model ``name``; refuses a name that is not a plain folder name
        and a folder that is a symlink."""
        if not _NAME.match(name) or ".." in name:
            raise UnsafeModelPath(f"model name {name!r} is not a plain folder name "
                                  "(letters, digits, . _ + -, not starting with a dot)")
        path = self.root / name
        if path.is_symlink():
            raise UnsafeModelPath(f"{path} is a symlink: the model cache keeps real "
                                  "folders only")
        return path

    def _file(self, folder: Path, name: str) -> Path:
        """A file of a model folder named by its manifest: inside it, no symlink."""
        if "/" in name or "\\" in name or name in ("", ".", "..") or name.startswith("."):
            raise UnsafeModelPath(f"{folder / MANIFEST} names the file {name!r}, which is "
                                  "not a plain file name inside the model's folder")
        path = folder / name
        if path.is_symlink():
            raise UnsafeModelPath(f"{path} is a symlink: the model cache keeps real "
                                  "files only")
        return path

    # --- listing ------------------------------------------------------------------------

    def _names(self) -> list[str]:
        try:
            return sorted(p.name for p in self.root.iterdir() if not p.name.startswith("."))
        except FileNotFoundError:
            return []
        except NotADirectoryError:
            raise ModelCacheError(f"the model cache {self.root} is not a folder") from None

    def entry(self, name: str) -> ModelEntry:
        path = self.path_of(name)
        if not path.is_dir():
            raise ModelUnavailable(f"no model {name!r} in the model cache {self.root}",
                                   hint="`memidex models list` shows the models there are")
        data = _read_json(path / MANIFEST)
        if data is None:
            return ModelEntry(name, path, None, (f"{name}: no readable {MANIFEST} (not "
                                                 "put there by `memidex models import`)",))
        try:
            manifest = Manifest.parse(data, str(path / MANIFEST))
        except ModelCacheError as exc:
            return ModelEntry(name, path, None, (exc.message,))
        if manifest.name != name:
            manifest = replace(manifest, name=name)
        problems = []
        for fname, info in sorted(manifest.files.items()):
            try:
                fpath = self._file(path, fname)
                size = fpath.stat().st_size
            except UnsafeModelPath as exc:
                problems.append(exc.message)
                continue
            except OSError:
                problems.append(f"{name}: {fname} is missing")
                continue
            if not fpath.is_file():
                problems.append(f"{name}: {fname} is not a regular file")
            elif size != info["size"]:
                problems.append(f"{name}: {fname} is {size} bytes, its manifest says "
                                f"{info['size']} (changed or truncated)")
        return ModelEntry(name, path, manifest, tuple(problems))

    def entries(self) -> list[ModelEntry]:
        """Every model folder of the cache, by name (a symlinked folder is listed with
        the refusal as its problem)."""
        out = []
        for name in self._names():
            try:
                out.append(self.entry(name))
            except UnsafeModelPath as exc:
                out.append(ModelEntry(name, self.root / name, None, (exc.message,)))
        return out

    def of_kind(self, kind: Kind) -> Iterator[ModelEntry]:
        return (e for e in self.entries() if e.kind == kind)

    # --- verify -------------------------------------------------------------------------

    def verify(self, name: str | None = None) -> list[VerifyResult]:
        """Re-hash the files of one model (or every model) against the manifest."""
        entries = [self.entry(name)] if name is not None else self.entries()
        out = []
        for e in entries:
            problems = list(e.problems)
            checked = []
            if e.manifest is not None:
                for fname, info in sorted(e.manifest.files.items()):
                    try:
                        fpath = self._file(e.path, fname)
                        if not fpath.is_file():
                            continue  # already reported by entry()
                        digest = _sha256_file(fpath)
                    except UnsafeModelPath:
                        continue
                    except OSError as exc:
                        problems.append(f"{e.name}: cannot read {fname}: "
                                        f"{exc.strerror or exc}")
                        continue
                    checked.append(fname)
                    if digest != info["sha256"]:
                        problems.append(f"{e.name}: {fname} does not match its checksum "
                                        f"(manifest {info['sha256'][:19]}…, file "
                                        f"{digest[:19]}…)")
                try:
                    present = {p.name for p in e.path.iterdir()}
                except OSError:
                    present = set()
                for extra in sorted(present - set(e.manifest.files) - {MANIFEST}):
                    problems.append(f"{e.name}: {extra} is not in the manifest")
            out.append(VerifyResult(e.name, not problems, tuple(checked),
                                    tuple(dict.fromkeys(problems))))
        return out

    # --- loading ------------------------------------------------------------------------

    def load(self, entry: ModelEntry | str, *, threads: int = 0) -> Embedder:
        """The embedder of a cached model, or :class:`ModelUnavailable` with the reason
        (missing runtime, broken file, a file changed since import)."""
        e = self.entry(entry) if isinstance(entry, str) else entry
        if e.manifest is None or e.problems:
            raise ModelUnavailable(e.problems[0] if e.problems else
                                   f"{e.name}: no manifest")
        return _load(e.path, e.manifest, threads=threads)

    # --- import -------------------------------------------------------------------------

    def import_model(self, source: Path, *, name: str | None = None,
                     pooling: Literal["cls", "mean"] | None = None,
                     query_prefix: str | None = None, max_length: int | None = None,
                     replace_existing: bool = False,
                     derived_from: str | None = None) -> ImportResult:
        """Put the model folder ``source`` into the cache (see the module docstring)."""
        source = Path(source)
        if not source.is_dir():
            raise ModelCacheError(f"{source} is not a folder",
                                  hint="give the folder that holds model.onnx and "
                                  "tokenizer.json (or a model2vec folder)")
        kind, files, detected = _detect(source)
        chosen = name if name is not None else _default_name(source)
        dest = self.path_of(chosen)
        pool = pooling or detected.get("pooling")
        if kind == "onnx" and pool is None:
            raise ModelCacheError(f"{source}: cannot tell the model's pooling (no "
                                  "1_Pooling/config.json)",
                                  hint="pass --pooling cls (BGE models) or --pooling mean "
                                  "(MiniLM, most sentence-transformers models)")
        manifest = Manifest(name=chosen, kind=kind, dim=0, files={},
                            pooling=pool if pool in ("cls", "mean") else "mean",
                            max_length=max_length or int(detected.get("max_length", 512)),
                            query_prefix=query_prefix if query_prefix is not None else "",
                            source=str(source.resolve()), derived_from=derived_from)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ModelCacheError(f"cannot create the model cache {self.root}: "
                                  f"{exc.strerror or exc}") from None
        self._clean_staging()
        import secrets

        from memidex.store.fsio import fsync_dir, swap_into_place, write_new

        staging = self.root / f".import-{chosen}.{os.getpid()}.{secrets.token_hex(4)}"
        staging.mkdir()
        try:
            hashes = {dst: _copy_hashing(src, staging / dst) for dst, src in files.items()}
            manifest = replace(manifest, files=hashes)
            try:
                embedder = _load(staging, manifest)
            except ModelUnavailable as exc:
                raise ModelCacheError(f"{source}: the model does not load: {exc.message}",
                                      hint=exc.hint) from None
            manifest = replace(manifest, dim=embedder.dim)
            write_new(staging / MANIFEST, (json.dumps(manifest.as_dict(), indent=1,
                                                      sort_keys=True) + "\n").encode())
            fsync_dir(staging)
            change: Literal["added", "replaced", "unchanged"] = "added"
            if dest.exists():
                old = self.entry(chosen)
                if old.manifest is not None and not old.problems and \
                        old.manifest.model_id == manifest.model_id and \
                        self.verify(chosen)[0].ok:  # the same files, and still intact
                    shutil.rmtree(staging)
                    return ImportResult(old, "unchanged", tuple(sorted(files)))
                if not replace_existing:
                    raise ModelCacheError(f"a model named {chosen!r} is already in the "
                                          f"model cache {self.root}",
                                          hint="pass --replace to replace it, or --name "
                                          "to import this one beside it")
                aside = self.root / f".old-{chosen}.{os.getpid()}"
                swap_into_place(dest, aside)
                swap_into_place(staging, dest)
                shutil.rmtree(aside, ignore_errors=True)
                change = "replaced"
            else:
                swap_into_place(staging, dest)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        return ImportResult(self.entry(chosen), change, tuple(sorted(files)))

    def _clean_staging(self) -> None:
        """Remove what a killed import left (``.import-*``/``.old-*`` of a dead pid)."""
        for p in self.root.glob(".*"):
            if not (p.name.startswith(".import-") or p.name.startswith(".old-")):
                continue
            try:
                pid = int(p.name.rsplit(".", 2)[1] if p.name.startswith(".import-")
                          else p.name.rsplit(".", 1)[1])
            except (ValueError, IndexError):
                continue
            if pid == os.getpid():
                continue
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                shutil.rmtree(p, ignore_errors=True)
            except PermissionError:
                pass


def _load(folder: Path, manifest: Manifest, *, threads: int = 0) -> Embedder:
    from memidex.vectors.embedders import OnnxEmbedder, StaticEmbedder

    if manifest.kind == "onnx":
        return OnnxEmbedder(folder, manifest, threads=threads)
    return StaticEmbedder(folder, manifest)


def _default_name(source: Path) -> str:
    base = source.resolve().name
    if base == "onnx":
        base = source.resolve().parent.name
    clean = re.sub(r"[^A-Za-z0-9._+-]+", "-", base).strip(".-") or "model"
    return clean[:100]


def _detect(source: Path) -> tuple[Kind, dict[str, Path], dict[str, Any]]:
    """What kind of model ``source`` holds, the files to copy (cache name → source
    path) and what its config files say (pooling, max_length)."""
    detected: dict[str, Any] = {}
    files: dict[str, Path] = {}
    tokenizer = source / "tokenizer.json"
    onnx = next((p for p in (source / "model.onnx", source / "onnx" / "model.onnx")
                 if p.is_file()), None)
    if onnx is None:
        found = sorted(source.glob("*.onnx")) or sorted((source / "onnx").glob("*.onnx"))
        onnx = found[0] if len(found) == 1 else None
    if onnx is not None:
        if not tokenizer.is_file() and (onnx.parent / "tokenizer.json").is_file():
            tokenizer = onnx.parent / "tokenizer.json"
        if not tokenizer.is_file():
            raise ModelCacheError(f"{source}: has {onnx.name} but no tokenizer.json",
                                  hint="the tokenizer.json of the same model must be in "
                                  "the folder")
        files["model.onnx"] = onnx
        for extra in (onnx.parent / f"{onnx.name}_data", onnx.parent / f"{onnx.name}.data",
                      onnx.parent / "model.onnx_data"):
            if extra.is_file():
                files[extra.name] = extra
        files["tokenizer.json"] = tokenizer
        pooling = _read_json(source / "1_Pooling" / "config.json")
        if isinstance(pooling, dict):
            if pooling.get("pooling_mode_cls_token"):
                detected["pooling"] = "cls"
            elif pooling.get("pooling_mode_mean_tokens"):
                detected["pooling"] = "mean"
        sbert = _read_json(source / "sentence_bert_config.json")
        tcfg = _read_json(source / "tokenizer_config.json")
        if isinstance(sbert, dict) and isinstance(sbert.get("max_seq_length"), int):
            detected["max_length"] = sbert["max_seq_length"]
        elif isinstance(tcfg, dict) and isinstance(tcfg.get("model_max_length"), int) and \
                tcfg["model_max_length"] <= 8192:
            detected["max_length"] = tcfg["model_max_length"]
        kind: Kind = "onnx"
    elif (source / "model.safetensors").is_file():
        config = _read_json(source / "config.json")
        if not _is_static(source / "model.safetensors", config):
            raise ModelCacheError(
                f"{source}: model.safetensors holds a transformer, not static token "
                "vectors (memidex runs transformers as ONNX)",
                hint="export it to ONNX first (bench/retrieval/export_onnx.py does it "
                "without torch), then import the exported folder")
        if not tokenizer.is_file():
            raise ModelCacheError(f"{source}: a model2vec folder needs its tokenizer.json")
        files["model.safetensors"] = source / "model.safetensors"
        files["tokenizer.json"] = tokenizer
        if (source / "config.json").is_file():
            files["config.json"] = source / "config.json"
        if isinstance(config, dict) and isinstance(config.get("max_length"), int):
            detected["max_length"] = config["max_length"]
        detected["pooling"] = "mean"
        kind = "static"
    else:
        raise ModelCacheError(f"{source}: neither an ONNX model (model.onnx or "
                              "onnx/model.onnx, with tokenizer.json) nor a model2vec "
                              "folder (model.safetensors, tokenizer.json, config.json)")
    for prov in _PROVENANCE:
        p = source / prov
        if p.is_file() and p.stat().st_size <= _PROVENANCE_MAX:
            files[prov] = p
    return kind, files, detected


def _is_static(path: Path, config: Any) -> bool:
    if isinstance(config, dict) and config.get("model_type") == "model2vec":
        return True
    try:
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(min(n, 1 << 20)).decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    names = set(header) - {"__metadata__"} if isinstance(header, dict) else set()
    return bool(names) and names <= {"embeddings", "weights", "mapping", "embedding.weight"}
