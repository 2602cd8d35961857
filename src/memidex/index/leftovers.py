"""The files beside the index that are not the index: build files a killed rebuild left
(``.memidex.sqlite.build-PID-*`` of a process that is gone) and something else where the
index belongs (a folder, say), moved aside so a rebuild can put the index there."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from memidex.store.fsio import swap_into_place

__all__ = ["clear_target", "remove_stale_builds", "stale_builds"]

_BUILD_GLOB = ".{name}.build-*"


def clear_target(target: Path) -> str | None:
    """Something that is not a file where the index belongs (a folder, say): move it aside
    so the new index can be put there, and return where it went (None: nothing to do)."""
    if not target.is_dir() or target.is_symlink():
        return None
    aside = target.with_name(f"{target.name}.aside-{time.strftime('%Y%m%dT%H%M%S')}-"
                             f"{os.getpid()}")
    swap_into_place(target, aside)  # aside is a new name: nothing is replaced
    return str(aside)


def stale_builds(target: Path) -> list[Path]:
    """Build files a killed rebuild left beside the index (``.memidex.sqlite.build-PID-*``
    of a process that is gone)."""
    out = []
    for path in sorted(target.parent.glob(_BUILD_GLOB.format(name=target.name))):
        pid_text = path.name.split(".build-", 1)[1].split("-", 1)[0]
        try:
            pid = int(pid_text)
        except ValueError:
            continue
        if pid != os.getpid() and not _pid_alive(pid):
            out.append(path)
    return out


def remove_stale_builds(target: Path) -> list[str]:
    """Delete :func:`stale_builds`; returns their names."""
    removed = []
    for path in stale_builds(target):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(path.name)
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
