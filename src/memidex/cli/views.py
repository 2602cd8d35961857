"""rich rendering of each command's result for people (``--json`` bypasses this module;
search and rebuild output is plain text, :mod:`memidex.cli.plain`).

Every string from a record, a file name or the configuration goes through :func:`_t`:
control characters become spaces (an escape sequence in a title must not clear or retitle
the terminal) and rich markup is escaped. Ids and paths are never wrapped: the console
soft-wraps (a long line stays one line) and the listing's id column never folds.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from memidex.cli.plain import safe
from memidex.cli.render import console, escape

if TYPE_CHECKING:
    from memidex.app import CheckReport, RecordList, ShownRecord

__all__ = ["check", "doctor", "github_data", "github_property", "listing", "show", "table"]


def _t(text: object, *, lines: bool = False) -> str:
    """Text from outside, safe for the terminal and for rich markup."""
    return escape(safe(str(text), lines=lines))


def show(shown: ShownRecord) -> None:
    c = console()
    r = shown.record
    c.print(f"[bold]{_t(r.title)}[/bold]")
    c.print(f"[dim]{_t(r.id)}  ({_t(shown.path)})[/dim]")
    c.print(f"{_t(r.kind)} · {_t(r.status)} · {_t(r.product)}"
            + (f" · scope {_t(json.dumps(dict(r.scope), ensure_ascii=False))}"
               if r.scope else ""))
    c.print(f"anchors: {_t(', '.join(r.all_anchors))}")
    t = r.trust
    confirmed = ("never confirmed by a run" if t.last_confirmed is None
                 else f"last confirmed at run {t.last_confirmed}")
    c.print(f"trust: {_t(t.source)}, {t.confirmations} confirmation(s), {t.contradictions} "
            f"contradiction(s), {confirmed}")
    until = "open" if r.valid.until is None else str(r.valid.until)
    c.print(f"valid: runs {r.valid.from_} .. {until}")
    rel = [f"{k} {v}" for k, v in r.relations.edges()]
    if rel:
        c.print(f"relations: {_t('; '.join(rel))}")
    if r.body:
        c.print()
        c.print(_t(r.body, lines=True))
    if r.evidence:
        c.print()
        c.print("evidence:")
        for e in r.evidence:
            c.print("  " + _t(", ".join(f"{k}={v}" for k, v in e)))
    if r.history:
        c.print()
        c.print("earlier versions:")
        for h in r.history:
            until = "open" if h.valid.until is None else str(h.valid.until)
            c.print(f"  runs {h.valid.from_} .. {until}: {_t(h.title)}")
    if shown.duplicates:
        c.print(f"[red]the same id is also in {_t(', '.join(shown.duplicates))}[/red]")


def table(header: list[str], rows: list[list[str]], fmt: str, *, fold: tuple[str, ...] = (),
          footer: str = "") -> None:
    """Rows for people (a rich table, paged when long) or for programs (``tsv``,
    ``csv``: a header line, one row a line, nothing else)."""
    from memidex.cli.term import emit, paged, rows_text

    if fmt in ("tsv", "csv"):
        emit(rows_text(header, rows, fmt))
        return
    from rich.table import Table

    t = Table(show_lines=False)
    for col in header:
        t.add_column(col, no_wrap=col not in fold, overflow="fold" if col in fold else
                     "ignore")
    for row in rows:
        t.add_row(*(_t(v) for v in row))
    with paged():
        c = console()
        c.print(t)
        if footer:
            c.print(footer)


def listing(listing: RecordList, fmt: str = "table", *, products: bool = False) -> None:
    rows = listing.records
    if not rows and fmt == "table":
        console().print("no records.")
        return
    header = (["product"] if products else []) + ["kind", "status", "id", "title"]
    table(header, [([r.product] if products else []) + [r.kind, r.status, r.id, r.title]
                   for r in rows], fmt, fold=("title",), footer=f"{len(rows)} record(s)")


def github_data(text: str) -> str:
    """A workflow command's message, escaped as GitHub requires (``%``, CR, LF)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_property(text: str) -> str:
    """A workflow command's property value (``file=``): the data escapes plus ``:`` and
    ``,``, so a file name cannot end the property list or start a forged command."""
    return github_data(text).replace(":", "%3A").replace(",", "%2C")


def check(report: CheckReport, fmt: str) -> None:
    if fmt == "json":
        from memidex.cli.render import print_json

        print_json(report.to_json())
        return
    out = sys.stdout
    if fmt == "github":
        for p in report.problems:
            out.write(f"::error file={github_property(p.path)},line={max(p.line, 1)},"
                      f"title=memidex::{github_data(p.reason)}\n")
        return
    for p in report.problems:
        out.write(f"{safe(str(p))}\n")
    if report.ok:
        out.write(f"ok: {report.records} records and {report.policies} policies are valid\n")


def recs_present(report: dict[str, Any]) -> bool:
    """Whether the repository was set up for memidex (its knowledge folder exists, or
    doctor found records)."""
    from pathlib import Path

    cfg, recs = report["config"], report["records"]
    folder = Path(str(cfg.get("root"))) / str(cfg.get("knowledge_dir"))
    return bool(recs["count"] or recs["errors"]) or folder.is_dir()


def doctor(report: dict[str, Any]) -> None:
    c = console()
    ok = "[green]healthy[/green]" if report["healthy"] else "[red]unhealthy[/red]"
    c.print(f"memidex doctor: {ok}")
    c.print(f"search level: [bold]{report['level']}[/bold]")
    for name, state in report["levels"].items():
        c.print(f"  {name:<13} {_t(str(state))}")
    idx = report["index"]
    c.print(f"index: {_t(idx['path'])}")
    if idx.get("ok"):
        check = ("quick_check skipped (`memidex doctor --deep` runs it)"
                 if idx.get("quick_check") == "skipped" else "quick_check ok")
        c.print(f"  {check}, schema {idx['schema_version']}, {idx['records']} records, "
                f"{idx['policies']} policies")
        st = idx["staleness"]
        c.print(f"  staleness: {st['method']} — {_t(st['how'])}")
        c.print(f"  this run refreshed {st['added']} added, {st['changed']} changed, "
                f"{st['deleted']} deleted")
    else:
        why = idx.get("reason") or idx.get("quick_check")
        c.print(f"  [red]unavailable[/red]: {_t(str(why))}")
        if report["config"].get("config_file") is None and not recs_present(report):
            c.print("  this folder is not set up for memidex: run `memidex init`")
        else:
            c.print("  run `memidex knowledge rebuild-index`")
    recs = report["records"]
    c.print(f"records: {recs['count']}, {len(recs['errors'])} error(s)")
    for e in recs["errors"][:20]:
        c.print(f"  [red]{_t(e['path'])}:{e['line']}[/red]: {_t(e['reason'])}")
    runs = report.get("recent_runs") or []
    if runs:
        c.print("recent runs (the search level their briefs had):")
        for r in runs:
            levels = ", ".join(r["levels"]) or "no brief recorded"
            c.print(f"  {_t(r['run_id'])} (ordinal {r['ordinal']}): {_t(levels)}")
    lease = report["lease"]
    if lease.get("held"):
        age = lease.get("heartbeat_age_seconds")
        c.print(f"lease: held by pid {lease.get('pid')} on {_t(str(lease.get('host')))}, "
                f"epoch {lease.get('epoch')}, heartbeat {age if age is not None else '?'}s ago"
                + ("" if lease.get("alive", True) else " [yellow](holder looks dead)[/yellow]"))
    elif lease.get("epoch") is None:
        c.print("lease: free (no writer has written here yet)")
    else:
        c.print(f"lease: free (epoch {lease.get('epoch')}, authority "
                f"{lease.get('authority')})")
    pending = lease.get("pending_journal") or 0
    if pending:
        c.print(f"  [yellow]{pending} journaled change set(s) to finish on the next "
                "write[/yellow]")
    served = report.get("serving") or {}
    if served.get("path") == "warm":
        c.print(f"served by: the warm server, pid {served.get('pid')} "
                f"({_t(str(served.get('watch') or ''))})")
    elif served:
        c.print(f"served by: this process (one-shot; {_t(str(served.get('reason')))})")
    y = report["yaml"]
    c.print(f"yaml: {y['loader']}" + (f" — [yellow]{_t(y['note'])}[/yellow]"
                                      if y["note"] else ""))
    for note in report.get("notes", []):
        c.print(f"[yellow]note[/yellow]: {_t(note)}")
    cfg = report["config"]
    product = repr(cfg["product"]) if cfg["product"] else "none (set `product` in memidex.toml)"
    c.print(f"config: root {_t(str(cfg['root']))}, product {_t(product)}, "
            f"file {_t(str(cfg['config_file'] or 'none (no memidex.toml)'))}")
