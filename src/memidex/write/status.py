"""What ``doctor`` reports about the writer lease and the journal. Never takes the lease,
never writes.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memidex.store.fsio import read_int, read_json
from memidex.write.authority import (
    AUTHORITY_FILE,
    EPOCH_FILE,
    LEASE_FILE,
    Holder,
    is_busy,
    lease_copy_epoch,
    peek_holder,
)
from memidex.write.journal import Journal

__all__ = ["lease_status"]


def lease_status(folder: Path, *, clock: Callable[[], float] = time.time) -> dict[str, Any]:
    """What ``doctor`` reports about the lease. Never takes the lease, never writes."""
    db = folder / AUTHORITY_FILE
    out: dict[str, Any] = {
        "authority": "missing", "held": False, "pid": None, "host": None, "epoch": None,
        "heartbeat_age_seconds": None, "alive": None, "pending_journal": 0,
        "epoch_file": read_int(folder / EPOCH_FILE) or None,
    }
    holder: Holder | None = None
    if db.exists():
        try:
            holder = peek_holder(db)
            out["authority"] = "ok" if holder is not None else "damaged"
        except sqlite3.OperationalError as exc:
            out["authority"] = "locked" if is_busy(exc) else "damaged"
        except sqlite3.DatabaseError:
            out["authority"] = "damaged"
        except OSError as exc:
            out["authority"] = f"unreadable: {exc.strerror}"
    if holder is None:
        copy = read_json(folder / LEASE_FILE)
        if copy is not None and isinstance(copy.get("pid"), int):
            hb = copy.get("heartbeat")
            holder = Holder(lease_copy_epoch(folder / LEASE_FILE), "?", copy["pid"],
                            copy.get("pid_start"), copy.get("boot_id"), copy.get("host"),
                            hb if isinstance(hb, int | float) else None, copy.get("ttl"))
    if holder is not None:
        now = clock()
        out["epoch"] = holder.epoch
        if holder.held:
            out.update(
                held=True, pid=holder.pid, host=holder.host,
                heartbeat_age_seconds=(round(now - holder.heartbeat, 3)
                                       if holder.heartbeat is not None else None),
                alive=holder.alive(),
                stale=holder.free_reason(now, holder.ttl or 30.0) is not None,
            )
    journal = Journal(folder / "queue")
    out["pending_journal"] = journal.count_pending()
    out["abandoned_journal"] = journal.count_abandoned()
    return out
