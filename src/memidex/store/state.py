"""Local state files: how an owner reads its file back and how it writes it.

Every state file memidex keeps beside the records — the run counters, a product's tests
file, a run's result, a proposal — has one owner module (:mod:`memidex.runstate`) that
loads it with :func:`load_state` and saves it through a :class:`StateWriter`:

* :func:`load_state` answers ``None`` only for a file that is not there; a file that is
  there but cannot be read back (not UTF-8, not JSON, not an object) is a
  :class:`memidex.errors.StateDamagedError` naming it, and an ``OSError`` other than
  "not found" (permission denied, an I/O error) propagates to the one error map. A
  damaged file is never taken for an absent one: a guess would renumber runs or forget
  a test's history.
* A save under the writer lease goes through the writer session (``put_state``), which
  fences it like a record: a writer that lost its lease writes no state either
  (:meth:`memidex.write.writer.WriterSession.put_state`). :data:`DIRECT` writes without a
  lease, for state that is not shared (an import's output) and for tests.
"""

from __future__ import annotations

from pathlib import Path

from memidex.errors import StateDamagedError
from memidex.store.fsio import atomic_write, load_json

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from typing import Any, Protocol
else:  # the protocol is mypy's; at run time a plain base does
    Protocol = object

__all__ = ["DIRECT", "StateWriter", "load_state"]


class StateWriter(Protocol):
    """Where an owner saves its state file: ``put(path, data)`` replaces ``path``'s bytes
    atomically, ``remove(path)`` deletes it (a fenced write under the lease, or a plain
    one)."""

    def put(self, path: Path, data: bytes) -> None: ...

    def remove(self, path: Path) -> None: ...


class _Direct:
    """An atomic write with no lease: for files nobody else writes."""

    def put(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data)

    def remove(self, path: Path) -> None:
        path.unlink(missing_ok=True)


DIRECT: StateWriter = _Direct()


def load_state(path: Path, *, what: str = "state file") -> dict[str, Any] | None:
    """The JSON object in ``path``, ``None`` when there is no such file; a file that cannot
    be read back is a :class:`StateDamagedError` (``what`` names it in the message)."""
    try:
        raw = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        data = load_json(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        reason = "not UTF-8" if isinstance(exc, UnicodeDecodeError) else "not valid JSON"
        raise StateDamagedError(f"{path}: the {what} is damaged ({reason})") from None
    if not isinstance(data, dict):
        raise StateDamagedError(f"{path}: the {what} is damaged (not a JSON object)")
    return data
