"""``memidex index push`` (docs/team-index.md): bring the team index to the branch's HEAD.

Registered on :data:`memidex.cli.base.app` (as ``index``) when :mod:`memidex.cli.commands`
loads. The command parses its options, takes the URL from ``--url``, else ``[index] url``
(``MEMIDEX_INDEX_URL`` overrides it), and calls :func:`memidex.teamindex.push`; a
:class:`MemidexError` leaves it for the one handler in :mod:`memidex.cli.main` (one
``error:`` line, the exit code).
"""


import sys
from pathlib import Path
from typing import Annotated

import typer

from memidex.cli.base import STATE, JsonOpt, app

__all__ = ["index"]

index = typer.Typer(
    help="The team index on PostgreSQL: a derived copy of a branch's records that readers "
    "share (docs/team-index.md).",
    no_args_is_help=True,
)
app.add_typer(index, name="index")


@index.command("push")
def push_command(
    url: Annotated[str | None, typer.Option(
        "--url", help="postgresql://USER:PASSWORD@HOST/DB (default: MEMIDEX_INDEX_URL, "
        "else [index] url in memidex.toml).")
    ] = None,
    branch: Annotated[str | None, typer.Option(
        "--branch", help="The branch to serve (default: [index] branch, else the "
        "checked-out one).")] = None,
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
    time, then only what changed since the commit it holds, in one transaction.

    Reads the commit's records and policies from git (never the work tree), and merges
    this machine's run store (test anchors, run counters) into the branch's. Writes
    nothing to the records; readers see the old snapshot or the new one, whole.

    --json: {action, branch, commit, previous, records, added, changed, deleted, policies,
    problems, test_anchors, seconds, url (password masked), notes}
    (docs/schemas/index-push.schema.json).
    """
    from memidex.app import Memidex

    with Memidex(root or STATE.root) as mx:
        report = mx.push_index(url, branch=branch, rewind=rewind, jobs=jobs)
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
