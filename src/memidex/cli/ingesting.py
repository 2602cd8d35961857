"""How ``memidex runs ingest`` and the other learning commands print: text made safe to
show, JSON, a dry run's preview — without typer, so the fast path of ``runs ingest``
(:func:`memidex.cli.fast.run_ingest`) prints with them as the typer commands of
:mod:`memidex.cli.runs` do."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["preview_text", "print_obj", "shown"]


def print_obj(obj: Any) -> None:
    from memidex.cli.render import print_json

    print_json(obj)


def shown(text: object) -> str:
    """``text`` safe to print (control characters shown), escaped for rich only when rich
    would change it."""
    from memidex.cli.plain import safe

    text = safe(str(text))
    if "[" not in text and not text.endswith("\\"):
        return text  # nothing rich's escape would change: rich is not imported for it
    from memidex.cli.render import escape

    return escape(text)


def preview_text(p: Any) -> None:
    """``runs ingest --dry-run``: what the run would teach, as text."""
    from memidex.cli.plain import safe

    out = sys.stdout
    if p.already:
        out.write(f"{safe(p.run_id)}: already ingested at ordinal {p.ordinal}; ingesting it "
                  "again would change nothing\n")
        return
    build = f", build {safe(p.build_tag)}" if p.build_tag else ""
    out.write(f"{safe(p.run_id)} would be ordinal {p.ordinal} of {safe(p.product)}{build}"
              f"{' (CI)' if p.ci else ''} — dry run, nothing was written\n")
    for test_id, cause in sorted(p.analysis.items()):
        out.write(f"  {safe(test_id)}: {cause}\n")
    if not p.changes and not p.proposals:
        out.write("  it would teach nothing new\n")
    for op, rid, title in p.changes:
        out.write(f"  {op:9} {safe(title)}\n            {safe(rid)}\n")
    for pid, op, rid, reason in p.proposals:
        out.write(f"  proposal {pid} ({op} {safe(rid)}): {safe(reason)}\n")
    from memidex.cli.term import SETTINGS

    if not SETTINGS.quiet:
        for note in p.notes:
            out.write(f"  note: {safe(note)}\n")
