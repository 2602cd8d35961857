"""The working-memory service: ``memidex notes add|list --run R`` and the MCP tools
``note_add`` / ``notes`` (:mod:`memidex.runstate.notes`, docs/runs.md "Working memory").

A note is local state, not knowledge: it takes no writer lease, is masked on the way in,
and is gone once its run is ingested (or older than ``notes_max_age_hours``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memidex.config import Config

if TYPE_CHECKING:
    from memidex.masking import Masker
    from memidex.runstate.notes import Note

__all__ = ["NoteAdded", "NoteList", "Notes"]


@dataclass(frozen=True)
class NoteAdded:
    """``notes add``: the note as stored (masked) and how many the run now has."""

    run_id: str
    note: Note
    count: int

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "note": self.note.to_json(), "count": self.count}


@dataclass(frozen=True)
class NoteList:
    """``notes list``: a run's notes, oldest first."""

    run_id: str
    notes: tuple[Note, ...]

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "notes": [n.to_json() for n in self.notes]}


class Notes:
    """Working memory over the state folder and the masker."""

    def __init__(self, config: Config, masker: Callable[[], Masker]) -> None:
        self.config = config
        self.masker = masker

    def add(self, run_id: str, text: str) -> NoteAdded:
        from memidex.runstate import notes
        from memidex.runstate.store import RunStore

        notes.notes(self.config, run_id)  # a malformed run id: refused before anything
        ingested = RunStore(self.config).raw(run_id) is not None
        note = notes.add(self.config, run_id, text, masker=self.masker(),
                         ingested=ingested)
        return NoteAdded(run_id, note, len(notes.notes(self.config, run_id)))

    def list(self, run_id: str) -> NoteList:
        from memidex.runstate import notes

        return NoteList(run_id, tuple(notes.notes(self.config, run_id)))
