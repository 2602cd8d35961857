"""rich rendering of each command's result for people (``--json`` bypasses this module;
search and rebuild output is plain text, :mod:`memidex.cli.plain`)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from memidex.cli.render import console, escape

if TYPE_CHECKING:
    from memidex.app import CheckReport, ShownRecord

def show(shown: ShownRecord) -> None:
    c = console()
    r = shown.record
    c.print(f"[bold]{escape(r.title)}[/bold]")
    c.print(f"[dim]{escape(r.id)}  ({escape(shown.path)})[/dim]")
    c.print(f"{r.kind} · {r.status} · {escape(r.product)}"
            + (f" · scope {escape(json.dumps(dict(r.scope)))}" if r.scope else ""))
    c.print(f"anchors: {escape(', '.join(r.all_anchors))}")
    t = r.trust
    c.print(f"trust: {t.source}, {t.confirmations} confirmation(s), {t.contradictions} "
            f"contradiction(s), last confirmed at run {t.last_confirmed}")
    until = "open" if r.valid.until is None else str(r.valid.until)
    c.print(f"valid: runs {r.valid.from_} .. {until}")
    rel = [f"{k} {v}" for k, v in r.relations.edges()]
    if rel:
        c.print(f"relations: {escape('; '.join(rel))}")
    if r.body:
        c.print()
        c.print(escape(r.body))
    if r.evidence:
        c.print()
        c.print("evidence:")
        for e in r.evidence:
            c.print("  " + escape(", ".join(f"{k}={v}" for k, v in e)))
    if r.history:
        c.print()
        c.print("earlier versions:")
        for h in r.history:
            c.print(f"  runs {h.valid.from_}..{h.valid.until}: {escape(h.title)}")
    if shown.duplicates:
        c.print(f"[red]the same id is also in {escape(', '.join(shown.duplicates))}[/red]")


def listing(rows: list[dict[str, Any]]) -> None:
    c = console()
    if not rows:
        c.print("no records.")
        return
    from rich.table import Table

    table = Table(show_lines=False)
    for col in ("kind", "status", "id", "title"):
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(row["kind"], row["status"], escape(row["id"]), escape(row["title"]))
    c.print(table)
    c.print(f"{len(rows)} record(s)")


def check(report: CheckReport, fmt: str) -> None:
    if fmt == "json":
        from memidex.cli.render import print_json

        print_json(report.as_dict())
        return
    out = sys.stdout
    if fmt == "github":
        for p in report.problems:
            msg = p.reason.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
            out.write(f"::error file={p.path},line={max(p.line, 1)}::{msg}\n")
        return
    for p in report.problems:
        out.write(f"{p}\n")
    if report.ok:
        out.write(f"ok: {report.records} records and {report.policies} policies are valid\n")


def doctor(report: dict[str, Any]) -> None:
    c = console()
    ok = "[green]healthy[/green]" if report["healthy"] else "[red]unhealthy[/red]"
    c.print(f"memidex doctor: {ok}")
    c.print(f"search level: [bold]{report['level']}[/bold]")
    for name, state in report["levels"].items():
        c.print(f"  {name:<13} {escape(str(state))}")
    idx = report["index"]
    c.print(f"index: {escape(idx['path'])}")
    if idx.get("ok"):
        c.print(f"  quick_check ok, schema {idx['schema_version']}, {idx['records']} records, "
                f"{idx['policies']} policies")
        st = idx["staleness"]
        c.print(f"  staleness: {st['method']} — {escape(st['how'])}")
        c.print(f"  this run refreshed {st['added']} added, {st['changed']} changed, "
                f"{st['deleted']} deleted")
    else:
        why = idx.get("reason") or idx.get("quick_check")
        c.print(f"  [red]unavailable[/red]: {escape(str(why))}")
        c.print("  run `memidex knowledge rebuild-index`")
    recs = report["records"]
    c.print(f"records: {recs['count']}, {len(recs['errors'])} error(s)")
    for e in recs["errors"][:20]:
        c.print(f"  [red]{escape(e['path'])}:{e['line']}[/red]: {escape(e['reason'])}")
    lease = report["lease"]
    if lease.get("held"):
        age = lease.get("heartbeat_age_seconds")
        c.print(f"lease: held by pid {lease.get('pid')} on {escape(str(lease.get('host')))}, "
                f"epoch {lease.get('epoch')}, heartbeat {age if age is not None else '?'}s ago"
                + ("" if lease.get("alive", True) else " [yellow](holder looks dead)[/yellow]"))
    else:
        c.print(f"lease: free (epoch {lease.get('epoch')}, authority "
                f"{lease.get('authority')})")
    pending = lease.get("pending_journal") or 0
    if pending:
        c.print(f"  [yellow]{pending} journaled change set(s) to finish on the next "
                "write[/yellow]")
    y = report["yaml"]
    c.print(f"yaml: {y['loader']}" + (f" — [yellow]{escape(y['note'])}[/yellow]"
                                      if y["note"] else ""))
    cfg = report["config"]
    c.print(f"config: root {escape(str(cfg['root']))}, product {cfg['product']!r}, "
            f"file {escape(str(cfg['config_file']))}")
