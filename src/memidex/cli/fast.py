"""The start-up fast path for ``memidex knowledge search``, ``knowledge rebuild-index``,
``memidex brief``, ``memidex doctor`` and ``memidex runs ingest``: the same commands
without importing typer (~45 ms, and ~30 ms to build its commands) or — but for doctor's
text — rich (~50 ms).

A search is what an agent runs before every step and a brief before every test, so
their start-up is most of their cost; a rebuild and an ingest are timed end to end.
:func:`parse_fast` understands only the plain spellings of these commands' options
(``--opt value``, ``--opt=value``, ``-o value``); for anything else — ``--help``, an
unknown option, a missing value, a bad number, ``--`` — it answers ``None`` and the typer
application in :mod:`memidex.cli.commands` handles the command and its errors. A property test holds
:func:`parse_fast` to typer's own parse of the same arguments.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from memidex.plain import Plain

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from memidex.app import Memidex

__all__ = ["BriefArgs", "DoctorArgs", "IngestArgs", "RebuildArgs", "SearchArgs",
           "open_memidex", "parse_fast", "run_brief", "run_doctor", "run_fast", "run_ingest",
           "run_rebuild", "run_search", "warm_facade"]


class SearchArgs(Plain):
    """The parameters of ``[--root R] knowledge search QUERY [options]``."""

    __slots__ = ("root", "query", "product", "all_products", "kind", "status", "anchor", "limit",
                 "json_out", "near", "strategy", "fusion")

    def __init__(self, root: Path | None = None, query: str = "", product: str | None = None,
                 all_products: bool = False, kind: list[str] | None = None,
                 status: list[str] | None = None, anchor: list[str] | None = None, limit: int = 10,
                 json_out: bool = False, near: list[str] | None = None, strategy: str = "lexical",
                 fusion: str = "append") -> None:
        self.root = root
        self.query = query
        self.product = product
        self.all_products = all_products
        self.kind = [] if kind is None else kind
        self.status = [] if status is None else status
        self.anchor = [] if anchor is None else anchor
        self.limit = limit
        self.json_out = json_out
        self.near = [] if near is None else near
        self.strategy = strategy
        self.fusion = fusion


class RebuildArgs(Plain):
    """The parameters of ``[--root R] knowledge rebuild-index [options]``."""

    __slots__ = ("root", "jobs", "json_out")

    def __init__(self, root: Path | None = None, jobs: int | None = None,
                 json_out: bool = False) -> None:
        self.root = root
        self.jobs = jobs
        self.json_out = json_out


class BriefArgs(Plain):
    """The parameters of ``[--root R] brief TEST_ID [options]``."""

    __slots__ = ("root", "test_id", "product", "anchor", "at", "budget", "limit", "fmt", "explain",
                 "no_record", "json_out")

    def __init__(self, root: Path | None = None, test_id: str = "", product: str | None = None,
                 anchor: list[str] | None = None, at: int | None = None, budget: int | None = None,
                 limit: int | None = None, fmt: str = "markdown", explain: bool = False,
                 no_record: bool = False, json_out: bool = False) -> None:
        self.root = root
        self.test_id = test_id
        self.product = product
        self.anchor = [] if anchor is None else anchor
        self.at = at
        self.budget = budget
        self.limit = limit
        self.fmt = fmt
        self.explain = explain
        self.no_record = no_record
        self.json_out = json_out


class DoctorArgs(Plain):
    """The parameters of ``[--root R] doctor [--deep] [--json]``."""

    __slots__ = ("root", "deep", "json_out")

    def __init__(self, root: Path | None = None, deep: bool = False,
                 json_out: bool = False) -> None:
        self.root = root
        self.deep = deep
        self.json_out = json_out


class IngestArgs(Plain):
    """The parameters of ``[--root R] runs ingest RUN.json [options]``."""

    __slots__ = ("root", "run_file", "ci", "build_tag", "fmt", "product", "run_id", "wait",
                 "no_wait", "dry_run", "json_out")

    def __init__(self, root: Path | None = None, run_file: Path | None = None, ci: bool = False,
                 build_tag: str | None = None, fmt: str = "auto", product: str | None = None,
                 run_id: str | None = None, wait: float = 10.0, no_wait: bool = False,
                 dry_run: bool = False, json_out: bool = False) -> None:
        self.root = root
        self.run_file = Path() if run_file is None else run_file
        self.ci = ci
        self.build_tag = build_tag
        self.fmt = fmt
        self.product = product
        self.run_id = run_id
        self.wait = wait
        self.no_wait = no_wait
        self.dry_run = dry_run
        self.json_out = json_out


Args = SearchArgs | RebuildArgs | BriefArgs | DoctorArgs | IngestArgs

_MAX_COUNT = 2**63 - 1  # the largest whole number memidex takes (SQLite's)


class _Spec:
    """One command's options: flags, options with a value, which repeat, which are
    whole numbers >= 1 (``counts``) or >= 0 (``ordinals``: typer refuses a malformed
    one), which are seconds >= 0 (digits and one point), whether it takes one argument,
    and whether that argument is a path. (A plain class: a NamedTuple costs start-up.)"""

    __slots__ = ("flags", "valued", "repeated", "counts", "argument", "ordinals", "seconds",
                 "paths")

    def __init__(self, flags: dict[str, str], valued: dict[str, str],
                 repeated: tuple[str, ...] = (), counts: tuple[str, ...] = (),
                 argument: str | None = None, ordinals: tuple[str, ...] = (),
                 seconds: tuple[str, ...] = (), paths: tuple[str, ...] = ()) -> None:
        self.flags = flags
        self.valued = valued
        self.repeated = repeated
        self.counts = counts
        self.argument = argument
        self.ordinals = ordinals
        self.seconds = seconds
        self.paths = paths


_SPECS = {
    "search": _Spec(
        flags={"--all-products": "all_products", "--json": "json_out"},
        valued={"--product": "product", "-p": "product", "--kind": "kind", "-k": "kind",
                "--status": "status", "-s": "status", "--anchor": "anchor", "-a": "anchor",
                "--limit": "limit", "-n": "limit", "--near": "near",
                "--strategy": "strategy", "--fusion": "fusion"},
        repeated=("kind", "status", "anchor", "near"), counts=("limit",), argument="query"),
    "rebuild-index": _Spec(flags={"--json": "json_out"},
                           valued={"--jobs": "jobs", "-j": "jobs"}, counts=("jobs",)),
    "brief": _Spec(
        flags={"--explain": "explain", "--no-record": "no_record", "--json": "json_out"},
        valued={"--product": "product", "-p": "product", "--anchor": "anchor",
                "-a": "anchor", "--at": "at", "--budget": "budget", "--limit": "limit",
                "-n": "limit", "--format": "fmt", "-f": "fmt"},
        repeated=("anchor",), counts=("budget", "limit"), ordinals=("at",),
        argument="test_id"),
    "doctor": _Spec(flags={"--deep": "deep", "--json": "json_out"}, valued={}),
    "ingest": _Spec(
        flags={"--ci": "ci", "--no-wait": "no_wait", "--dry-run": "dry_run",
               "--json": "json_out"},
        valued={"--build-tag": "build_tag", "--format": "fmt", "--product": "product",
                "-p": "product", "--run-id": "run_id", "--wait": "wait"},
        seconds=("wait",), argument="run_file", paths=("run_file",)),
}
_GROUPS = {"knowledge": ("search", "rebuild-index"), "runs": ("ingest",),
           None: ("brief", "doctor")}
_SECONDS = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,6})?")


def parse_fast(argv: Sequence[str]) -> Args | None:
    """A fast-path command's parameters, or ``None`` to leave ``argv`` to typer."""
    root: Path | None = None
    i = 0
    while i < len(argv) and argv[i] not in ("knowledge", "runs", *_GROUPS[None]):
        arg = argv[i]
        if arg == "--root" and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            root, i = Path(argv[i + 1]), i + 2
        elif arg.startswith("--root=") and len(arg) > len("--root=") and arg[7] != "-":
            root, i = Path(arg[len("--root="):]), i + 1
        else:
            return None
    if i < len(argv) and argv[i] in _GROUPS[None]:
        command, i = argv[i], i + 1
    elif i + 1 < len(argv) and argv[i] in ("knowledge", "runs") and \
            argv[i + 1] in _GROUPS[argv[i]]:
        command, i = argv[i + 1], i + 2
    else:
        return None
    spec = _SPECS[command]
    args: Args = (SearchArgs() if command == "search" else
                  RebuildArgs() if command == "rebuild-index" else
                  DoctorArgs() if command == "doctor" else
                  IngestArgs() if command == "ingest" else BriefArgs())
    args.root = root
    argument: str | None = None
    while i < len(argv):
        arg = argv[i]
        i += 1
        if not arg.startswith("-") or arg == "-":
            if argument is not None or spec.argument is None:
                return None  # an argument too many: click's error
            argument = arg
            continue
        name, eq, value = arg.partition("=")
        if name in spec.flags and not eq:
            setattr(args, spec.flags[name], True)
            continue
        if name not in spec.valued or (eq and not name.startswith("--")):
            return None  # --help, -pVALUE, combined flags, --: typer's to answer
        if not eq:
            if i >= len(argv) or argv[i].startswith("-"):
                return None  # a missing value, or one click might read as an option
            value, i = argv[i], i + 1
        dest = spec.valued[name]
        if dest in spec.counts:
            if (not value.isascii() or not value.isdigit() or len(value) > 19
                    or not 1 <= int(value) <= _MAX_COUNT):
                return None  # (typer parses it; the facade refuses a huge one, exit 2)
            setattr(args, dest, int(value))
        elif dest in spec.ordinals:
            if not value.isascii() or not value.isdigit() or len(value) > 19 or \
                    int(value) > _MAX_COUNT:
                return None  # typer's to parse (a sign, a huge number: the facade refuses)
            setattr(args, dest, int(value))
        elif dest in spec.seconds:
            if not _SECONDS.fullmatch(value):
                return None  # typer's to parse (1e3, inf, a sign)
            setattr(args, dest, float(value))
        elif dest in spec.repeated:
            getattr(args, dest).append(value)
        else:
            setattr(args, dest, value)
    if spec.argument is not None:
        if argument is None:
            return None
        setattr(args, spec.argument,
                Path(argument) if spec.argument in spec.paths else argument)
    return args


_WARM: list[Memidex | None] = [None]


class _Borrowed:
    """The warm server's facade, lent to one command: closing it keeps it open."""

    def __init__(self, m: Memidex) -> None:
        self._m = m

    def __getattr__(self, name: str) -> object:
        return getattr(self._m, name)

    def __enter__(self) -> _Borrowed:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def close(self) -> None:
        return None


def warm_facade(m: Memidex | None) -> None:
    """While set, every command of this process gets ``m`` (a warm server's facade, kept
    open across commands; its root and configuration checked by the server)."""
    _WARM[0] = m


def open_memidex(root: Path | None, *, reading: bool = False, wait: float = 10.0,
                 strict_config: bool = True) -> Memidex:
    """The facade for one command. A reading command starts the staleness check's git
    call before the heavier imports, so the two overlap. ``strict_config=False``
    (``doctor``, ``check``): a bad key of memidex.toml is reported, not refused. In a
    warm server, the server's facade (:func:`warm_facade`)."""
    warm = _WARM[0]
    if warm is not None:
        from typing import cast

        warm.wait = wait
        return cast("Memidex", _Borrowed(warm))
    from memidex.config import load_config

    config = load_config(root, strict=strict_config)
    if reading:
        from memidex.index.prefetch import prefetch
        from memidex.store.files import Store

        store = Store(config)
        prefetch(str(store.root), [store.records_rel, store.policies_rel])
    from memidex.app import Memidex

    return Memidex(config=config, wait=wait)


def run_fast(args: Args) -> None:
    if isinstance(args, SearchArgs):
        run_search(args)
    elif isinstance(args, BriefArgs):
        run_brief(args)
    elif isinstance(args, DoctorArgs):
        run_doctor(args)
    elif isinstance(args, IngestArgs):
        run_ingest(args)
    else:
        run_rebuild(args)


def run_brief(args: BriefArgs) -> None:
    """``memidex brief``: the body both the fast path and typer run."""
    import sys

    from memidex.errors import UsageError

    fmt = args.fmt
    if fmt not in ("markdown", "json"):
        raise UsageError(f"unknown --format {fmt!r}: use markdown or json")
    if args.json_out:
        fmt = "json"
    with open_memidex(args.root, reading=True) as m:
        result = m.brief(args.test_id, product=args.product, anchors=args.anchor,
                         at=args.at, budget=args.budget, limit=args.limit,
                         explain=args.explain, record=not args.no_record)
    from memidex.cli.render import warn

    warn(result.warning)  # the local index answered although a team index is configured
    if fmt == "json":
        from memidex.cli.render import print_json

        print_json(result.to_json())
    else:
        from memidex.serve.render import markdown

        sys.stdout.write(markdown(result))


def run_doctor(args: DoctorArgs) -> None:
    """``memidex doctor``: the body both the fast path and typer run (exit 1 when
    something is unhealthy)."""
    from memidex.cli import views
    from memidex.errors import ProblemsFound
    from memidex.warm.client import serving

    with open_memidex(args.root, reading=True, strict_config=False) as m:
        report = m.doctor(deep=args.deep)
    data = {**report.to_json(), "serving": serving()}
    if args.json_out:
        from memidex.cli.render import print_json

        print_json(data)
    else:
        from memidex.cli.term import paged

        with paged():
            views.doctor(data)
    if not report.healthy:
        raise ProblemsFound("doctor found problems", hint="see the report above")


def run_ingest(args: IngestArgs) -> None:
    """``memidex runs ingest``: the body both the fast path and typer run."""
    import sys

    from memidex.cli import plain
    from memidex.cli.ingesting import preview_text
    from memidex.cli.plain import safe
    from memidex.cli.render import print_json
    from memidex.errors import UsageError

    if args.dry_run:
        if args.no_wait:
            raise UsageError("give --dry-run or --no-wait, not both")
        with open_memidex(args.root, reading=True) as m:
            preview = m.preview(args.run_file, ci=args.ci, build_tag=args.build_tag,
                                fmt=args.fmt, product=args.product, run_id=args.run_id)
        if args.json_out:
            print_json(preview.to_json())
        else:
            preview_text(preview)
        return
    # reading=True: git's staleness check of the index (the ordinal floor is read from it
    # before the lease) starts now and runs alongside the run's reading and checking
    with open_memidex(args.root, reading=True, wait=args.wait) as m:
        result = plain.with_progress(
            "curating", lambda cb: m.ingest(args.run_file, ci=args.ci,
                                            build_tag=args.build_tag, fmt=args.fmt,
                                            product=args.product, run_id=args.run_id,
                                            progress=cb, no_wait=args.no_wait),
            quiet=args.json_out)
    if args.json_out:
        print_json(result.to_json())
        return
    if result.queued is not None:
        sys.stdout.write(f"{safe(result.run_id)}: queued for the daemon as {result.queued}\n")
        return
    ops: dict[str, int] = {}
    for c in result.changes:
        ops[c["op"]] = ops.get(c["op"], 0) + 1
    head = (f"{safe(result.run_id)}: already ingested at ordinal {result.ordinal}; nothing "
            "changed" if result.already else
            f"{safe(result.run_id)}: ordinal {result.ordinal}"
            + (f", build {safe(result.build_tag)}" if result.build_tag else "")
            + (" (CI)" if result.ci else "")
            + (" (resumed)" if result.resumed else ""))
    sys.stdout.write(head + "\n")
    if not result.already:
        summary = ", ".join(f"{n} {op}" for op, n in sorted(ops.items())) or "no changes"
        sys.stdout.write(f"  changes: {summary}\n")
        for test_id, cause in sorted(result.analysis.items()):
            sys.stdout.write(f"  {safe(test_id)}: {cause}\n")
        if result.proposals:
            sys.stdout.write(f"  {len(result.proposals)} proposal(s) held for review: "
                             "`memidex knowledge proposals`\n")
    for note in result.notes:
        sys.stdout.write(f"  note: {safe(note)}\n")


def run_rebuild(args: RebuildArgs) -> None:
    """``memidex knowledge rebuild-index``: the body both the fast path and typer run."""
    from memidex.cli import plain

    with open_memidex(args.root) as m:
        report = plain.with_progress("indexing records", lambda cb: m.rebuild_index(
            progress=cb, jobs=args.jobs), quiet=args.json_out)
        vectors = None
        if m.has_models():  # the vectors too, most read from the side cache
            vectors = plain.with_progress("embedding records", lambda cb: m.embed_vectors(
                progress=cb), quiet=args.json_out)
    if args.json_out:
        from memidex.cli.render import print_json

        out = report.to_json(m.store.rel(Path(report.path)))
        if vectors is not None:
            out["vectors"] = vectors.to_json()
        print_json(out)
    else:
        plain.rebuild_text(report, m.store.rel(Path(report.path)))
        if vectors is not None:
            plain.vectors_text(vectors)


def run_search(args: SearchArgs) -> None:
    """``memidex knowledge search``: the body both the fast path and typer run."""
    with open_memidex(args.root, reading=True) as m:
        result = m.search(args.query, product=args.product, all_products=args.all_products,
                          kinds=args.kind, statuses=args.status or None, anchors=args.anchor,
                          limit=args.limit, near=args.near, strategy=args.strategy,
                          fusion=args.fusion)
    from memidex.cli.render import warn

    warn(result.warning)  # the local index answered although a team index is configured
    if args.json_out:
        from memidex.cli.render import print_json

        print_json(result.to_json())
    else:
        from memidex.cli.plain import search_text

        search_text(result)
