"""Git integration of the records: the merge driver's set-up (``memidex init``), its
diagnosis (``doctor``) and the driver itself (``memidex merge-driver %O %A %B %P``).

The ``.gitattributes`` line is committed (every clone names the driver); the
``merge.memidex.*`` git config is per clone, so each fresh clone runs ``memidex init``
once (idempotent) — :func:`merge_driver_status` tells ``doctor`` when it is missing.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["DRIVER", "DRIVER_NAME", "append_missing", "attributes_line", "git_output",
           "merge_driver_status", "run_merge_driver", "setup_git"]

DRIVER = "memidex merge-driver -- %O %A %B %P"
"""``--`` ends the options: git passes %P as it is, and a path may start with ``-``."""
DRIVER_NAME = "memidex field-level merge of knowledge records"
ATTRIBUTES_HEADER = "# memidex: merge records field by field (memidex init)"


def attributes_line(records_rel: str) -> str:
    """The ``.gitattributes`` line that sends record files to the driver."""
    return f"{records_rel.rstrip('/')}/**/*.md merge=memidex"


def git_output(root: Path, *args: str) -> str | None:
    """``git args`` in ``root``: its output, stripped, or None when git fails or is missing."""
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                             check=False)
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _is_git(root: Path) -> bool:
    return git_output(root, "rev-parse", "--git-dir") is not None


def _config_get(root: Path, key: str) -> str | None:
    return git_output(root, "config", "--get", key) or None


def append_missing(path: Path, header: str, entries: Sequence[str]) -> str | None:
    """Append the ``entries`` that are not lines of the text file ``path`` yet (creating
    it), under ``header`` unless that is there already, in the file's own line endings
    (CRLF stays CRLF); its other bytes are kept as they are. Returns what ``init``
    reports (``.gitignore``, ``.gitignore (entries)``), or None when nothing was missing."""
    text = path.read_bytes().decode("utf-8", "surrogateescape") if path.exists() else ""
    present = {line.strip() for line in text.splitlines()}
    missing = [e for e in entries if e not in present]
    if not missing:
        return None
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = ([] if header in present else [header]) + missing
    sep = "" if not text or text.endswith(("\n", "\r")) else newline
    added = sep + newline.join(lines) + newline
    path.write_bytes((text + added).encode("utf-8", "surrogateescape"))
    return path.name + (" (entries)" if text else "")


def setup_git(root: Path, knowledge_rel: str | None) -> list[str]:
    """Add the ``.gitattributes`` line for the records under ``knowledge_rel`` (relative
    to ``root``; ``None``: outside the repository, nothing to do) and, in a git
    repository, this clone's ``merge.memidex`` config, when missing. Returns what it
    created (empty: nothing changed)."""
    created: list[str] = []
    if knowledge_rel is None:
        return created
    added = append_missing(root / ".gitattributes", ATTRIBUTES_HEADER,
                           [attributes_line(f"{knowledge_rel}/records")])
    if added is not None:
        created.append(added)
    if _is_git(root):
        wanted = {"merge.memidex.name": DRIVER_NAME, "merge.memidex.driver": DRIVER}
        changed = False
        for key, value in wanted.items():
            if _config_get(root, key) != value:
                git_output(root, "config", "--local", key, value)
                changed = True
        if changed:
            created.append("git config merge.memidex.driver (this clone)")
    return created


def _attributes_name_driver(root: Path) -> bool:
    attributes = root / ".gitattributes"
    try:
        text = attributes.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return any("merge=memidex" in line.split("#", 1)[0].split()
               for line in text.splitlines())


def merge_driver_status(root: Path) -> dict[str, Any]:
    """Whether this clone can run the records' merge driver.

    ``{"attributes": bool, "configured": bool, "driver": str | None, "ok": bool,
    "problem": str, "fix": str}`` — ``ok`` is false when ``.gitattributes`` names the
    driver but this clone's git config lacks it (every fresh clone): git would then fall
    back to its line merge and conflict on records two branches both changed.
    """
    attributes = _attributes_name_driver(root)
    driver = _config_get(root, "merge.memidex.driver") if _is_git(root) else None
    ok = not attributes or driver is not None
    return {
        "attributes": attributes,
        "configured": driver is not None,
        "driver": driver,
        "ok": ok,
        "problem": "" if ok else ".gitattributes sends records to the memidex merge "
                                 "driver, but this clone's git config does not define it",
        "fix": "" if ok else "memidex init",
    }


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        return b""


def _textual(ours: str, base: str, theirs: str, label: str) -> tuple[bytes, bool]:
    """Git's own line merge of the three files (what git does without a driver)."""
    try:
        out = subprocess.run(
            ["git", "merge-file", "-p", "-L", f"ours:{label}", "-L", "base",
             "-L", f"theirs:{label}", ours, base, theirs],
            capture_output=True, check=False)
    except OSError:
        out = None
    if out is not None and 0 <= out.returncode <= 127:
        return out.stdout, out.returncode == 0
    # git could not merge them (binary content, no git): both whole sides, byte for byte
    from memidex.records.merge import marked_text

    text = marked_text(_read(ours).decode("utf-8", "surrogateescape"),
                       _read(theirs).decode("utf-8", "surrogateescape"))
    return text.encode("utf-8", "surrogateescape"), False


def run_merge_driver(base: str, ours: str, theirs: str, path: str = "") -> tuple[int, str]:
    """git's merge driver protocol: merge into the file ``ours`` (``%A``) and return
    (exit code, a note for stderr): 0 a clean merge; 1 a conflict, with git's markers in
    the file (in the record's body for a field conflict; around the whole text when the
    versions do not parse as records)."""
    from memidex.records.merge import merge_texts
    from memidex.store.fsio import atomic_write

    label = path or ours
    base_bytes = _read(base)
    text, result = merge_texts(base_bytes or None, _read(ours), _read(theirs), label)
    if text is None:
        merged, clean = _textual(ours, base, theirs, label)
        atomic_write(Path(ours), merged, durable=False)
        why = result.reason or "the versions could not be merged as records"
        return (0 if clean else 1), f"memidex merge-driver: {label}: {why}; " + (
            "merged line by line" if clean else "left git's line conflict")
    atomic_write(Path(ours), text.encode("utf-8", "surrogateescape"), durable=False)
    if result.conflicts:
        return 1, (f"memidex merge-driver: {label}: both sides changed "
                   f"{', '.join(result.conflicts)} differently; markers in the body")
    return 0, ""
