"""The curation commands (``knowledge confirm|supersede|deprecate|quarantine|release|purge``)
and ``memidex daemon``: thin typer commands over :class:`memidex.app.Memidex`.

Registered on the groups of :mod:`memidex.cli.base` when :mod:`memidex.cli.commands`
imports this module. Errors are raised, never turned into exit codes here.
"""


import sys
from typing import Annotated, Any

import typer

from memidex.cli import complete
from memidex.cli.base import IdArg, JsonOpt, WaitOpt, app, knowledge, memidex
from memidex.errors import UsageError

__all__: list[str] = []

OrdinalOpt = Annotated[
    int | None,
    typer.Option("--ordinal", min=0, help="Run ordinal where the change takes effect."),
]


def _done(result: Any, json_out: bool) -> None:
    if json_out:
        from memidex.cli.render import print_json

        print_json(result.to_json())
    else:
        from memidex.cli.plain import safe

        sys.stdout.write(f"{result.change} {safe(result.id)} ({result.status})\n"
                         f"  {safe(result.path)}\n")


@knowledge.command()
def confirm(
    record_id: IdArg,
    run_ordinal: Annotated[
        int | None,
        typer.Option("--run-ordinal", min=0, help="The run that confirmed it (default: the "
                     "later of valid.from and the current last_confirmed)."),
    ] = None,
    wait: WaitOpt = 10.0,
    json_out: JsonOpt = False,
) -> None:
    """Count one more confirmation: trust.confirmations + 1, trust.last_confirmed set to
    the run ordinal, and a candidate becomes active.

    --json: {id, path, status, change} (docs/schemas/confirm.schema.json).
    """
    with memidex(wait=wait) as m:
        result = m.confirm(record_id, run_ordinal=run_ordinal)
    _done(result, json_out)


@knowledge.command()
def supersede(
    record_id: IdArg,
    title: Annotated[str | None, typer.Option("--title", "-t", help="The new version's "
                                              "title (a new version of this record).")
                     ] = None,
    body: Annotated[str | None, typer.Option("--body", "-b", help="The new version's text "
                                             "(default: empty).")] = None,
    by: Annotated[str | None, typer.Option("--by", metavar="OTHER_ID", help="The record "
                                           "(about another subject) that replaces this one.",
                                           autocompletion=complete.record_ids)] = None,
    ordinal: OrdinalOpt = None,
    wait: WaitOpt = 10.0,
    json_out: JsonOpt = False,
) -> None:
    """Supersede a record, in place or by another record.

    With --title: a new version of the same record from --ordinal N on; the current
    version moves into `history` with its window closed at N. With --by OTHER_ID: the
    record becomes superseded (valid.until, relations.superseded_by) and OTHER lists it in
    relations.supersedes, as one change set.

    --json: {id, path, status, change} (docs/schemas/supersede.schema.json).
    """
    if title is None and by is None:
        raise UsageError("supersede needs --title (a new version of this record) or --by "
                         "OTHER_ID (this record is replaced by another one)",
                         hint="e.g. memidex knowledge supersede ID --title \"what holds now\"")
    if title is not None and by is not None:
        raise UsageError("give --title or --by, not both",
                         hint="--title makes a new version; --by replaces it by another record")
    if body is not None and by is not None:
        raise UsageError("--body goes with --title, not with --by")
    with memidex(wait=wait) as m:
        result = m.supersede(record_id, title=title, body=body, ordinal=ordinal, by=by)
    _done(result, json_out)


@knowledge.command()
def deprecate(
    record_id: IdArg,
    ordinal: Annotated[int | None, typer.Option("--ordinal", min=0, help="Close its "
                                                "validity window here (valid.until).")
                       ] = None,
    wait: WaitOpt = 10.0,
    json_out: JsonOpt = False,
) -> None:
    """Mark a record deprecated (no longer served).

    --json: {id, path, status, change} (docs/schemas/deprecate.schema.json).
    """
    with memidex(wait=wait) as m:
        result = m.deprecate(record_id, ordinal=ordinal)
    _done(result, json_out)


@knowledge.command()
def quarantine(record_id: IdArg, wait: WaitOpt = 10.0, json_out: JsonOpt = False) -> None:
    """Quarantine a record: never served, kept for a person to look at.

    --json: {id, path, status, change} (docs/schemas/quarantine.schema.json).
    """
    with memidex(wait=wait) as m:
        result = m.quarantine(record_id)
    _done(result, json_out)


@knowledge.command()
def release(record_id: IdArg, wait: WaitOpt = 10.0, json_out: JsonOpt = False) -> None:
    """Release a quarantined record back to its previous status (superseded when it names
    a replacement, deprecated when its window is closed, else active).

    --json: {id, path, status, change} (docs/schemas/release.schema.json).
    """
    with memidex(wait=wait) as m:
        result = m.release(record_id)
    _done(result, json_out)


@knowledge.command()
def purge(
    record_id: IdArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask first.")] = False,
    wait: WaitOpt = 10.0,
    json_out: JsonOpt = False,
) -> None:
    """Delete a record and every trace of it: the file (through the fenced writer), its
    index rows, its queued corrections and journal entries.

    On a terminal it names the record and asks first, unless --yes; without a terminal
    (a script, CI) it does not ask. A maintenance command: refuses at once (exit 3)
    while `memidex daemon` holds the writer lease; waits up to --wait for any other
    writer.

    --json: {id, path, status, change} (docs/schemas/purge.schema.json).
    """
    with memidex(wait=wait) as m:
        if not yes and sys.stdin.isatty() and not json_out:
            from memidex.cli.plain import safe

            shown = m.show(record_id)
            sys.stderr.write(f"purge {safe(shown.record.id)}\n  {safe(shown.record.title)}"
                             f"\n  {safe(shown.path)}\n")
            if not typer.confirm("delete it and every trace of it?", default=False,
                                 err=True):
                raise UsageError("purge not confirmed; nothing changed",
                                 hint="give --yes to purge without being asked")
        result = m.purge(record_id)
    _done(result, json_out)


@app.command()
def daemon(
    once: Annotated[bool, typer.Option("--once", help="Apply what is queued, then exit.")
                    ] = False,
    wait: Annotated[float, typer.Option("--wait", min=0, help="Seconds to wait for the "
                                        "writer lease before giving up with exit 3.")
                    ] = 10.0,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object (what it "
                                           "applied) on stdout when it stops.")] = False,
) -> None:
    """Hold the writer lease and apply the corrections other commands queue.

    While it runs, record-writing commands hand their changes to it through
    queue/corrections/ and wait for it; maintenance commands (rebuild-index, purge)
    refuse at once. It also answers the reading commands (knowledge search, show,
    list, brief, doctor) and runs ingest of other processes over a private socket in the
    state folder, with the bytes they would print themselves, keeping the index open
    and watched (docs/warm.md; MEMIDEX_WARM=0 turns that off in a client). Stops
    cleanly on SIGTERM or Ctrl-C, releasing the lease; exits 3 if it finds it lost the
    lease (paused past the TTL and taken over).

    --json: {pid, epoch, stopped, applied, failed, recovered, pending_model_steps}
    (docs/schemas/daemon.schema.json).
    """

    def log(line: str) -> None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    from memidex.cli.warmserve import serving

    with memidex(wait=wait) as m, serving(m.config.root, log=log, enabled=not once):
        report = m.daemon(once=once, log=log)
    if json_out:
        from memidex.cli.render import print_json

        print_json(report.to_json())
