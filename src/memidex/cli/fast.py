"""The start-up fast path for ``memidex knowledge search``: the same command without
importing typer (~45 ms) or rich (~50 ms).

A search is what an agent runs before every step, so its start-up is most of its cost.
:func:`parse_search` understands only the plain spellings of the search command's
options (``--opt value``, ``--opt=value``, ``-o value``); for anything else — ``--help``,
an unknown option, a missing value, a bad number, ``--`` — it answers ``None`` and the
typer application in :mod:`memidex.cli.main` handles the command and its errors. A
property test holds :func:`parse_search` to click's own parse of the same arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memidex.app import Memidex

__all__ = ["SearchArgs", "open_memidex", "parse_search", "run_search"]


@dataclass
class SearchArgs:
    """The parameters of ``[--root R] knowledge search QUERY [options]``."""

    root: Path | None = None
    query: str = ""
    product: str | None = None
    all_products: bool = False
    kind: list[str] = field(default_factory=list)
    status: list[str] = field(default_factory=list)
    anchor: list[str] = field(default_factory=list)
    limit: int = 10
    json_out: bool = False


_VALUED = {"--product": "product", "-p": "product", "--kind": "kind", "-k": "kind",
           "--status": "status", "-s": "status", "--anchor": "anchor", "-a": "anchor",
           "--limit": "limit", "-n": "limit"}
_FLAGS = {"--all-products": "all_products", "--json": "json_out"}
_REPEATED = ("kind", "status", "anchor")


def parse_search(argv: Sequence[str]) -> SearchArgs | None:
    """The search command's parameters, or ``None`` to leave ``argv`` to typer."""
    args = SearchArgs()
    i = 0
    while i < len(argv) and argv[i] != "knowledge":
        arg = argv[i]
        if arg == "--root" and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            args.root, i = Path(argv[i + 1]), i + 2
        elif arg.startswith("--root=") and len(arg) > len("--root=") and arg[7] != "-":
            args.root, i = Path(arg[len("--root="):]), i + 1
        else:
            return None
    if argv[i : i + 2] != ["knowledge", "search"]:
        return None
    i += 2
    query: str | None = None
    while i < len(argv):
        arg = argv[i]
        i += 1
        if not arg.startswith("-") or arg == "-":
            if query is not None:
                return None  # a second argument: click's error
            query = arg
            continue
        name, eq, value = arg.partition("=")
        if name in _FLAGS and not eq:
            setattr(args, _FLAGS[name], True)
            continue
        if name not in _VALUED or (eq and not name.startswith("--")):
            return None  # --help, -pVALUE, combined flags, --: typer's to answer
        if not eq:
            if i >= len(argv) or argv[i].startswith("-"):
                return None  # a missing value, or one click might read as an option
            value, i = argv[i], i + 1
        dest = _VALUED[name]
        if dest == "limit":
            if not value.isascii() or not value.isdigit() or int(value) < 1:
                return None
            args.limit = int(value)
        elif dest in _REPEATED:
            getattr(args, dest).append(value)
        else:
            args.product = value
    if query is None:
        return None
    args.query = query
    return args


def open_memidex(root: Path | None, *, reading: bool = False) -> Memidex:
    """The facade for one command. A reading command starts the staleness check's git
    call before the heavier imports, so the two overlap."""
    if reading:
        from memidex.config import load_config
        from memidex.staleness import prefetch
        from memidex.store import Store

        config = load_config(root)
        store = Store(config)
        prefetch(str(store.root), [store.records_rel, store.policies_rel])
        from memidex.app import Memidex

        return Memidex(config=config)
    from memidex.app import Memidex

    return Memidex(root)


def run_search(args: SearchArgs) -> None:
    """``memidex knowledge search``: the body both the fast path and typer run."""
    with open_memidex(args.root, reading=True) as m:
        result = m.search(args.query, product=args.product, all_products=args.all_products,
                          kinds=args.kind, statuses=args.status or None, anchors=args.anchor,
                          limit=args.limit)
    if args.json_out:
        from memidex.cli.render import print_json

        print_json(result.as_dict())
    else:
        from memidex.cli.plain import search_text

        search_text(result)
