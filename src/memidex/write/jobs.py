"""What the write route carries: a :class:`Job`, its :data:`Handler` and its
:class:`JobResult` (:mod:`memidex.write.route` runs them; :mod:`memidex.write.inbox`
queues them for a daemon)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memidex.write.writer import Change, WriterSession

__all__ = ["CHANGES", "Handler", "Job", "JobResult"]

_set = object.__setattr__  # a frozen value's fields, set once in __init__

CHANGES = "changes"
"""The built-in job: one change set of records (``payload["changes"]``)."""

Handler = Callable[["WriterSession", Mapping[str, Any]], dict[str, Any]]
"""A job's handler: runs under the lease inside the session, returns the job's result
(JSON data: it may travel back from the daemon through the inbox)."""


class Job:
    """One unit of writing. ``payload`` is what the handler gets when the job is queued
    for a daemon (JSON data); ``local`` what it gets when it runs in this process (it may
    hold objects, so nothing is encoded and decoded again; default: ``payload()``)."""

    kind: str
    command: str
    payload: Callable[[], dict[str, Any]]
    local: Mapping[str, Any] | None
    local_only: bool
    changes: Sequence[Change]
    run_id: str | None
    ordinal: int | None

    __slots__ = ("kind", "command", "payload", "local", "local_only", "changes", "run_id",
                 "ordinal")

    def __init__(self, kind: str, command: str, payload: Callable[[], dict[str, Any]],
                 local: Mapping[str, Any] | None = None, local_only: bool = False,
                 changes: Sequence[Change] = (), run_id: str | None = None,
                 ordinal: int | None = None) -> None:
        _set(self, "kind", kind)
        _set(self, "command", command)
        _set(self, "payload", payload)
        _set(self, "local", local)
        _set(self, "local_only", local_only)
        _set(self, "changes", changes)
        _set(self, "run_id", run_id)
        _set(self, "ordinal", ordinal)

    def __repr__(self) -> str:
        return (f"Job(kind={self.kind!r}, command={self.command!r}, "
                f"payload={self.payload!r}, local={self.local!r}, "
                f"local_only={self.local_only!r}, changes={self.changes!r}, "
                f"run_id={self.run_id!r}, ordinal={self.ordinal!r})")

    def _key(self) -> tuple[object, ...]:
        return (self.kind, self.command, self.payload, self.local, self.local_only,
                self.changes, self.run_id, self.ordinal)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Job) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")


class JobResult:
    """What a job returned (``result``), or, queued with ``no_wait``, the id of the
    daemon's inbox item (``queued``); for a change set, which changes wrote."""

    result: dict[str, Any]
    queued: str | None
    changed: tuple[bool, ...]

    __slots__ = ("result", "queued", "changed")

    def __init__(self, result: dict[str, Any] | None = None, queued: str | None = None,
                 changed: tuple[bool, ...] = ()) -> None:
        _set(self, "result", result if result is not None else dict())
        _set(self, "queued", queued)
        _set(self, "changed", changed)

    def __repr__(self) -> str:
        return (f"JobResult(result={self.result!r}, queued={self.queued!r}, "
                f"changed={self.changed!r})")

    def _key(self) -> tuple[object, ...]:
        return (self.result, self.queued, self.changed)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, JobResult) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")
