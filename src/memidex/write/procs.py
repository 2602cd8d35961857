"""Who a process is, in a way that survives pid reuse and reboots; whether it still runs.

Used by the lease (is the holder alive?), the journal (is a change set's owner alive?) and
the daemon's inbox (is the daemon alive?).
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["ProcessId", "boot_id", "current_process", "gone_reason", "host_name",
           "kernel_clock", "pid_start_time", "process_alive"]

_set = object.__setattr__  # a frozen value's fields, set once in __init__


@cache
def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return ""


def kernel_clock() -> float | None:
    """Seconds since boot as the kernel counts them (``/proc/uptime``), None off Linux.

    Read from a file, not through ``clock_gettime``: a process's clock functions can be
    faked (libfaketime's ``LD_PRELOAD`` moves its wall AND its monotonic clock), the
    kernel's own count of the time since boot is the same for every process on it."""
    try:
        with open("/proc/uptime", "rb") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


@cache
def host_name() -> str:
    # uname's nodename is what gethostname(2) returns on Linux (without importing socket)
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket

    return socket.gethostname()


def pid_start_time(pid: int) -> int | None:
    """Field 22 of ``/proc/<pid>/stat`` (start time in clock ticks); None if dead or a zombie."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    rest = data[data.rindex(b")") + 2 :].split()
    if rest[0] in (b"Z", b"X"):
        return None
    return int(rest[19])


class ProcessId:
    """Who a process is, in a way that survives pid reuse and reboots."""

    pid: int
    start: int | None
    boot_id: str
    host: str

    __slots__ = ("pid", "start", "boot_id", "host")

    def __init__(self, pid: int, start: int | None, boot_id: str, host: str) -> None:
        _set(self, "pid", pid)
        _set(self, "start", start)
        _set(self, "boot_id", boot_id)
        _set(self, "host", host)

    def __repr__(self) -> str:
        return (f"ProcessId(pid={self.pid!r}, start={self.start!r}, "
                f"boot_id={self.boot_id!r}, host={self.host!r})")

    def _key(self) -> tuple[object, ...]:
        return (self.pid, self.start, self.boot_id, self.host)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProcessId) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")

    def as_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "pid_start": self.start, "boot_id": self.boot_id,
                "host": self.host}


def current_process() -> ProcessId:
    pid = os.getpid()
    return ProcessId(pid, pid_start_time(pid), boot_id(), host_name())


def gone_reason(pid: int | None, start: int | None, boot: str | None,
                host: str | None) -> str | None:
    """Why that process no longer runs — ``rebooted``, ``dead`` or ``reused`` (its pid
    now names another process) — or None while it runs. On another host we cannot tell:
    None (assume alive)."""
    if host is not None and host != host_name():
        return None
    if boot and boot_id() and boot != boot_id():
        return "rebooted"
    now = pid_start_time(pid) if pid is not None else None
    if now is None:
        return "dead"
    return None if start is None or now == start else "reused"


def process_alive(pid: int | None, start: int | None, boot: str | None,
                  host: str | None) -> bool:
    """Whether that process still runs. On another host we cannot tell: assume alive."""
    return pid is not None and gone_reason(pid, start, boot, host) is None
