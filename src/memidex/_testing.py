"""The one seam between production code and fault-injection tests.

* :func:`step` marks a numbered protocol step (:data:`STEPS`); it does nothing unless a
  test installed a hook (:func:`set_step_hook`, :func:`crash_at`).
* :func:`inject_io_fault` makes the N-th ``write``/``fsync``/``replace`` fail. Every
  crash-safe file write goes through :mod:`memidex.store.fsio`, so swapping that module's
  one ``os`` name reaches the store, the journal, the ledger and the lease's copies alike.

Nothing here runs in production unless a test asked for it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = ["STATE_STEPS", "STEPS", "at_step", "crash_at", "inject_io_fault", "set_step_hook",
           "step"]

STEPS: tuple[str, ...] = (
    "acquire.begun",      # 1  BEGIN IMMEDIATE held for a grant
    "acquire.copies",     # 2  .epoch/.lease replaced, grant not committed
    "acquire.committed",  # 3  grant committed
    "recover.cleaned",    # 4  staging of older epochs removed, journal not replayed
    "journal.written",    # 5  change set (and the ledger's before/after bytes) durable
    "write.staged",       # 6  one staged file written and fsynced (all staged first)
    "write.begun",        # 7  visibility lock held exclusively, BEGIN IMMEDIATE (the fence)
    "write.checked",      # 8  epoch and token re-read and still ours
    "write.installed",    # 9  one op's os.replace (or unlink) done, folder fsynced
    "write.recorded",     # 10 that op inserted into `applied`, not committed
    "write.committed",    # 11 committed (every op of the change set at once)
    "ledger.written",     # 12 the change set's ledger entry appended and fsynced
    "journal.marked",     # 13 the ops marked done in the journal
    "journal.finished",   # 14 change set removed from the journal
    "release.begun",      # 15 about to clear the holder
)
"""The numbered protocol steps, in the order one session passes them."""

STATE_STEPS: tuple[str, ...] = (
    "state.staged",       # a state file's new bytes durable beside it, not yet fenced in
)
"""Named steps outside the change-set protocol (a session passes them only when it writes
a state file: the run counters, a tests file, a run's result, a proposal)."""

_hook: Callable[[str], None] | None = None


def set_step_hook(hook: Callable[[str], None] | None) -> None:
    """Install (or remove) a test hook called with each step name. Tests only."""
    global _hook
    _hook = hook


def step(name: str) -> None:
    """Mark protocol step ``name``; free unless a test hook is installed."""
    if _hook is not None:
        _hook(name)


def _resolve_step(spec: str) -> tuple[str, int]:
    name, _, nth = spec.partition(":")
    if name.isdigit():
        number = int(name)
        if not 1 <= number <= len(STEPS):
            raise ValueError(f"no protocol step {number} (1..{len(STEPS)})")
        name = STEPS[number - 1]
    if name not in STEPS and name not in STATE_STEPS:
        raise ValueError(f"unknown protocol step {name!r}")
    return name, int(nth) if nth else 1


def at_step(spec: str, action: Callable[[str], None]) -> None:
    """Call ``action(step name)`` at protocol step ``NAME[:N]`` or ``NUMBER[:N]`` (the N-th
    time it is reached, default the first), replacing any other hook. Tests only."""
    name, nth = _resolve_step(spec)
    seen = 0

    def hook(reached: str) -> None:
        nonlocal seen
        if reached == name:
            seen += 1
            if seen == nth:
                action(reached)

    set_step_hook(hook)


def crash_at(spec: str | None, *, code: int = 137) -> None:
    """Make this process ``os._exit(code)`` at protocol step ``NAME[:N]`` or ``NUMBER[:N]``
    (see :func:`at_step`). ``None`` removes the hook. Tests only.
    """
    if spec is None:
        set_step_hook(None)
        return
    at_step(spec, lambda _name: os._exit(code))


class _FaultyOs:
    """``os`` with the N-th ``write``/``fsync``/``replace`` failing (tests only)."""

    def __init__(self, real: ModuleType, op: str, nth: int, err: int) -> None:
        self._real = real
        self._op = op
        self._nth = nth
        self._err = err
        self._seen = 0
        self.fired = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def _tick(self, op: str) -> None:
        if op == self._op:
            self._seen += 1
            if self._seen == self._nth:
                self.fired = True
                raise OSError(self._err, os.strerror(self._err))

    def write(self, fd: int, data: Any) -> int:
        self._tick("write")
        return self._real.write(fd, data)  # type: ignore[no-any-return]

    def fsync(self, fd: int) -> None:
        self._tick("fsync")
        self._real.fsync(fd)

    def replace(self, src: Any, dst: Any) -> None:
        self._tick("replace")
        self._real.replace(src, dst)


def inject_io_fault(op: str, nth: int, err: int) -> Callable[[], bool]:
    """Make the ``nth`` ``os.write``/``os.fsync``/``os.replace`` done through
    :mod:`memidex.store.fsio` fail with ``OSError(err)``. Returns ``undo()``, which restores
    the real calls and says whether the fault fired. Tests only.
    """
    if op not in ("write", "fsync", "replace"):
        raise ValueError(f"cannot inject a fault into {op!r}")
    from memidex.store import fsio

    faulty = _FaultyOs(os, op, nth, err)
    setattr(fsio, "os", faulty)  # noqa: B010 (the seam: swap the one name)

    def undo() -> bool:
        setattr(fsio, "os", os)  # noqa: B010
        return faulty.fired

    return undo

