"""What a change set is made of — :class:`Write` and :class:`Remove` — and what a writer
session's recovery found and did on entry (:class:`Recovery`); the values
:mod:`memidex.write.writer` takes and returns (and re-exports)."""

from __future__ import annotations

from memidex.plain import Frozen, Plain, set_field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from memidex.records.model import Record

__all__ = ["Change", "Recovery", "Remove", "Write"]


class Write(Frozen):
    """Write ``record`` to ``records/<kind>/<id>.md``.

    ``expected``: the content hash the caller read (``None``: the file must not exist);
    ``False`` skips that check. Either way a file changed between planning and replacing
    is never clobbered.
    """

    record: Record
    expected: str | None | bool
    current: Record | None
    """The record the caller parsed from the bytes ``expected`` names (optional): the
    writer then does not parse the file again to see whether anything changed."""
    text: str | None
    """``dump_record(record)``, when the caller encoded the record already (optional):
    the writer then does not encode it again."""
    data: bytes | None
    """The bytes whose content hash ``expected`` is, when the caller read them (optional):
    the writer then plans from them instead of reading the file again; the file is
    checked against ``expected`` inside the fence all the same (a file changed meanwhile
    is a ConflictError and nothing of the change set is installed)."""

    __slots__ = ("record", "expected", "current", "text", "data")

    def __init__(self, record: Record, expected: str | None | bool = False,
                 current: Record | None = None, text: str | None = None,
                 data: bytes | None = None) -> None:
        set_field(self, "record", record)
        set_field(self, "expected", expected)
        set_field(self, "current", current)
        set_field(self, "text", text)
        set_field(self, "data", data)


class Remove(Frozen):
    """Delete the record file at ``relpath`` (relative to the repository root)."""

    relpath: str
    expected: str | None | bool

    __slots__ = ("relpath", "expected")

    def __init__(self, relpath: str, expected: str | None | bool = False) -> None:
        set_field(self, "relpath", relpath)
        set_field(self, "expected", expected)


Change = Write | Remove


class Recovery(Plain):
    """What a session found and did on entry."""

    __slots__ = ("staging_removed", "replayed", "skipped_live", "abandoned", "settled")

    staging_removed: list[str]
    replayed: list[str]  # change set ids finished
    skipped_live: list[str]  # owned by a live process
    abandoned: list[str]  # conflicts, moved aside
    settled: list[str]  # interrupted installs marked done

    def __init__(self, staging_removed: list[str] | None = None,
                 replayed: list[str] | None = None, skipped_live: list[str] | None = None,
                 abandoned: list[str] | None = None, settled: list[str] | None = None) -> None:
        self.staging_removed = staging_removed if staging_removed is not None else list()
        self.replayed = replayed if replayed is not None else list()
        self.skipped_live = skipped_live if skipped_live is not None else list()
        self.abandoned = abandoned if abandoned is not None else list()
        self.settled = settled if settled is not None else list()
