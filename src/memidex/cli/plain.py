"""Search results, a rebuild's progress and its summary as plain text for people, without
rich (its import costs more than a search): colour only on a terminal (and never with
``NO_COLOR``)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from typing import Any, TypeVar

    from memidex.app import SearchResult

__all__ = ["rebuild_text", "safe", "search_text", "with_progress", "with_ticker"]

if TYPE_CHECKING:
    T = TypeVar("T")

_CODES = {"bold": "1", "dim": "2", "green": "32", "yellow": "33", "red": "31",
          "cyan": "1;36"}
_CONFIDENCE_STYLE = {"reliable": "green", "candidate": "yellow", "weak": "red"}


def _colour() -> bool:
    from memidex.cli.term import colour

    return colour()


def _styler(on: bool) -> Callable[[str, str], str]:
    def style(text: str, name: str) -> str:
        return f"\x1b[{_CODES[name]}m{text}\x1b[0m" if on and name in _CODES else text

    return style


def safe(text: str, *, lines: bool = False) -> str:
    """``text`` with every control character (ESC, BEL, CR, C1 controls, bidi and line
    separators …) replaced by a space, so an escape sequence in a title cannot restyle,
    retitle or clear the terminal. ``lines``: keep ``\n`` (a body's line breaks)."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or (lines and ch == "\n") else " " for ch in text)


_ORDER = {
    "lexical": "order: most query words matched first, then score",
    "vector": "order: cosine similarity (score), highest first",
    "hybrid": "order: vector results first, then full-text results (page unfilled)",
}


def search_text(result: SearchResult) -> None:
    on = _colour()
    style = _styler(on)
    scope = result.product or "all products"
    out: list[str] = []
    if not result.results:
        out.append(f"no records match {safe(result.query)!r} in {safe(scope)} "
                   f"(level {result.level}).")
        out.append("try fewer or other words, --status any, or --all-products.")
    else:
        how = result.level if result.strategy == "lexical" else \
            f"{result.strategy}, {result.vector_strategy or result.level}"
        out.append(style(f"{safe(result.query)} — {safe(scope)} ({how}): "
                         f"{len(result.results)} result(s)", "bold"))
        out.append(style(_ORDER.get(result.strategy, _ORDER["lexical"]), "dim"))
        if result.source == "team" and result.commit:
            out.append(style(f"from the team index at {result.commit[:12]}", "dim"))
        for i, h in enumerate(result.results, 1):
            status = "" if h.status == "active" else " " + style(f"({h.status})", "dim")
            confidence = style(f"{h.confidence:<9}", _CONFIDENCE_STYLE.get(h.confidence, ""))
            words = f"{h.matched}/{h.terms} words" if h.terms else ""
            where = "" if result.product is not None else f"{safe(h.product)}  "
            out.append(f"{i:>2}. {confidence} {words:<9} {h.score:6.2f}  {h.kind:<9} "
                       f"{where}{style(safe(h.title), 'bold')}{status}")
            out.append("    " + style(safe(h.id), "dim"))
            snippet = safe(h.snippet)
            if on:
                snippet = snippet.replace("«", "\x1b[1;36m").replace("»", "\x1b[0m")
            if snippet:
                out.append("    " + snippet)
    if result.note:
        out.append(f"{style('note:', 'yellow')} {safe(result.note)}")
    from memidex.cli.term import emit

    emit("\n".join(out) + "\n")


def with_progress(label: str, work: Callable[[Callable[[int, int], None]], T],
                  *, quiet: bool = False) -> T:
    """Run ``work(progress_callback)``, showing ``label done/total`` on stderr (one line,
    redrawn at most ten times a second, erased at the end) when stderr is a terminal."""
    from memidex.cli.term import SETTINGS

    if quiet or SETTINGS.quiet or not sys.stderr.isatty():
        return work(lambda done, total: None)
    started = time.monotonic()
    shown = [0.0]

    def update(done: int, total: int) -> None:
        now = time.monotonic()
        if now - shown[0] >= 0.1 or done == total:
            shown[0] = now
            sys.stderr.write(f"\r{label} {done:,}/{total:,}  {now - started:.1f} s")
            sys.stderr.flush()

    try:
        return work(update)
    finally:
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()


def with_ticker(label: str, work: Callable[[], T], *, quiet: bool = False) -> T:
    """Run ``work()``, showing ``label …  N.N s`` on stderr (redrawn twice a second,
    erased at the end) when stderr is a terminal: progress for a long command whose
    total is not known in advance."""
    import threading

    from memidex.cli.term import SETTINGS

    if quiet or SETTINGS.quiet or not sys.stderr.isatty():
        return work()
    started = time.monotonic()
    done = threading.Event()

    def tick() -> None:
        while not done.wait(0.5):
            sys.stderr.write(f"\r{label} …  {time.monotonic() - started:.1f} s")
            sys.stderr.flush()

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        return work()
    finally:
        done.set()
        ticker.join()
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()


def vectors_text(report: Any) -> None:
    """``models embed`` (and the vectors after ``rebuild-index``)."""
    if report.model_id is None:
        reasons = report.reasons or {}
        why = "; ".join(f"{k}: {v}" for k, v in reasons.items()) or "no model"
        sys.stdout.write(f"no embedding model ({safe(why)}): --strategy vector uses sparse "
                         "tf·idf vectors, which need none\n")
        return
    out = (f"vectors of {safe(report.model_id)} ({report.level}): {report.embedded} "
           f"embedded, {report.reused} from the cache, in {report.seconds:.2f} s")
    if report.missing:
        out += f"; {report.missing} still missing"
    sys.stdout.write(out + "\n")


def rebuild_text(report: Any, path: str) -> None:
    style = _styler(_colour())
    out = [f"indexed {report.records} records and {report.policies} policies in "
           f"{report.seconds:.2f} s -> {safe(path)}"]
    if report.problems:
        out.append(style(f"{len(report.problems)} file problem(s) — the other records are "
                         "indexed:", "yellow"))
        out += [f"  {safe(str(p))}" for p in report.problems[:20]]
        if len(report.problems) > 20:
            out.append(f"  … and {len(report.problems) - 20} more (memidex knowledge check)")
    sys.stdout.write("\n".join(out) + "\n")
