"""The ``memidex`` commands: a thin typer layer over :class:`memidex.app.Memidex`.

Each command parses its arguments, calls one library method and renders the result.
:mod:`memidex.cli.main` runs them and is the one place that maps
:class:`MemidexError` to an exit code and a one-line ``error:`` message.
"""


import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memidex.cli.base import (
    STATE,
    AllProductsOpt,
    AnchorOpt,
    IdArg,
    JsonOpt,
    KindOpt,
    ListFormatOpt,
    ProductOpt,
    WaitOpt,
    app,
    knowledge,
    memidex,
)
from memidex.cli.fast import (
    DoctorArgs,
    RebuildArgs,
    SearchArgs,
    open_memidex,
    run_doctor,
    run_rebuild,
    run_search,
)
from memidex.errors import ProblemsFound, UsageError

if TYPE_CHECKING:
    from memidex.app import Memidex

__all__ = ["STATE", "app", "knowledge"]

# --- init and doctor -----------------------------------------------------------------


BODY_FILE_MAX = 1 << 20
"""The largest --body-file memidex reads (1 MiB): a record is a note a person reviews."""


def _read_body_file(name: str) -> str:
    """The text of ``--body-file`` (``-``: standard input), refused above
    :data:`BODY_FILE_MAX` bytes or when it is not UTF-8 — never read whole first."""
    from memidex.errors import InvalidInputError

    try:
        if name == "-":
            data = sys.stdin.buffer.read(BODY_FILE_MAX + 1)
        else:
            with open(name, "rb") as f:
                data = f.read(BODY_FILE_MAX + 1)
        if len(data) > BODY_FILE_MAX:
            raise InvalidInputError(f"--body-file {name} is over {BODY_FILE_MAX} bytes",
                                    hint="a record's body is a note for a reviewer: "
                                    "keep it short, link to large artifacts")
        return data.decode("utf-8")
    except FileNotFoundError:
        raise InvalidInputError(f"--body-file {name} does not exist",
                                hint="give the path of a UTF-8 text file, or - to read "
                                "standard input") from None
    except IsADirectoryError:
        raise InvalidInputError(f"--body-file {name} is a folder, not a file") from None
    except PermissionError:
        raise InvalidInputError(f"--body-file {name} cannot be read: permission denied"
                                ) from None
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"cannot read --body-file {name}: it is not UTF-8 text "
                                f"(byte {exc.start:,})") from None
    except OSError as exc:
        raise InvalidInputError(f"cannot read --body-file {name}: "
                                f"{exc.strerror or exc}") from None


@app.command()
def init(
    product: Annotated[
        str | None,
        typer.Option("--product", "-p", help="The default product written to memidex.toml "
                     "(default: the git remote's repository name, else the folder name)."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Create the memidex layout here (records, policies, memidex.toml naming the product,
    .gitignore entries) and build the empty index.

    Idempotent: running it again changes nothing. Warns when not inside a git repository.

    --json: {root, created, changed, product, warnings} (docs/schemas/init.schema.json).
    """
    from memidex.store.layout import init_repository, init_root

    root = STATE.root.resolve() if STATE.root else init_root(Path.cwd())
    report = init_repository(root, product=product)
    for warning in report.warnings:
        sys.stderr.write(f"warning: {warning}\n")
    with open_memidex(root) as m:
        built = _build_missing_index(m, quiet=json_out)
    if built:
        report.created.append(built)
    if json_out:
        from memidex.cli.render import print_json

        print_json(report.as_dict())
        return
    if report.created:
        sys.stdout.write(f"initialised memidex in {root}\n")
        for item in report.created:
            sys.stdout.write(f"  created {item}\n")
        if report.product_source:
            sys.stdout.write(f"  product {report.product} ({report.product_source}; "
                             "change it in memidex.toml)\n")
    else:
        sys.stdout.write(f"memidex is already initialised in {root}; nothing changed\n")


def _build_missing_index(m: "Memidex", *, quiet: bool) -> str | None:
    """Build the index when there is none yet (``init``), so ``doctor`` and ``search``
    answer from it at once after the first ``add``; the index path built, or None. A
    writer holding the lease (a daemon) leaves it to a later rebuild."""
    from memidex.cli import plain
    from memidex.errors import LeaseError

    path = m.config.index_path
    if path.exists():
        return None
    try:
        plain.with_progress("indexing records", lambda cb: m.rebuild_index(progress=cb),
                            quiet=quiet)
    except LeaseError:
        return None
    return m.store.rel(path) + " (index)"


@app.command()
def doctor(
    deep: Annotated[bool, typer.Option("--deep", help="Also run SQLite's quick_check over "
                                       "every page of the index (about 1 s at 100,000 "
                                       "records; otherwise only when something looks "
                                       "wrong).")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Report the search level, index health, staleness, record errors, lease and config,
    and whether a warm server answered (`serving`).

    Exits 1 when something is unhealthy (no index, a damaged index, or bad records).

    --json: {healthy, level, levels, index, records: {count, errors: [{path, line,
    reason}]}, lease, yaml, config, serving: {path: warm|one-shot, ...}}
    (docs/schemas/doctor.schema.json).
    """
    run_doctor(DoctorArgs(STATE.root, deep, json_out))


# --- knowledge -----------------------------------------------------------------------


@knowledge.command("rebuild-index")
def rebuild_index(
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", min=1,
                                             help="Parser processes (default: CPU count).")
                    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Build the index from every record and policy into a new file and swap it in.

    Readers never see a half-built index; two rebuilds over the same files give the same
    contents.

    --json: {path (relative to the root), records, policies, seconds, errors: [{path,
    line, reason}]} (docs/schemas/rebuild-index.schema.json).
    """
    run_rebuild(RebuildArgs(root=STATE.root, jobs=jobs, json_out=json_out))


@knowledge.command()
def search(
    query: Annotated[str, typer.Argument(help="Words to search for (searched as plain text).")],
    product: ProductOpt = None,
    all_products: AllProductsOpt = False,
    kind: KindOpt = None,
    status: Annotated[
        list[str] | None,
        typer.Option("--status", "-s", help="Only this status; repeatable; `any` for every "
                     "status (default: active and candidate)."),
    ] = None,
    anchor: AnchorOpt = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="Show at most this many "
                                       "results.")] = 10,
    json_out: JsonOpt = False,
    near: Annotated[
        list[str] | None,
        typer.Option("--near", help="Rank results sharing this anchor higher (type:value; "
                     "a trailing * matches a prefix); repeatable. Results carry reasons."),
    ] = None,
    strategy: Annotated[str, typer.Option(
        "--strategy", help="lexical (BM25), vector (the best level's vectors: full model, "
        "static floor, or sparse tf·idf) or hybrid (vector first, full text appended when "
        "the page is unfilled).")] = "lexical",
    fusion: Annotated[str, typer.Option(
        "--fusion", help="How hybrid merges: append (the rule above) or rrf "
        "(reciprocal-rank fusion).")] = "append",
) -> None:
    """Search one product's records, best first, with snippets: by keywords (BM25, the
    default), by meaning (--strategy vector) or both (--strategy hybrid).

    --near ANCHOR ranks by BM25 × (1 + anchors shared with --near), words matched first.
    Vectors come from the model cache (`memidex models list`); with no model the vector
    strategy is sparse tf·idf. Each strategy has its own confidence thresholds
    (docs/vectors.md).

    With a team index configured ([index] url or MEMIDEX_INDEX_URL) it answers from
    that, else (unreachable, behind this clone, or a vector strategy) from the local index
    with a warning.

    --json: {query, product, level, strategy, vector_strategy?, fallback?, results:
    [{id, kind, status, title, score, confidence, snippet, path, anchors, product,
    matched_terms, reasons?}], note?, source (team or local), commit}; anchors are every
    anchor, the main one first; reasons with --near or --strategy hybrid
    (docs/schemas/search.schema.json).
    """
    run_search(SearchArgs(root=STATE.root, query=query, product=product,
                          all_products=all_products, kind=kind or [], status=status or [],
                          anchor=anchor or [], limit=limit, json_out=json_out,
                          near=near or [], strategy=strategy, fusion=fusion))


@knowledge.command()
def show(
    record_id: IdArg,
    raw: Annotated[bool, typer.Option("--raw", help="Print the file exactly as stored (control "
                                      "characters as spaces on a terminal).")
                   ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Show one record.

    --json: the record: {id, path, kind, status, product, anchor (the main anchor),
    title, anchors (every anchor, main first), trust, valid, scope, body, relations,
    evidence, history, duplicates, note?, source (team or local), commit}
    (docs/schemas/show.schema.json).
    """
    from memidex.cli import views

    with memidex(reading=True) as m:
        shown = m.show(record_id)
    from memidex.cli.render import warn

    warn(shown.warning)  # the local index answered although a team index is configured
    if json_out:
        from memidex.cli.render import print_json

        print_json(shown.to_json())
    elif raw:  # the file as stored; on a terminal, its control characters as spaces
        from memidex.cli.plain import safe

        sys.stdout.write(safe(shown.text, lines=True) if sys.stdout.isatty() else shown.text)
    else:
        from memidex.cli.term import paged

        with paged():
            views.show(shown)


@knowledge.command("list")
def list_(
    product: ProductOpt = None,
    all_products: AllProductsOpt = False,
    kind: KindOpt = None,
    status: Annotated[
        list[str] | None,
        typer.Option("--status", "-s", help="Only this status; repeatable (default: every "
                     "status)."),
    ] = None,
    anchor: AnchorOpt = None,
    limit: Annotated[int | None, typer.Option("--limit", "-n", min=1,
                                              help="Show at most this many records "
                                              "(default: all).")] = None,
    fmt: ListFormatOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List records of a product, by kind then id (with a product column under
    --all-products).

    On a terminal a table (paged when long); otherwise tab-separated values: kind,
    status, id, title (product first under --all-products).

    --json: {count, records: [{id, path, kind, status, product, anchor, title, anchors,
    trust, valid}], note?, source (team or local), commit}
    (docs/schemas/list.schema.json).
    """
    from memidex.cli import views
    from memidex.cli.term import listing_format

    chosen = "json" if json_out else listing_format(fmt)
    with memidex(reading=True) as m:
        listing = m.list_records(product=product, all_products=all_products,
                                 kinds=kind or (), statuses=status, anchors=anchor or (),
                                 limit=limit)
    from memidex.cli.render import warn

    warn(listing.warning)  # the local index answered although a team index is configured
    if chosen == "json":
        from memidex.cli.render import print_json

        print_json(listing.to_json())
    else:
        views.listing(listing, chosen, products=all_products)


@knowledge.command()
def check(
    fmt: Annotated[str, typer.Option("--format", "-f", help="text, json or github "
                                     "(workflow annotations).")] = "text",
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout "
                                           "(the same as --format json).")] = False,
) -> None:
    """Validate every record and policy: schema, ids, duplicates, relations, locations.

    Reads the files themselves, not the index. Exits 1 when there are problems.

    --json (the same as --format json): {ok, records, policies, errors: [{path, line,
    reason}]} (docs/schemas/check.schema.json).
    """
    from memidex.cli import views

    if json_out:
        if fmt not in ("text", "json"):
            raise UsageError(f"give --json or --format {fmt}, not both")
        fmt = "json"
    if fmt not in ("text", "json", "github"):
        raise UsageError(f"unknown --format {fmt!r}: use text, json or github")
    from memidex.cli.plain import with_ticker

    with memidex(strict_config=False) as m:
        report = with_ticker("checking records", m.check, quiet=fmt != "text")
    views.check(report, fmt)
    if not report.ok:
        files = len({p.path for p in report.problems})
        raise ProblemsFound(f"{len(report.problems)} problem(s) in {files} file(s)",
                            hint="fix the files by hand; memidex never rewrites them")


@knowledge.command()
def add(
    kind: Annotated[str, typer.Option("--kind", "-k", help="fact, caution, procedure or "
                                      "unknown.")],
    anchor: Annotated[list[str], typer.Option("--anchor", "-a", help="type:value; the first "
                                              "is the main anchor; repeatable.")],
    title: Annotated[str, typer.Option("--title", "-t", help="One line a reviewer reads.")],
    product: ProductOpt = None,
    scope: Annotated[
        list[str] | None,
        typer.Option("--scope", help="key=value, part of the record's identity; repeatable."),
    ] = None,
    body: Annotated[str | None, typer.Option("--body", "-b", help="The record's text.")
                    ] = None,
    body_file: Annotated[
        str | None, typer.Option("--body-file", help="Read the text from a file, or - for "
                                 "standard input (UTF-8, at most 1 MiB).")
    ] = None,
    wait: WaitOpt = 10.0,
    json_out: JsonOpt = False,
) -> None:
    """Write a human-authored record (trust.source human, status active).

    Adding the same kind/anchor/product/scope again updates that record.

    --json: {id, path, status, change} (docs/schemas/add.schema.json).
    """
    if body is not None and body_file is not None:
        raise UsageError("give --body or --body-file, not both")
    text = body or ""
    if body_file is not None:
        text = _read_body_file(body_file)
    scope_map: dict[str, str] = {}
    for item in scope or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--scope {item!r} must be key=value")
        if key.strip() in scope_map:
            raise UsageError(f"--scope {key.strip()} is given twice",
                             hint="give each scope key once")
        scope_map[key.strip()] = value.strip()
    with memidex(wait=wait) as m:
        result = m.add(kind=kind, product=product, anchors=anchor, title=title, body=text,
                       scope=scope_map)
    if json_out:
        from memidex.cli.render import print_json

        print_json(result.to_json())
    else:
        from memidex.cli.plain import safe

        sys.stdout.write(f"{result.change} {safe(result.id)}\n  {safe(result.path)}\n")


@app.command("help")
def help_(
    command: Annotated[list[str] | None, typer.Argument(
        metavar="[COMMAND|TOPIC]...", help="A command (e.g. `knowledge search`, `runs`) "
        "or a documentation topic (e.g. `configuration`, `mcp`, `learning`).")
    ] = None,
) -> None:
    """Show a command's help (as `memidex COMMAND --help` does), or a page of the
    documentation, which is installed with memidex: `memidex help topics` lists them.
    """
    import typer.main

    from memidex.cli.term import emit

    words = list(command or ())
    group: Any = typer.main.get_command(app)  # click's, as vendored by typer
    ctx = group.context_class(group, info_name="memidex",
                              help_option_names=["-h", "--help"])
    topics = doc_topics()
    if words == ["topics"]:
        emit("".join(f"{name}\n" for name in sorted(topics)))
        return
    if len(words) == 1 and words[0] in topics and not group.get_command(ctx, words[0]):
        emit(topics[words[0]].read_text(encoding="utf-8"))
        return
    for word in words:
        sub = group.get_command(ctx, word) if hasattr(group, "get_command") else None
        if sub is None:
            raise UsageError(f"no command or topic {' '.join(words)!r}",
                             hint="`memidex --help` lists the commands, `memidex help "
                             "topics` the documentation")
        group = sub
        ctx = sub.context_class(sub, info_name=word, parent=ctx)
    emit(group.get_help(ctx) + "\n")


def doc_topics() -> dict[str, Path]:
    """The documentation pages installed with memidex (``memidex/docs/`` in a wheel; the
    checkout's ``docs/`` in an editable install), by name without ``.md``."""
    import memidex

    here = Path(memidex.__file__).resolve().parent
    for folder in (here / "docs", here.parent.parent / "docs"):
        if (folder / "cli.md").is_file():
            pages = {p.name.removesuffix(".schema.json"): p
                     for p in folder.glob("*.schema.json")}  # run-evidence
            return {**pages, **{p.stem: p for p in folder.glob("*.md")}}
    return {}


from memidex.cli import curate as _curate  # noqa: E402,F401  (curation commands, daemon)
from memidex.cli import dashboard as _dashboard  # noqa: E402,F401  (dashboard)
from memidex.cli import mcpcmd as _mcpcmd  # noqa: E402,F401  (mcp)
from memidex.cli import models as _models  # noqa: E402,F401  (models list|…|embed)
from memidex.cli import notes as _notes  # noqa: E402,F401  (notes add|list)
from memidex.cli import review as _review  # noqa: E402,F401  (merge-driver, knowledge review)
from memidex.cli import runs as _runs  # noqa: E402,F401  (runs, diff, rollback, proposals)
from memidex.cli import serve as _serve  # noqa: E402,F401  (brief)
from memidex.cli import teamindex as _teamindex  # noqa: E402,F401  (index push)
