"""What the write route carries: a :class:`Job`, its :data:`Handler` and its
:class:`JobResult` (:mod:`memidex.write.route` runs them; :mod:`memidex.write.inbox`
queues them for a daemon)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memidex.write.writer import Change, WriterSession

__all__ = ["CHANGES", "Handler", "Job", "JobResult"]

CHANGES = "changes"
"""The built-in job: one change set of records (``payload["changes"]``)."""

Handler = Callable[["WriterSession", Mapping[str, Any]], dict[str, Any]]
"""A job's handler: runs under the lease inside the session, returns the job's result
(JSON data: it may travel back from the daemon through the inbox)."""


@dataclass(frozen=True)
class Job:
    """One unit of writing. ``payload`` is what the handler gets when the job is queued
    for a daemon (JSON data); ``local`` what it gets when it runs in this process (it may
    hold objects, so nothing is encoded and decoded again; default: ``payload()``)."""

    kind: str
    command: str
    payload: Callable[[], dict[str, Any]]
    local: Mapping[str, Any] | None = None
    local_only: bool = False
    changes: Sequence[Change] = ()
    run_id: str | None = None
    ordinal: int | None = None


@dataclass(frozen=True)
class JobResult:
    """What a job returned (``result``), or, queued with ``no_wait``, the id of the
    daemon's inbox item (``queued``); for a change set, which changes wrote."""

    result: dict[str, Any] = field(default_factory=dict)
    queued: str | None = None
    changed: tuple[bool, ...] = ()
