"""Who a process is, in a way that survives pid reuse and reboots; whether it still runs.

Used by the lease (is the holder alive?), the journal (is a change set's owner alive?) and
the daemon's inbox (is the daemon alive?).
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

from memidex.plain import Frozen, set_field

__all__ = ["ProcessId", "boot_id", "current_process", "gone_reason", "host_name",
           "kernel_clock", "pid_start_time", "process_alive"]


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


class ProcessId(Frozen):
    """Who a process is, in a way that survives pid reuse and reboots."""

    pid: int
    start: int | None
    boot_id: str
    host: str

    __slots__ = ("pid", "start", "boot_id", "host")

    def __init__(self, pid: int, start: int | None, boot_id: str, host: str) -> None:
        set_field(self, "pid", pid)
        set_field(self, "start", start)
        set_field(self, "boot_id", boot_id)
        set_field(self, "host", host)

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
