"""Generate docs/cli.md from the commands' own --help (``make docs``).

``tests/test_docs.py`` fails when docs/cli.md differs from what this prints, so the CLI
reference cannot drift from the code.
"""

from __future__ import annotations

import sys
from pathlib import Path

HEADER = """\
# CLI reference

Generated from `memidex … --help` by `scripts/gen_cli_docs.py` (`make docs`); a test
fails when this page and the code disagree. Exit codes are in [exit-codes.md](exit-codes.md).
"""


def commands() -> list[list[str]]:
    """Every command path, depth first, in the order --help lists them."""
    import typer.main

    from memidex.cli.commands import app

    root = typer.main.get_command(app)
    out: list[list[str]] = []

    def walk(cmd: object, path: list[str]) -> None:
        out.append(path)
        subs = getattr(cmd, "commands", None)
        if isinstance(subs, dict):
            for name, sub in subs.items():
                walk(sub, [*path, name])

    walk(root, [])
    return out


def help_text(path: list[str]) -> str:
    import contextlib
    import io
    import os

    from memidex.cli.main import main

    os.environ["COLUMNS"] = "100"
    os.environ["TERMINAL_WIDTH"] = "100"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main([*path, "--help"])
    return buf.getvalue().rstrip() + "\n"


def render() -> str:
    parts = [HEADER]
    for path in commands():
        title = " ".join(["memidex", *path])
        parts.append(f"\n## `{title}`\n\n```text\n{help_text(path)}```\n")
    return "".join(parts)


def main() -> int:
    target = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
    text = render()
    if "--check" in sys.argv:
        return 0 if target.read_text(encoding="utf-8") == text else 1
    target.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
