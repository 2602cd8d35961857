"""The terminal habits every command shares (git's and gh's): colour, the pager, quiet,
and tables for people but tab-separated values for pipes.

* colour: ``--color auto|always|never``; ``auto`` colours only a terminal, never with
  ``NO_COLOR`` or ``TERM=dumb``, always with ``FORCE_COLOR`` or ``CLICOLOR_FORCE`` set
  (to anything but ``0``);
* the pager: output longer than the terminal is sent through ``$MEMIDEX_PAGER``, else
  ``$PAGER``, else ``less -FRX`` — only when stdout is a terminal, never with
  ``--no-pager`` (or an empty pager variable, or ``cat``);
* ``--quiet``: no progress lines, no notes or warnings — the results only;
* ``--format table|tsv|csv|json`` for listings: the default is ``table`` on a terminal,
  ``tsv`` (a header line, then one row a line, fields separated by tabs) otherwise.

No rich and no typer here: the fast path (search, brief) reads these settings too.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Sequence

from memidex.plain import Plain

__all__ = ["FORMATS", "SETTINGS", "colour", "emit", "listing_format", "paged", "rows_text",
           "stdout_is_terminal"]

FORMATS = ("table", "tsv", "csv", "json")


class Settings(Plain):
    """The terminal settings of this command: ``color`` auto, always or never;
    ``paging``: inside :func:`paged`, stdout is a buffer standing for a terminal."""

    __slots__ = ("color", "pager", "quiet", "paging")

    def __init__(self, color: str = "auto", pager: bool = True, quiet: bool = False,
                 paging: bool = False) -> None:
        self.color = color
        self.pager = pager
        self.quiet = quiet
        self.paging = paging


SETTINGS = Settings()


def stdout_is_terminal() -> bool:
    """Whether what is printed goes to a terminal (also inside :func:`paged`)."""
    return SETTINGS.paging or sys.stdout.isatty()


def _forced() -> bool:
    return any(os.environ.get(v, "") not in ("", "0") for v in ("FORCE_COLOR",
                                                                 "CLICOLOR_FORCE"))


def colour(stream: object = None) -> bool:
    """Whether output to ``stream`` (default stdout) is coloured."""
    if SETTINGS.color == "always":
        return True
    if SETTINGS.color == "never":
        return False
    if os.environ.get("NO_COLOR"):
        return False
    if _forced():
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    if stream is None:
        return stdout_is_terminal()
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def listing_format(given: str | None) -> str:
    """The format of a listing: ``given``, else ``table`` on a terminal and ``tsv``
    otherwise. An unknown one is a usage error."""
    from memidex.errors import UsageError

    if given is None:
        return "table" if stdout_is_terminal() else "tsv"
    if given not in FORMATS:
        raise UsageError(f"unknown --format {given!r}: use {', '.join(FORMATS)}")
    return given


def _cell(value: object) -> str:
    """One TSV/CSV field: control characters (a tab, a line break) as spaces."""
    text = "" if value is None else str(value)
    return "".join(ch if ch.isprintable() else " " for ch in text)


def rows_text(header: Sequence[str], rows: Sequence[Sequence[object]], fmt: str) -> str:
    """``rows`` as TSV or CSV, with a header line."""
    if fmt == "csv":
        import csv

        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(header)
        writer.writerows([[_cell(v) for v in row] for row in rows])
        return buf.getvalue()
    lines = ["\t".join(header)] + ["\t".join(_cell(v) for v in row) for row in rows]
    return "\n".join(lines) + "\n"


def _pager() -> list[str] | None:
    if not SETTINGS.pager or not sys.stdout.isatty():
        return None
    given = os.environ.get("MEMIDEX_PAGER", os.environ.get("PAGER"))
    command = "less -FRX" if given is None else given
    if not command.strip() or command.strip() == "cat":
        return None
    import shlex
    import shutil

    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    return argv if shutil.which(argv[0]) else None


def _lines() -> int:
    import shutil

    return shutil.get_terminal_size().lines


def emit(text: str) -> None:
    """Write ``text`` to stdout — through the pager when it is longer than the terminal
    (see the module doc)."""
    pager = _pager()  # (imports shutil when there is a pager)
    if pager is not None and text.count("\n") >= _lines():
        import subprocess

        env = dict(os.environ)
        env.setdefault("LESS", "FRX")
        sys.stdout.flush()
        try:
            proc = subprocess.Popen(pager, stdin=subprocess.PIPE, env=env)
        except OSError:
            pass
        else:
            assert proc.stdin is not None
            try:
                proc.stdin.write(text.encode("utf-8", "replace"))
                proc.stdin.close()
            except BrokenPipeError:  # the reader quit the pager early
                pass
            proc.wait()
            return
    sys.stdout.write(text)


class paged:  # noqa: N801  (used as `with paged():`)
    """Collect what a command prints to a terminal and :func:`emit` it at the end (so a
    long listing goes through the pager); a no-op when stdout is not a terminal or the
    pager is off."""

    def __enter__(self) -> None:
        self._saved = None
        if _pager() is None:
            return
        self._saved = sys.stdout
        self._buffer = io.StringIO()
        SETTINGS.paging = True
        sys.stdout = self._buffer

    def __exit__(self, *exc: object) -> None:
        if self._saved is None:
            return
        sys.stdout = self._saved
        SETTINGS.paging = False
        emit(self._buffer.getvalue())
