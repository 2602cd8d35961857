"""The ``memidex`` commands: a thin typer layer over :class:`memidex.app.Memidex`.

Each command parses its arguments, calls one library method and renders the result.
:mod:`memidex.cli.main` runs them and is the one place that maps
:class:`MemidexError` to an exit code and a one-line ``error:`` message.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from memidex.cli.base import (
    STATE,
    AllProductsOpt,
    AnchorOpt,
    JsonOpt,
    KindOpt,
    ProductOpt,
    app,
    knowledge,
    memidex,
)
from memidex.cli.fast import RebuildArgs, SearchArgs, run_rebuild, run_search
from memidex.errors import ProblemsFound, UsageError

__all__ = ["STATE", "app", "knowledge"]

# --- init and doctor -----------------------------------------------------------------


@app.command()
def init(json_out: JsonOpt = False) -> None:
    """Create the memidex layout here (records, policies, memidex.toml, .gitignore entries).

    Idempotent: running it again changes nothing.
    """
    from memidex.store.layout import init_repository, init_root

    root = STATE.root.resolve() if STATE.root else init_root(Path.cwd())
    report = init_repository(root)
    if json_out:
        from memidex.cli.render import print_json

        print_json(report.as_dict())
        return
    if report.created:
        sys.stdout.write(f"initialised memidex in {root}\n")
        for item in report.created:
            sys.stdout.write(f"  created {item}\n")
    else:
        sys.stdout.write(f"memidex is already initialised in {root}; nothing changed\n")


@app.command()
def doctor(json_out: JsonOpt = False) -> None:
    """Report the search level, index health, staleness, record errors, lease and config.

    Exits 1 when something is unhealthy (no index, a damaged index, or bad records).
    """
    from memidex.cli import views

    with memidex(reading=True) as m:
        report = m.doctor()
    if json_out:
        from memidex.cli.render import print_json

        print_json(report)
    else:
        views.doctor(report)
    if not report["healthy"]:
        raise ProblemsFound("doctor found problems", hint="see the report above")


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
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="Results to show.")] = 10,
    json_out: JsonOpt = False,
) -> None:
    """Full-text search (BM25) scoped to one product, best first, with snippets."""
    run_search(SearchArgs(root=STATE.root, query=query, product=product,
                          all_products=all_products, kind=kind or [], status=status or [],
                          anchor=anchor or [], limit=limit, json_out=json_out))


@knowledge.command()
def show(
    record_id: Annotated[str, typer.Argument(metavar="ID", help="A record id or a unique "
                                             "prefix of one.")],
    raw: Annotated[bool, typer.Option("--raw", help="Print the file exactly as stored.")
                   ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Show one record."""
    from memidex.cli import views

    with memidex(reading=True) as m:
        shown = m.show(record_id)
    if json_out:
        from memidex.cli.render import print_json

        print_json(shown.as_dict())
    elif raw:
        sys.stdout.write(shown.text)
    else:
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
    limit: Annotated[int | None, typer.Option("--limit", "-n", min=1)] = None,
    json_out: JsonOpt = False,
) -> None:
    """List records of a product, by kind then id."""
    from memidex.cli import views

    with memidex(reading=True) as m:
        rows = m.list_records(product=product, all_products=all_products, kinds=kind or (),
                              statuses=status, anchors=anchor or (), limit=limit)
    if json_out:
        from memidex.cli.render import print_json

        print_json({"count": len(rows), "records": rows})
    else:
        views.listing(rows)


@knowledge.command()
def check(
    fmt: Annotated[str, typer.Option("--format", "-f", help="text, json or github "
                                     "(workflow annotations).")] = "text",
) -> None:
    """Validate every record and policy: schema, ids, duplicates, relations, locations.

    Reads the files themselves, not the index. Exits 1 when there are problems.
    """
    from memidex.cli import views

    if fmt not in ("text", "json", "github"):
        raise UsageError(f"unknown --format {fmt!r}: use text, json or github")
    with memidex() as m:
        report = m.check()
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
                                 "standard input.")
    ] = None,
    wait: Annotated[
        float,
        typer.Option("--wait", min=0, help="Seconds to wait for the writer lease (or for a "
                     "running daemon to apply the change) before giving up with exit 3."),
    ] = 10.0,
    json_out: JsonOpt = False,
) -> None:
    """Write a human-authored record (trust.source human, status active).

    Adding the same kind/anchor/product/scope again updates that record.
    """
    if body is not None and body_file is not None:
        raise UsageError("give --body or --body-file, not both")
    text = body or ""
    if body_file is not None:
        try:
            text = sys.stdin.read() if body_file == "-" else Path(body_file).read_text(
                encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            from memidex.errors import InvalidInputError

            raise InvalidInputError(f"cannot read --body-file {body_file}: {exc}") from None
    scope_map: dict[str, str] = {}
    for item in scope or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--scope {item!r} must be key=value")
        scope_map[key.strip()] = value.strip()
    with memidex(wait=wait) as m:
        chosen = product or m.config.product
        if not chosen:
            raise UsageError("no product", hint="pass --product or set `product` in "
                             "memidex.toml")
        result = m.add(kind=kind, product=chosen, anchors=anchor, title=title, body=text,
                       scope=scope_map)
    if json_out:
        from memidex.cli.render import print_json

        print_json(result.as_dict())
    else:
        sys.stdout.write(f"{result.change} {result.id}\n  {result.path}\n")


from memidex.cli import curate as _curate  # noqa: E402,F401  (curation commands, daemon)
