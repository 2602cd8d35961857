"""Human and machine output. rich is imported only when something is rendered for people."""

from __future__ import annotations

import json
import sys
from typing import Any

__all__ = ["console", "print_json", "escape"]


def print_json(obj: Any) -> None:
    """One JSON object on stdout and nothing else there."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=False) + "\n")


def console() -> Any:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)


def escape(text: str) -> str:
    from rich.markup import escape as rich_escape

    return rich_escape(text)
