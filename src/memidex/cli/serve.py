"""``memidex brief``: the typer command over :meth:`memidex.app.Memidex.brief`
(docs/brief.md). Registered on :data:`memidex.cli.base.app` when
:mod:`memidex.cli.commands` loads."""


from typing import Annotated

import typer

from memidex.cli import complete
from memidex.cli.base import STATE, JsonOpt, ProductOpt, app
from memidex.cli.fast import BriefArgs, run_brief

__all__: list[str] = []


@app.command()
def brief(
    test_id: Annotated[str, typer.Argument(metavar="TEST_ID", help="The test to brief, as "
                                           "in the run evidence (e.g. checkout-happy-path).",
                                           autocompletion=complete.test_ids)],
    product: ProductOpt = None,
    anchor: Annotated[
        list[str] | None,
        typer.Option("--anchor", "-a", help="An anchor the test touches (type:value), "
                     "besides those of its past runs; repeatable."),
    ] = None,
    at: Annotated[int | None, typer.Option("--at", help="Serve the brief a run at this "
                                           "ordinal was given (0 .. the next ordinal; "
                                           "default: the next).")] = None,
    budget: Annotated[int | None, typer.Option("--budget", min=1, max=2**63 - 1,
                                               help="Fit the brief "
                                               "into this many tokens (characters / 4): "
                                               "policies first, then whole records by "
                                               "rank.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", "-n", min=1, help="Serve at most "
                                              "this many records (default: [brief] limit, "
                                              "20).")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="markdown or json.")
                   ] = "markdown",
    explain: Annotated[bool, typer.Option("--explain", help="Say why each record is there "
                                          "(markdown; JSON always carries reasons).")
                       ] = False,
    no_record: Annotated[bool, typer.Option("--no-record", help="Do not record the ids "
                                            "served in .agent-qa/served/.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """What a test should know before it runs: the policies that apply, then learned
    records ranked by trust × anchor overlap, app text fenced as untrusted data.

    Never uses vectors; the same inputs give the same bytes. The ids served are recorded
    for the run (`.agent-qa/served/<product>.jsonl`) unless --no-record.

    --json (the same as --format json): {test_id, product, ordinal, next_ordinal, level,
    anchors, fence, notice, policies: [{id, rule, severity}], records: [{id, kind,
    status, candidate, title, body, anchors, trust, tokens, reasons}], withheld, budget,
    notes, source (team or local), commit} (docs/schemas/brief.schema.json).
    """
    run_brief(BriefArgs(STATE.root, test_id, product, list(anchor or ()), at, budget, limit,
                        fmt, explain, no_record, json_out))
