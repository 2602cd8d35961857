"""The authority DB's recovery lock: a filelock on its own file, held across processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memidex.errors import LeaseHeldError
from memidex.write.authority import AUTHORITY_FILE, RECOVERY_LOCK, Authority

_HOLD = """
import sys, time
from filelock import FileLock
lock = FileLock(sys.argv[1], preserve_lock_file=True, is_singleton=False)
lock.acquire()
print("held", flush=True)
sys.stdin.readline()
"""


def test_recreation_waits_for_the_recovery_lock_of_another_process(tmp_path: Path) -> None:
    with subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp_path / RECOVERY_LOCK)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as holder:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(LeaseHeldError, match="being recreated by another process"):
            Authority(tmp_path, busy_timeout=0.2).open()
        assert not (tmp_path / AUTHORITY_FILE).exists()
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=10)
    conn, _ = Authority(tmp_path, busy_timeout=0.2).open()
    try:
        assert conn.execute("SELECT epoch, token FROM lease").fetchone() == (0, None)
    finally:
        conn.close()
    assert (tmp_path / RECOVERY_LOCK).exists()  # never deleted: waiters share one inode


def test_a_killed_holder_leaves_the_lock_free(tmp_path: Path) -> None:
    with subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp_path / RECOVERY_LOCK)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as holder:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        holder.kill()
        holder.wait(timeout=10)
    conn, _ = Authority(tmp_path, busy_timeout=0.2).open()
    conn.close()
    assert (tmp_path / AUTHORITY_FILE).exists()
