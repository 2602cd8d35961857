"""Which format a report is in, from its first bytes: ``{`` is JSON (Playwright), ``<``
is XML (JUnit); anything else is neither."""

from __future__ import annotations

from pathlib import Path

from memidex.importers.common import ReportError

__all__ = ["FORMATS", "detect_format"]

FORMATS = ("auto", "playwright", "junit")
_BOMS = (b"\xef\xbb\xbf",)


def detect_format(path: Path, head: bytes) -> str:
    """``playwright`` or ``junit`` for a report starting with ``head``."""
    text = head
    for bom in _BOMS:
        if text.startswith(bom):
            text = text[len(bom):]
    text = text.lstrip(b" \t\r\n")
    if text.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ReportError(f"{path}: the report is UTF-16 text; memidex reads UTF-8")
    if text.startswith(b"{"):
        return "playwright"
    if text.startswith(b"<"):
        return "junit"
    if not text:
        raise ReportError(f"{path}: the report is empty")
    if text.startswith(b"["):
        raise ReportError(f"{path}: a JSON list, not a Playwright JSON report (an object "
                          f"with `suites`)")
    raise ReportError(f"{path}: neither JSON nor XML: not a Playwright JSON or JUnit XML "
                      f"report")
