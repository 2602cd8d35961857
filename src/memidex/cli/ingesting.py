"""``memidex runs ingest --dry-run``'s text: what the run would teach — without typer or
rich, for the fast path of ``runs ingest`` (:func:`memidex.cli.fast.run_ingest`)."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["preview_text"]


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
