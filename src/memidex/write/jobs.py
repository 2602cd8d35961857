"""What the write route carries: a :class:`Job`, its :data:`Handler` and its
:class:`JobResult` (:mod:`memidex.write.route` runs them; :mod:`memidex.write.inbox`
queues them for a daemon)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memidex.plain import Frozen, set_field

if TYPE_CHECKING:
    from memidex.write.writer import Change, WriterSession

__all__ = ["CHANGES", "Handler", "Job", "JobResult"]


CHANGES = "changes"
"""The built-in job: one change set of records (``payload["changes"]``)."""

Handler = Callable[["WriterSession", Mapping[str, Any]], dict[str, Any]]
"""A job's handler: runs under the lease inside the session, returns the job's result
(JSON data: it may travel back from the daemon through the inbox)."""


class Job(Frozen):
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
        set_field(self, "kind", kind)
        set_field(self, "command", command)
        set_field(self, "payload", payload)
        set_field(self, "local", local)
        set_field(self, "local_only", local_only)
        set_field(self, "changes", changes)
        set_field(self, "run_id", run_id)
        set_field(self, "ordinal", ordinal)


class JobResult(Frozen):
    """What a job returned (``result``), or, queued with ``no_wait``, the id of the
    daemon's inbox item (``queued``); for a change set, which changes wrote."""

    result: dict[str, Any]
    queued: str | None
    changed: tuple[bool, ...]

    __slots__ = ("result", "queued", "changed")

    def __init__(self, result: dict[str, Any] | None = None, queued: str | None = None,
                 changed: tuple[bool, ...] = ()) -> None:
        set_field(self, "result", result if result is not None else dict())
        set_field(self, "queued", queued)
        set_field(self, "changed", changed)


