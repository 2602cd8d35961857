"""``memidex notes add|list --run R``: working memory, an agent's short notes to itself
during one run (:meth:`memidex.app.Memidex.note_add`, docs/runs.md "Working memory").

Registered on :data:`memidex.cli.base.app` when :mod:`memidex.cli.commands` imports
this module. Errors are raised, never turned into exit codes here.
"""


import sys
from typing import Annotated

import typer

from memidex.cli import complete
from memidex.cli.base import JsonOpt, ListFormatOpt, app, memidex

__all__: list[str] = []

notes_app = typer.Typer(
    help="Working memory: short notes to self during one run, kept under .agent-qa/, "
    "masked, gone once the run is ingested; never records, never indexed.",
    no_args_is_help=True,
)
app.add_typer(notes_app, name="notes")

RunOpt = Annotated[str, typer.Option("--run", "-r", metavar="RUN_ID",
                                     help="The run the notes belong to (its run_id).",
                                     autocompletion=complete.run_ids)]


@notes_app.command("add")
def add(
    text: Annotated[str, typer.Argument(metavar="TEXT", help="The note (at most 2,000 "
                                        "characters); - reads it from standard input.")],
    run: RunOpt,
    json_out: JsonOpt = False,
) -> None:
    """Add one note to run RUN_ID's working memory (masked like everything memidex
    keeps). Refused once the run is ingested: its notes are gone with it.

    --json: {run_id, note: {at, text}, count} (docs/schemas/notes-add.schema.json).
    """
    if text == "-":
        text = sys.stdin.read(1 << 16)
    with memidex() as m:
        added = m.note_add(run, text)
    if json_out:
        from memidex.cli.render import print_json

        print_json(added.to_json())
        return
    from memidex.cli.plain import safe

    sys.stdout.write(f"noted for {safe(run)} ({added.count} note(s)): "
                     f"{safe(added.note.text)}\n")


@notes_app.command("list")
def list_(run: RunOpt, fmt: ListFormatOpt = None, json_out: JsonOpt = False) -> None:
    """Run RUN_ID's notes, oldest first (none once the run is ingested). A table on a
    terminal, tab-separated values (at, text) otherwise.

    --json: {run_id, notes: [{at, text}]} (docs/schemas/notes-list.schema.json).
    """
    from memidex.cli import views
    from memidex.cli.term import listing_format

    chosen = "json" if json_out else listing_format(fmt)
    with memidex() as m:
        listing = m.notes(run)
    if chosen == "json":
        from memidex.cli.render import print_json

        print_json(listing.to_json())
        return
    if not listing.notes and chosen == "table":
        from memidex.cli.plain import safe

        sys.stdout.write(f"no notes for run {safe(run)}.\n")
        return
    views.table(["at", "text"], [[n.at, n.text] for n in listing.notes], chosen,
                fold=("text",))
