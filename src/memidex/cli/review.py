"""Git-native review: ``memidex merge-driver`` (git's merge driver for records) and
``memidex knowledge review`` (what a branch changes in knowledge).

Registered on the groups of :mod:`memidex.cli.base` when :mod:`memidex.cli.commands`
imports this module. Errors are raised, never turned into exit codes here.
"""


import sys
from typing import Annotated, Any

import typer

from memidex.cli.base import JsonOpt, app, knowledge, memidex

__all__: list[str] = []


@app.command("merge-driver")
def merge_driver(
    base: Annotated[str, typer.Argument(metavar="BASE", help="%O: the merge base's version "
                                        "(an empty file when the record is new on both "
                                        "sides).")],
    ours: Annotated[str, typer.Argument(metavar="OURS", help="%A: our version; the merged "
                                        "result is written here.")],
    theirs: Annotated[str, typer.Argument(metavar="THEIRS", help="%B: their version.")],
    path: Annotated[str, typer.Argument(metavar="PATH", help="%P: the record's path in the "
                                        "repository (for messages).")] = "",
) -> None:
    """git's merge driver for records: a field-level three-way merge of one record.

    Set up by `memidex init` (.gitattributes and this clone's git config:
    `memidex merge-driver %O %A %B %P`). Evidence is united, confirmations add up, the
    more cautious status wins; when both sides rewrote the title or body differently it
    writes git's conflict markers into the body and exits 1, and git reports a conflict
    as usual. See docs/review.md.
    """
    from memidex.store.gitsetup import run_merge_driver

    code, note = run_merge_driver(base, ours, theirs, path)
    if code:
        from memidex.errors import ProblemsFound

        raise ProblemsFound(note or "merge conflict", hint="resolve the markers, then "
                            "`git add` the file")
    if note:
        sys.stderr.write(note + "\n")


@knowledge.command()
def review(
    base: Annotated[str | None, typer.Argument(metavar="[BASE]", help="The revision to "
                                               "compare with (default: the merge base of "
                                               "HEAD with the default branch).")] = None,
    head: Annotated[str | None, typer.Argument(metavar="[HEAD]", help="The revision under "
                                               "review (default: the working tree).")
                    ] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="markdown (a PR comment), json, "
                                     "or github (appends the markdown to "
                                     "$GITHUB_STEP_SUMMARY and prints annotations).")
                   ] = "markdown",
    json_out: JsonOpt = False,
) -> None:
    """What a branch changes in knowledge, per product: added, promoted, confirmed (trust
    before -> after), superseded (old and new side by side), deprecated, quarantined,
    purged; and what needs a human look (a person's record changed by automation, an
    active record retired, a large rewrite, a record failing validation, a possible
    secret). Reads git objects directly, not checkouts. See docs/review.md.
    """
    from memidex.errors import UsageError

    if json_out:
        fmt = "json"
    if fmt not in ("markdown", "json", "github"):
        raise UsageError(f"unknown --format {fmt!r}: use markdown, json or github")
    from memidex.cli.plain import with_ticker

    with memidex(reading=True) as m:
        report = with_ticker("reviewing", lambda: m.review(base, head), quiet=fmt == "json")
    if fmt == "json":
        from memidex.cli.render import print_json

        print_json(report.to_json())
        return
    text = markdown(report)
    if fmt == "github":
        import os

        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:
            with open(summary, "a", encoding="utf-8") as fh:
                fh.write(text)
        from memidex.cli.views import github_data, github_property

        for c in report.attention:
            for reason in c.attention:
                sys.stdout.write(f"::warning file={github_property(c.path)}::"
                                 f"{github_data(c.id + ': ' + reason)}\n")
        return
    from memidex.cli.term import emit

    emit(text)


def _md(text: str) -> str:
    """One line of record text, inert in Markdown tables."""
    import re

    from memidex.cli.plain import safe

    # no table cell, code span, link or image from record text (or a file name)
    return re.sub(r"([\\`\[\]|])", r"\\\1", safe(text).replace("\n", " ")
                  ).replace("<", "&lt;")


def _link(c: Any) -> str:
    """The record's id linked to its file; both inert whatever the file is called."""
    from urllib.parse import quote

    return f"[{_md(c.id)}](<{quote(c.path, safe='/')}>)"


def _trust(t: dict[str, Any] | None) -> str:
    if t is None:
        return "-"
    seen = t.get("last_confirmed")
    return (f"{t['confirmations']}✓ {t['contradictions']}✗ "
            + ("never confirmed by a run" if seen is None else f"@{seen}"))


def markdown(report: Any) -> str:
    """The review as Markdown, for a pull-request comment or the job summary."""
    lines = [f"## Knowledge review: {len(report.changes)} record change(s)", "",
             f"`{report.base[:12]}` → {report.head}", ""]
    if report.attention:
        lines += ["### Needs a human look", ""]
        for c in report.attention:
            for reason in c.attention:
                lines.append(f"- {_link(c)}: {_md(reason)}")
        lines.append("")
    for product, changes in report.by_product().items():
        lines += [f"### {_md(product)}", "", "| change | record | title | trust |",
                  "|---|---|---|---|"]
        sides = []
        for c in changes:
            old_t = c.old["trust"] if c.old else None
            new_t = c.new["trust"] if c.new else None
            trust = (f"{_trust(old_t)} → {_trust(new_t)}" if c.verb == "confirmed"
                     else _trust(new_t or old_t))
            lines.append(f"| {c.verb} | {_link(c)} | {_md(c.title)} | {trust} |")
            if c.verb == "superseded" and c.old and c.new:
                sides.append(c)
        lines.append("")
        for c in sides:
            assert c.old is not None and c.new is not None
            lines += [f"<details><summary>superseded: <code>{_md(c.id)}</code></summary>", "",
                      "| old | new |", "|---|---|",
                      f"| {_md(c.old['title'])} ({c.old['status']}) | {_md(c.new['title'])} "
                      f"({c.new['status']}) |",
                      f"| {_md(c.old['body'])} | {_md(c.new['body'])} |", "", "</details>", ""]
    if not report.changes:
        lines += ["No record changed.", ""]
    return "\n".join(lines)
