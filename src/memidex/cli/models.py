"""The model commands: ``models list|verify|import|distill|embed``, thin typer commands over
:class:`memidex.vectors.ModelCache` (docs/vectors.md).

Registered on :data:`memidex.cli.base.app` when :mod:`memidex.cli.commands` imports
this module. Errors are raised, never turned into exit codes here. The model cache is a
user-level folder, so these commands also work outside a memidex repository (the
defaults and ``MEMIDEX_MODEL_CACHE_DIR`` then apply).
"""


import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memidex.cli.base import STATE, JsonOpt, app
from memidex.errors import UsageError

if TYPE_CHECKING:
    from memidex.vectors.cache import ModelCache

__all__: list[str] = []

models_app = typer.Typer(
    help="Embedding models in the local model cache (model_cache_dir, "
    "MEMIDEX_MODEL_CACHE_DIR; default ~/.cache/memidex/models): list them, verify their "
    "checksums, import a model folder you have, distill a static floor. Nothing is ever "
    "downloaded.",
    no_args_is_help=True,
)
app.add_typer(models_app, name="models")

CacheOpt = Annotated[Path | None, typer.Option(
    "--cache-dir", help="The model cache folder (overrides model_cache_dir and "
    "MEMIDEX_MODEL_CACHE_DIR).")]


def _cache(cache_dir: Path | None) -> "ModelCache":
    from memidex.config import load_config
    from memidex.errors import NotFoundError
    from memidex.vectors.cache import ModelCache

    overrides = {"model_cache_dir": str(cache_dir)} if cache_dir is not None else None
    try:
        config = load_config(STATE.root, overrides=overrides)
    except NotFoundError:
        if STATE.root is not None:
            raise
        config = load_config(Path.cwd(), overrides=overrides)  # outside a repository
    return ModelCache.from_config(config)


def _json(obj: Any) -> None:
    from memidex.cli.render import print_json

    print_json(obj)


def _t(text: object) -> str:
    from memidex.cli.plain import safe

    return safe(str(text))


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


@models_app.command("list")
def list_models(cache_dir: CacheOpt = None, json_out: JsonOpt = False) -> None:
    """The models in the cache: each one's level (memidex: the full model, static-floor:
    the static model), dimension, size and any problem a quick look finds (a missing or
    resized file; `models verify` re-hashes them).

    --json: {cache_dir, models: [{name, ok, kind, level, model_id, dim, pooling, bytes,
    derived_from, problems}]}.
    """
    cache = _cache(cache_dir)
    entries = cache.entries()
    if json_out:
        _json({"cache_dir": str(cache.root), "models": [e.as_dict() for e in entries]})
        return
    if not entries:
        sys.stdout.write(f"no models in {_t(cache.root)}: `memidex models import PATH` "
                         "puts a model folder you have there (docs/vectors.md)\n")
        return
    sys.stdout.write(f"{_t(cache.root)}:\n")
    for e in entries:
        d = e.as_dict()
        state = "ok" if e.ok else "PROBLEM"
        sys.stdout.write(f"  {_t(e.name):32} {_t(d['level'] or '-'):13} "
                         f"{d['dim'] or '-':>4}-d  {_size(d['bytes']):>9}  {state}\n")
        for p in e.problems:
            sys.stdout.write(f"      {_t(p)}\n")


@models_app.command("verify")
def verify(
    name: Annotated[str | None, typer.Argument(metavar="[NAME]", help="One model (default: "
                                               "every model).")] = None,
    cache_dir: CacheOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Re-hash every file of the model(s) against the manifest written at import; exit 1
    when a file changed, is missing, or is not in the manifest.

    --json: {cache_dir, ok, models: [{name, ok, checked, problems}]}.
    """
    from memidex.vectors.errors import ModelVerifyFailed

    cache = _cache(cache_dir)
    results = cache.verify(name)
    bad = [r for r in results if not r.ok]
    if json_out:
        _json({"cache_dir": str(cache.root), "ok": not bad,
               "models": [r.as_dict() for r in results]})
    else:
        if not results:
            sys.stdout.write(f"no models in {_t(cache.root)}\n")
        for r in results:
            sys.stdout.write(f"{'ok' if r.ok else 'FAILED':6} {_t(r.name)} "
                             f"({len(r.checked)} file(s) checked)\n")
            for p in r.problems:
                sys.stdout.write(f"       {_t(p)}\n")
    if bad:
        raise ModelVerifyFailed(f"{len(bad)} model(s) failed verification: "
                                f"{', '.join(r.name for r in bad)}",
                                hint="import the model again: `memidex models import PATH "
                                "--replace`")


@models_app.command("import")
def import_model(
    path: Annotated[Path, typer.Argument(metavar="PATH", help="A model folder: an ONNX "
                                         "export (model.onnx or onnx/model.onnx, with "
                                         "tokenizer.json) or a model2vec folder.")],
    name: Annotated[str | None, typer.Option("--name", help="The model's name in the "
                                             "cache (default: the folder's name).")] = None,
    pooling: Annotated[str | None, typer.Option(
        "--pooling", help="cls or mean (default: the folder's 1_Pooling/config.json).")
    ] = None,
    query_prefix: Annotated[str | None, typer.Option(
        "--query-prefix", help="Text put before each query (some models want one).")
    ] = None,
    max_length: Annotated[int | None, typer.Option(
        "--max-length", min=1, help="Tokens per text (default: the model's own).")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Replace a model of the same "
                                          "name.")] = False,
    cache_dir: CacheOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Copy a model folder you have into the model cache with a checksum manifest, after
    loading it once (a broken model is refused with the runtime's reason). Says which
    search level it serves.

    --json: {name, path, ok, kind, level, model_id, dim, pooling, bytes, change, files}.
    """
    if pooling is not None and pooling not in ("cls", "mean"):
        raise UsageError(f"--pooling {pooling!r}: use cls or mean")
    cache = _cache(cache_dir)
    result = cache.import_model(path, name=name, pooling=pooling,  # type: ignore[arg-type]
                                query_prefix=query_prefix, max_length=max_length,
                                replace_existing=replace)
    if json_out:
        _json(result.as_dict())
        return
    d = result.entry.as_dict()
    sys.stdout.write(f"{result.change} {_t(d['name'])}: {d['kind']} model, {d['dim']}-d, "
                     f"serves the {d['level']} level\n  {_t(d['path'])}\n")


@models_app.command("distill")
def distill(
    source: Annotated[str | None, typer.Option("--from", help="The full model to distill "
                                               "(default: the first in the cache).")
                      ] = None,
    name: Annotated[str | None, typer.Option("--name", help="The static model's name "
                                             "(default: <full model>-static).")] = None,
    dims: Annotated[int, typer.Option("--dims", min=2, help="Components kept by PCA.")
                    ] = 256,
    min_fidelity: Annotated[float | None, typer.Option(
        "--min-fidelity", help="Keep it only if its pairwise similarities correlate at "
        "least this much with the full model's (Spearman).")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Replace a model of the same "
                                          "name.")] = False,
    cache_dir: CacheOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Derive a static floor (model2vec format) from the full model in the cache: embed
    each vocabulary token once, reduce with PCA, weight by token rank; measure it against
    the full model and import it only if it measures well.

    --json: {name, ..., source_model_id, tokens, dims, explained_variance, fidelity,
    seconds, change}.
    """
    from memidex.vectors.distillation import MIN_FIDELITY
    from memidex.vectors.distillation import distill as run

    report = run(_cache(cache_dir), source=source, name=name, dims=dims,
                 min_fidelity=MIN_FIDELITY if min_fidelity is None else min_fidelity,
                 replace_existing=replace)
    if json_out:
        _json(report.as_dict())
        return
    sys.stdout.write(f"{report.change} {_t(report.entry.name)}: static floor from "
                     f"{_t(report.source_model_id)}, {report.tokens} tokens × "
                     f"{report.dims} dims, fidelity {report.fidelity:.3f} (Spearman vs the "
                     f"full model), {report.seconds:.1f} s\n")


@models_app.command("embed")
def embed(cache_dir: CacheOpt = None, json_out: JsonOpt = False) -> None:
    """Give every record of the index a vector of the cache's best model (the full model,
    else the static floor), with progress: the records changed since the last time are
    embedded, the others read from the vectors cache beside the index. A vector search
    embeds at most a few seconds' worth itself and uses sparse vectors meanwhile; this
    computes them all (a full model embeds ~20 records a second on 2 cores).

    --json: {model_id, level, records, embedded, reused, missing, seconds, reasons?}
    (model_id null and reasons when no model loads).
    """
    from memidex.app import Memidex
    from memidex.cli import plain

    overrides = {"model_cache_dir": str(cache_dir)} if cache_dir is not None else None
    with Memidex(STATE.root, overrides=overrides) as m:
        report = plain.with_progress("embedding records", lambda cb: m.embed_vectors(
            progress=cb), quiet=json_out)
    if json_out:
        _json(report.to_json())
    else:
        plain.vectors_text(report)
