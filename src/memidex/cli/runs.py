"""The learning commands: ``runs ingest|list|show`` and ``knowledge diff|rollback|proposals``,
thin typer commands over :class:`memidex.app.Memidex` (docs/learning.md).

Registered on the groups of :mod:`memidex.cli.base` when :mod:`memidex.cli.commands`
imports this module. Errors are raised, never turned into exit codes here.
"""


import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from memidex.cli import complete
from memidex.cli.base import (
    STATE,
    JsonOpt,
    ListFormatOpt,
    ProductOpt,
    WaitOpt,
    app,
    knowledge,
    memidex,
)
from memidex.cli.fast import IngestArgs, run_ingest
from memidex.cli.plain import safe
from memidex.cli.render import print_json as _json
from memidex.cli.views import _t
from memidex.errors import UsageError

__all__: list[str] = []

runs_app = typer.Typer(
    help="Test runs: ingest a run's evidence (or a Playwright/JUnit report), list and show "
    "the runs ingested.",
    no_args_is_help=True,
)
app.add_typer(runs_app, name="runs")


FormatOpt = Annotated[str, typer.Option(
    "--format", help="auto (default), evidence (docs/runs.md), playwright (its JSON "
    "reporter), junit (JUnit XML: pytest, Maven Surefire, Playwright's junit reporter) or "
    "ctrf (the Common Test Report Format).")]
RunIdOpt = Annotated[str | None, typer.Option(
    "--run-id", help="A report's run id (default: a stable hash of the report's bytes, so "
    "the same report is the same run).")]


@runs_app.command("import")
def import_report(
    report: Annotated[Path, typer.Argument(metavar="REPORT", help="A Playwright JSON or "
                                           "JUnit XML report.")],
    fmt: FormatOpt = "auto",
    product: ProductOpt = None,
    build_tag: Annotated[str | None, typer.Option("--build-tag", help="The build under "
                                                  "test.")] = None,
    run_id: RunIdOpt = None,
    ci: Annotated[bool, typer.Option("--ci", help="A CI run (also CI=true).")] = False,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the run "
                                                "evidence to this file instead of "
                                                "stdout.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Read a test runner's report and print it as run evidence (docs/import.md): one
    test per runner test, verdicts as the runner classified them (flaky tests marked),
    anchors from the locators its errors name, machine paths redacted, secrets masked.
    Nothing is learned: `memidex runs ingest REPORT` does that.

    --json: {run_id, format, counts, warnings, output, evidence}
    (docs/schemas/runs-import.schema.json).
    """
    import json

    from memidex.cli.plain import with_ticker

    with memidex(reading=True) as m:
        if fmt == "evidence":
            raise UsageError("runs import reads reports: --format auto, playwright, junit or "
                             "ctrf")
        result = with_ticker("reading the report", lambda: m.import_report(
            report, fmt=fmt, product=product, run_id=run_id, build_tag=build_tag, ci=ci),
            quiet=json_out)
    try:
        text = json.dumps(result.evidence, ensure_ascii=False, indent=1) + "\n"
        text.encode("utf-8")
    except UnicodeEncodeError:
        from memidex.errors import InvalidInputError

        raise InvalidInputError(f"{report}: the report holds a lone UTF-16 surrogate, "
                                "which is not text") from None
    if output is not None:
        from memidex.store.fsio import atomic_write

        try:
            atomic_write(output, text.encode("utf-8"))
        except OSError as exc:
            raise UsageError(f"cannot write --output {output}: {exc.strerror or exc}"
                             ) from None
    for warning in result.warnings:
        sys.stderr.write(f"warning: {safe(warning)}\n")
    if json_out:
        _json(result.to_json(str(output) if output is not None else None))
        return
    if output is None:
        sys.stdout.write(text)
    else:
        counts = ", ".join(f"{k} {v}" for k, v in result.counts.items())
        sys.stdout.write(f"{safe(result.run_id)}: {result.format} report, {counts} → "
                         f"{safe(str(output))}\n")


@runs_app.command("ingest")
def ingest(
    run_file: Annotated[Path, typer.Argument(metavar="RUN.json", help="The run's evidence "
                                             "(docs/runs.md), or a Playwright JSON / JUnit "
                                             "XML report.")],
    ci: Annotated[bool, typer.Option("--ci", help="A CI run: nothing it teaches is "
                                     "promoted, its confirmations count less (also "
                                     "CI=true).")] = False,
    build_tag: Annotated[str | None, typer.Option("--build-tag", help="The build under "
                                                  "test (replaces the run's own).")] = None,
    fmt: FormatOpt = "auto",
    product: ProductOpt = None,
    run_id: RunIdOpt = None,
    wait: WaitOpt = 10.0,
    no_wait: Annotated[bool, typer.Option("--no-wait", help="While `memidex daemon` holds "
                                          "the writer lease: queue the run for it and "
                                          "return at once with the queued item's id (the "
                                          "daemon applies it in order).")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print what the run would "
                                          "teach (changes with titles, proposals, each "
                                          "failure's cause) and change nothing.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Learn from one test run (run evidence, or a Playwright JSON / JUnit XML report —
    --format auto tells them apart; a report's run takes --product and --run-id): mask
    its secrets, freeze it under .agent-qa/runs/, give it the product's next run ordinal,
    classify each failure, and turn what it showed into record changes (add, confirm,
    supersede, deprecate, unknown) through the writer; a change the checks hold back
    becomes a proposal (`knowledge proposals`).

    The same run again changes nothing; the same run id with other content exits 4.
    While `memidex daemon` holds the writer lease, the daemon applies the run (the
    command waits for it, up to --wait seconds, or returns at once with --no-wait).

    --json: {run_id, ordinal, changes: [{op, id}], proposals, analysis, ...}; with
    --dry-run {…, dry_run: true, changes: [{op, id, title}], proposals: [{id, op,
    record_id, reason}]} (docs/schemas/runs-ingest.schema.json).
    """
    run_ingest(IngestArgs(STATE.root, run_file, ci, build_tag, fmt, product, run_id, wait,
                          no_wait, dry_run, json_out))


def _titles(m: Any) -> dict[str, str]:
    """Every record's title by id (all products), for listings that name records."""
    return {r.id: r.title for r in m.list_records(all_products=True).records}


@runs_app.command("list")
def list_runs(product: ProductOpt = None, fmt: ListFormatOpt = None,
              json_out: JsonOpt = False) -> None:
    """The runs ingested (of --product, default every product), in ordinal order, with a
    product column. A table on a terminal, tab-separated values otherwise.

    --json: {runs: [{run_id, product, ordinal, build_tag, ci, verdicts, changes, ...}]}
    (docs/schemas/runs-list.schema.json).
    """
    from memidex.cli import views
    from memidex.cli.term import listing_format

    chosen = "json" if json_out else listing_format(fmt)
    with memidex(reading=True) as m:
        listing = m.runs(product)
    if chosen == "json":
        _json(listing.to_json())
        return
    rows = [r.to_json() for r in listing.runs]
    if not rows and chosen == "table":
        from memidex.cli.render import console

        console().print("no runs ingested yet: `memidex runs ingest RUN.json`")
        return
    out = []
    for r in rows:
        verdicts = " ".join(f"{k} {v}" for k, v in sorted(r["verdicts"].items()))
        changes = " ".join(f"{k} {v}" for k, v in r["changes"].items()) or "-"
        if r["proposals"]:
            changes += f" (+{r['proposals']} proposed)"
        if r["rolled_back"]:
            changes += " (rolled back)"
        build = (r["build_tag"] or "-") + (" CI" if r["ci"] else "")
        out.append([r["product"], r["run_id"], str(r["ordinal"]), build, verdicts, changes])
    views.table(["product", "run", "ordinal", "build", "verdicts", "changes"], out, chosen,
                fold=("changes",))


@runs_app.command("show")
def show_run(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run's id, or a "
                                          "unique prefix of one.",
                                          autocompletion=complete.run_ids)],
    json_out: JsonOpt = False,
) -> None:
    """One ingested run: its ordinal, build, each test's verdict and root cause, the
    records it was served, and the changes its curation made (with the records' titles).

    --json: (docs/schemas/runs-show.schema.json).
    """
    with memidex(reading=True) as m:
        detail = m.run(run_id)
        titles = {} if json_out else _titles(m)
    if json_out:
        _json(detail.to_json())
        return
    from memidex.cli.term import paged

    with paged():
        _run_text(detail.to_json(), titles)


def _run_text(data: dict[str, Any], titles: dict[str, str]) -> None:
    from memidex.cli.render import console

    c = console()
    c.print(f"[bold]{_t(data['run_id'])}[/bold]  ordinal {data['ordinal']}  build "
            f"{_t(data['build_tag'] or '-')}{'  CI' if data['ci'] else ''}  "
            f"[dim]{_t(data['path'])}[/dim]")
    for t in data["tests"]:
        cause = f" ({t['cause']})" if t["cause"] else ""
        c.print(f"  {_t(t['verdict']):5} {_t(t['test_id'])}{cause}")
        if t["failure"]:
            c.print(f"        {_t(t['failure'])}")
        if t["served_records"]:
            c.print(f"        served: {_t(', '.join(t['served_records']))}")
        if t["not_briefed"]:
            c.print(f"        [yellow]not in any recorded brief[/yellow]: "
                    f"{_t(', '.join(t['not_briefed']))}")
    if data["levels"]:
        c.print(f"search level of its briefs: {_t(', '.join(data['levels']))}")
    if data["changes"]:
        c.print("changes:")
        for ch in data["changes"]:
            title = titles.get(ch["id"], "(no longer in the records)")
            c.print(f"  {ch['op']:9} {_t(title)}\n            [dim]{_t(ch['id'])}[/dim]")
    if data["proposals"]:
        c.print(f"proposals: {_t(', '.join(data['proposals']))}")
    if data["rolled_back"]:
        c.print("[yellow]rolled back[/yellow]")


@knowledge.command()
def diff(
    tag: Annotated[str, typer.Argument(metavar="TAG", help="A build tag runs used.")],
    product: ProductOpt = None,
    fmt: ListFormatOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """What runs added, confirmed, superseded and deprecated since build TAG's first run,
    with each record's title. A table on a terminal, tab-separated values otherwise.

    --json: {tag, product, since_ordinal, runs, added, confirmed, superseded,
    deprecated} (docs/schemas/diff.schema.json).
    """
    from memidex.cli import views
    from memidex.cli.term import listing_format

    chosen = "json" if json_out else listing_format(fmt)
    with memidex(reading=True) as m:
        report = m.diff(tag, product)
        titles = {} if chosen == "json" else _titles(m)
    if chosen == "json":
        _json(report.to_json())
        return
    data = report.to_json()
    rows = [[key, titles.get(rid, "(no longer in the records)"), rid]
            for key in ("added", "confirmed", "superseded", "deprecated") for rid in data[key]]
    if chosen == "table":
        from memidex.cli.render import console

        console().print(f"since {_t(tag)} (ordinal {data['since_ordinal']}), "
                        f"{len(data['runs'])} run(s):")
    views.table(["change", "title", "record"], rows, chosen, fold=("title",))


@knowledge.command()
def rollback(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run to undo (or a "
                                          "unique prefix of its id).",
                                          autocompletion=complete.run_ids)],
    cascade: Annotated[bool, typer.Option("--cascade", help="Also roll back later runs "
                                          "that changed the same records.")] = False,
    wait: WaitOpt = 10.0,
    json_out: JsonOpt = False,
) -> None:
    """Undo every record change a run's curation made (from the change ledger), as if the
    run had never been ingested; later runs' changes to other records stay. Refuses when
    a later run changed the same record, unless --cascade.

    Runs rolled back already, and their rollbacks, are not later changes: undo the last
    runs newest first, or oldest first with --cascade. A run rolled back before is said so
    (exit 0, nothing changed); a rollback cut short is finished.

    --json: {run_id, runs, restored, removed, changed, already_rolled_back}.
    """
    with memidex(wait=wait) as m:
        result = m.rollback(run_id, cascade=cascade)
    if json_out:
        _json(result.to_json())
        return
    data = result.to_json()
    if data["already_rolled_back"]:
        sys.stdout.write(f"{data['run_id']} was already rolled back: nothing changed\n")
        return
    sys.stdout.write(f"rolled back {', '.join(data['runs'])}: {len(data['restored'])} "
                     f"restored, {len(data['removed'])} removed\n")


ProposalArg = Annotated[str | None, typer.Argument(
    metavar="ID", help="A proposal id, or a unique prefix of one.",
    autocompletion=complete.proposal_ids)]


@knowledge.command()
def proposals(
    action: Annotated[str | None, typer.Argument(metavar="[show|accept|reject]",
                                                 help="Show, apply or drop proposal ID.")
                      ] = None,
    proposal_id: ProposalArg = None,
    wait: WaitOpt = 10.0,
    fmt: ListFormatOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """The curation queue: changes a run proposed that the checks held back (they cite a
    missing record, contradict themselves, rewrite a person's record or too much at
    once). `proposals show ID` prints the change as a diff of the record;
    `proposals accept ID` applies one through the writer; `reject ID` drops it.

    --json: {proposals: [{id, run_id, ordinal, op, record_id, path, reason}]}; show:
    {…, expected, text, current}; accept|reject: {id, record_id, path, op, decision,
    changed} (docs/schemas/proposals.schema.json).
    """
    if action is None:
        _proposal_list(fmt, json_out)
        return
    if action not in ("show", "accept", "reject"):
        raise UsageError(f"unknown action {action!r}", hint="use `proposals show ID`, "
                         "`proposals accept ID` or `proposals reject ID`")
    if proposal_id is None:
        raise UsageError(f"`proposals {action}` needs a proposal ID",
                         hint="`memidex knowledge proposals` lists them")
    if action == "show":
        with memidex(reading=True) as m:
            detail = m.proposal(proposal_id)
        if json_out:
            _json(detail.to_json())
        else:
            _proposal_diff(detail)
        return
    with memidex(wait=wait) as m:
        decision = m.decide_proposal(proposal_id, accept=action == "accept")
    if json_out:
        _json(decision.to_json())
        return
    data = decision.to_json()
    sys.stdout.write(f"{data['decision']} {data['id']}: {data['op']} {data['record_id']}\n")


def _proposal_list(fmt: str | None, json_out: bool) -> None:
    from memidex.cli import views
    from memidex.cli.term import SETTINGS, listing_format

    chosen = "json" if json_out else listing_format(fmt)
    with memidex(reading=True) as m:
        listing = m.proposals()
        titles = {} if chosen == "json" else _titles(m)
    if chosen == "json":
        _json(listing.to_json())
        return
    if not SETTINGS.quiet:
        for bad in listing.damaged:
            sys.stderr.write(f"warning: {safe(str(bad))} (left in the queue)\n")
    rows = [p.summary() for p in listing.proposals]
    if not rows and chosen == "table":
        from memidex.cli.render import console

        console().print("no proposals.")
        return
    views.table(["id", "run", "op", "record", "title", "reason"],
                [[r["id"], r["run_id"], r["op"], r["record_id"],
                  titles.get(r["record_id"], "(new record)"), r["reason"]] for r in rows],
                chosen, fold=("title", "reason"))


def _proposal_diff(detail: Any) -> None:
    """The proposal as a unified diff of the record file (a new record: all added)."""
    import difflib

    from memidex.cli.plain import safe
    from memidex.cli.term import colour, emit

    p = detail.proposal
    head = [f"proposal {p.id}: {p.op} {p.record_id} (run {p.run_id}, ordinal {p.ordinal})",
            f"held back: {p.reason}", ""]
    before = [] if detail.current is None else detail.current.splitlines(keepends=True)
    after = detail.text.splitlines(keepends=True)
    lines = list(difflib.unified_diff(before, after, fromfile="a/" + p.path if before
                                      else "/dev/null", tofile="b/" + p.path))
    if not lines:
        lines = ["(the record's file already says this)\n"]
    on = colour()
    out = []
    for line in lines:
        text = safe(line.rstrip("\n"))
        if on and line.startswith(("+", "-")) and not line.startswith(("+++", "---")):
            text = f"\x1b[{'32' if line[0] == '+' else '31'}m{text}\x1b[0m"
        elif on and line.startswith("@@"):
            text = f"\x1b[36m{text}\x1b[0m"
        out.append(text)
    emit("\n".join([safe(h) for h in head] + out) + "\n")
