"""Working memory: an agent's short notes to itself during one run (SPEC's "notes for
itself during a run"; docs/runs.md, "Working memory").

::

    .agent-qa/notes/<run_id>.jsonl     one line per note: {"at": "2026-…Z", "text": "…"}

Notes are local state (under the state folder, ignored by git), masked on the way in
like everything memidex stores (the secrets file's values, home paths), and live for one
run only: :func:`forget` removes a run's notes when that run is ingested, and
:func:`prune` removes every notes file older than the configured age
(``notes_max_age_hours``) whenever a note is added. They are never read by the ingest,
never turned into records and never indexed. One ``O_APPEND`` write per note, so two
processes adding notes to the same run never interleave a line.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from pathlib import Path

from memidex.config import Config
from memidex.errors import InvalidInputError, StateDamagedError, UsageError
from memidex.masking import Masker
from memidex.plain import Frozen, set_field
from memidex.records.ids import RUN_ID_PATTERN
from memidex.store.fsio import append, dump_json, load_json, refuse_symlink

__all__ = ["MAX_NOTE_CHARS", "MAX_NOTES", "Note", "add", "forget", "notes", "notes_dir",
           "notes_path", "prune"]


MAX_NOTE_CHARS = 2000
"""The longest note (characters): a note is a line or two, not a log."""
MAX_NOTES = 500
"""The most notes one run keeps: a run's working memory, not a transcript."""

_RUN_ID_RE = re.compile(RUN_ID_PATTERN[1:-1])


class Note(Frozen):
    """One note: when it was written (UTC, ISO 8601) and its masked text."""

    at: str
    text: str

    __slots__ = ("at", "text")

    def __init__(self, at: str, text: str) -> None:
        set_field(self, "at", at)
        set_field(self, "text", text)

    def to_json(self) -> dict[str, str]:
        return {"at": self.at, "text": self.text}


def notes_dir(config: Config) -> Path:
    return config.state_path / "notes"


def notes_path(config: Config, run_id: str) -> Path:
    if not isinstance(run_id, str) or not _RUN_ID_RE.fullmatch(run_id):
        raise UsageError(f"run id {_short(run_id)!r} must be letters, digits, . _ - "
                         "(starting with a letter or digit, at most 128)")
    return notes_dir(config) / f"{run_id}.jsonl"


def _short(value: object, limit: int = 60) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit] + "…"


def add(config: Config, run_id: str, text: str, *, masker: Masker,
        ingested: bool = False, now: float | None = None) -> Note:
    """Append one note to run ``run_id``'s working memory (masked), after pruning notes
    older than ``config.notes_max_age_hours``. ``ingested``: the run is already ingested
    — refused, its working memory is gone with it."""
    path = notes_path(config, run_id)
    if ingested:
        raise UsageError(f"run {run_id} is already ingested: its working memory is gone",
                         hint="notes live for one run only; use a new run id for the "
                         "next run")
    if not isinstance(text, str) or not text.strip():
        raise UsageError("a note needs some text")
    if len(text) > MAX_NOTE_CHARS:
        raise InvalidInputError(f"a note is at most {MAX_NOTE_CHARS} characters (this one "
                                f"has {len(text):,})", hint="keep notes short; a record "
                                "is what outlives the run")
    prune(config, now=now)
    if len(notes(config, run_id)) >= MAX_NOTES:
        raise InvalidInputError(f"run {run_id} already has {MAX_NOTES} notes",
                                hint="working memory is for short notes during one run")
    stamp = datetime.fromtimestamp(time.time() if now is None else now, UTC)
    note = Note(stamp.strftime("%Y-%m-%dT%H:%M:%SZ"), masker.mask(text.strip()))
    folder = path.parent
    refuse_symlink(config.state_path)
    folder.mkdir(parents=True, exist_ok=True)
    refuse_symlink(folder)
    append(path, dump_json(note.to_json()))
    return note


def notes(config: Config, run_id: str) -> list[Note]:
    """Run ``run_id``'s notes, oldest first (none: an empty list). A line that is not a
    note (a torn write, an edit by hand) is skipped."""
    path = notes_path(config, run_id)
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise StateDamagedError(f"{path}: the notes cannot be read ({exc.strerror})"
                                ) from None
    out: list[Note] = []
    for line in data.splitlines():
        try:
            entry = load_json(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("text"), str) and \
                isinstance(entry.get("at"), str):
            out.append(Note(entry["at"], entry["text"]))
    return out


def forget(config: Config, run_id: str) -> bool:
    """Remove run ``run_id``'s notes (the ingest calls this once the run is ingested);
    whether there were any."""
    path = notes_path(config, run_id)
    try:
        path.unlink()
    except (FileNotFoundError, NotADirectoryError):
        return False
    return True


def prune(config: Config, *, now: float | None = None) -> list[str]:
    """Remove every run's notes last written more than ``config.notes_max_age_hours``
    ago; the run ids removed."""
    folder = notes_dir(config)
    limit = (time.time() if now is None else now) - config.notes_max_age_hours * 3600
    removed: list[str] = []
    try:
        paths = sorted(folder.glob("*.jsonl"))
    except OSError:
        return removed
    for path in paths:
        try:
            if path.stat().st_mtime < limit:
                path.unlink()
                removed.append(path.name.removesuffix(".jsonl"))
        except FileNotFoundError:
            continue
    return removed
