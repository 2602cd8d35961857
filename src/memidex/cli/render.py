"""Human and machine output. rich is imported only when something is rendered for people."""

from __future__ import annotations

import json
import sys

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["console", "escape", "print_json", "printed_json", "reset", "warn"]

_printed = [False]


def print_json(obj: Any) -> None:
    """One JSON object on stdout and nothing else there."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=False) + "\n")
    _printed[0] = True


def warn(text: str) -> None:
    """One ``warning:`` line on stderr (none when ``text`` is empty, or under --quiet):
    e.g. why the local index answered although a team index is configured."""
    from memidex.cli.term import SETTINGS

    if text and not SETTINGS.quiet:
        sys.stderr.write(f"warning: {' '.join(text.split())}\n")


def printed_json() -> bool:
    """Whether this process already printed its JSON object (an error after a report —
    doctor's or check's exit 1 — adds no second object)."""
    return _printed[0]


def reset() -> None:
    """A new command in this process (tests call :func:`memidex.cli.main.main` often)."""
    _printed[0] = False


def console() -> Any:
    """rich for people. Lines are never wrapped by rich (``soft_wrap``: a path or id stays
    whole; a terminal wraps it visually if it must); when stdout is not a terminal a table
    is as wide as its contents, not 80 columns. Colour as :func:`memidex.cli.term.colour`
    says (``--color``, ``NO_COLOR``, ``FORCE_COLOR``, ``CLICOLOR_FORCE``)."""
    import shutil

    from rich.console import Console

    from memidex.cli.term import colour, stdout_is_terminal

    on = colour()
    width = shutil.get_terminal_size().columns if stdout_is_terminal() else 100_000
    return Console(highlight=False, soft_wrap=True, width=width, force_terminal=on,
                   no_color=not on, color_system="standard" if on else None)


def escape(text: str) -> str:
    """``text`` as rich markup shows it literally; rich is imported only when that changes
    anything (a ``[``, or a trailing backslash)."""
    if "[" not in text and not text.endswith("\\"):
        return text
    from rich.markup import escape as rich_escape

    return rich_escape(text)
