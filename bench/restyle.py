"""Rewrite a benchmark corpus's front matter the way other tools write records.

    python bench/restyle.py SOURCE_CORPUS TARGET_DIR --style spec|block

``spec``: like the SPEC example — one flow line per key, strings with spaces or
parentheses in double quotes, a comment after some values. ``block``: as
``yaml.safe_dump`` writes it (block mappings and lists, keys in the record's order).
The records mean the same (same ids, same values); only the YAML differs. Used to check
that records memidex did not write rebuild about as fast as its own
(docs/performance.md, "Records written by other tools").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

RECORDS_DIR = os.path.join("agent-qa-knowledge", "memory", "records")
COMMENTS = {"kind": "# fact | caution | procedure | unknown",
            "status": "# candidate | active | superseded | deprecated | quarantined",
            "anchor": "# the main anchor", "valid": "# run ordinals"}


def flow(value: Any) -> str:
    """A value in flow style, strings with spaces or parentheses double-quoted."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False) if (" " in value or "(" in value) \
            else value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    return "{" + ", ".join(f"{k}: {flow(v)}" for k, v in value.items()) + "}"


def restyle_front(front: dict[str, Any], style: str) -> str:
    if style == "block":
        return str(yaml.safe_dump(front, sort_keys=False, allow_unicode=True))
    lines = []
    for key, value in front.items():
        if key in ("evidence", "history"):
            lines.append(f"{key}:")
            lines += [f"  - {flow(item)}" for item in value]
            continue
        line = f"{key}: {flow(value)}"
        lines.append(f"{line:<28} {COMMENTS[key]}" if key in COMMENTS else line)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("source", type=Path)
    p.add_argument("target", type=Path)
    p.add_argument("--style", choices=("spec", "block"), required=True)
    args = p.parse_args(argv)
    if args.target.exists():
        print(f"error: {args.target} exists", file=sys.stderr)
        return 2
    shutil.copytree(args.source, args.target, ignore=shutil.ignore_patterns(".git"))
    for path in sorted((args.target / RECORDS_DIR).rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        end = text.index("\n---\n", 3)
        front = yaml.load(text[4 : end + 1], Loader=yaml.CSafeLoader)  # noqa: S506
        path.write_text("---\n" + restyle_front(front, args.style) + "---\n"
                        + text[end + 5 :], encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
