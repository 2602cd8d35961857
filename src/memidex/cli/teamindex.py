"""``memidex index push`` (docs/team-index.md): bring the team index to the branch's HEAD.

Not registered yet: the lead adds ``app.add_typer(index, name="index")`` in
``memidex.cli.commands`` once ``[index] url`` is in the config. The command parses its
options and calls :func:`memidex.teamindex.push`; a :class:`MemidexError` leaves it for
the one handler in :mod:`memidex.cli.main` (one ``error:`` line, the exit code).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from memidex.cli.base import STATE, JsonOpt
from memidex.errors import ConfigError

__all__ = ["index"]

index = typer.Typer(
    help="The team index on PostgreSQL: a derived copy of a branch's records that readers "
    "share (docs/team-index.md).",
    no_args_is_help=True,
)


@index.command("push")
def push_command(
    url: Annotated[str | None, typer.Option(
        "--url", help="postgresql://USER:PASSWORD@HOST/DB (default: MEMIDEX_INDEX_URL).")
    ] = None,
    branch: Annotated[str | None, typer.Option(
        "--branch", help="The branch to serve (default: the checked-out one).")] = None,
    rewind: Annotated[bool, typer.Option(
        "--rewind", help="Serve the commit even when the index holds a newer one of the "
        "branch.")] = False,
    jobs: Annotated[int | None, typer.Option(
        "--jobs", min=1, help="Parser processes for a full load (default: up to 2).")] = None,
    root: Annotated[Path | None, typer.Option(
        "--root", help="Repository root (as memidex --root).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Bring the team index to the records at the branch's HEAD: a full load the first
    time, then only what changed since the commit it holds, in one transaction."""
    from memidex.config import find_root
    from memidex.teamindex import push

    target = url or os.environ.get("MEMIDEX_INDEX_URL")
    if not target:
        raise ConfigError("no team index URL: pass --url or set MEMIDEX_INDEX_URL",
                          hint="e.g. --url postgresql://memidex:PASSWORD@db.internal/memidex")
    where = root or STATE.root or find_root()
    report = push(where, target, branch=branch, rewind=rewind, jobs=jobs)
    if json_out:
        from memidex.cli.render import print_json

        print_json(report.as_dict())
        return
    line = (f"{report.action}: {report.branch} at {report.commit[:12]} — {report.records} "
            f"record(s)")
    if report.action == "incremental":
        line += f" (+{report.added} ~{report.changed} -{report.deleted})"
    sys.stdout.write(f"{line}, {report.policies} polic(ies), {report.seconds:.2f} s "
                     f"({report.url})\n")
    for p in report.problems:
        sys.stdout.write(f"  problem: {p}\n")
    for note in report.notes:
        sys.stdout.write(f"  note: {note}\n")
