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
    storage_failure,
)
from memidex.write.journal import Journal
from memidex.write.procs import kernel_clock

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
            failure = storage_failure(exc, folder)
            out["authority"] = ("locked" if is_busy(exc) else
                                f"unreadable: {failure.message}" if failure else "damaged")
        except sqlite3.DatabaseError:
            out["authority"] = "damaged"
        except OSError as exc:
            out["authority"] = f"unreadable: {exc.strerror}"
    if holder is None:
        copy = read_json(folder / LEASE_FILE)
        if copy is not None and isinstance(copy.get("pid"), int):
            hb = copy.get("heartbeat")
            holder = Holder(lease_copy_epoch(copy), "?", copy["pid"],
                            copy.get("pid_start"), copy.get("boot_id"), copy.get("host"),
                            hb if isinstance(hb, int | float) else None, copy.get("ttl"))
    notes: list[str] = []
    out["stale"] = False
    out["past_ttl"] = False
    if holder is not None:
        now = clock()
        out["epoch"] = holder.epoch
        if holder.held:
            ttl = holder.ttl or 30.0
            age = now - holder.heartbeat if holder.heartbeat is not None else None
            reason = holder.free_reason(now, ttl, mono=time.monotonic(), kernel=kernel_clock())
            past = reason == "stale heartbeat"
            alive = holder.alive()
            out.update(
                held=True, pid=holder.pid, host=holder.host,
                heartbeat_age_seconds=round(age, 3) if age is not None else None,
                ttl_seconds=ttl, alive=alive, stale=reason is not None,
                stale_reason=reason, past_ttl=past,
            )
            if past:
                state = "stalled" if alive else "dead"
                notes.append(
                    f"the writer lease's heartbeat is past its TTL ({_age(age)} ago, TTL "
                    f"{ttl:g}s): its holder, pid {holder.pid}, looks {state}; the next "
                    "writer takes the lease over")
            elif reason is not None:
                notes.append(f"the writer lease is held by pid {holder.pid}, but {reason}: "
                             "the next writer takes it over")
    journal = Journal(folder / "queue")
    out["pending_journal"] = journal.count_pending()
    out["abandoned_journal"] = journal.count_abandoned()
    out["notes"] = notes
    return out


def _age(age: float | None) -> str:
    return "never" if age is None else f"{age:.1f}s"
