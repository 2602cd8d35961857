"""The index's mark of the secrets it was masked with (memidex.index.maskmark): which
changes of the secrets file make the index be rebuilt, and that the mark gives nothing
away. Real files in a temp folder; the clock is the argument the module takes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from memidex.index.maskmark import MaskChanged, compare, mark


def _later() -> int:
    """A look a minute from now: no stat is too recent then."""
    return time.time_ns() + 60 * 10**9


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def test_no_file_then_a_file_with_secrets_changes_the_mask(tmp_path: Path) -> None:
    path = tmp_path / "secrets.yaml"
    stored = mark(path)
    assert compare(path, stored) is None
    _write(path, "")  # a file of no secrets masks as no file does
    stored = compare(path, stored, now_ns=_later()) or stored
    assert compare(path, stored, now_ns=_later()) is None
    _write(path, "api: hunter2xyzzy\n")
    with pytest.raises(MaskChanged):
        compare(path, stored, now_ns=_later())


def test_the_same_secrets_under_another_stat_only_update_the_mark(tmp_path: Path) -> None:
    path = tmp_path / "secrets.yaml"
    _write(path, "api: hunter2xyzzy\ndoor: open sesame 42\n")
    stored = mark(path, now_ns=_later())
    assert compare(path, stored, now_ns=_later()) is None
    _write(path, "# rotated by the vault\ndoor: open sesame 42\napi: hunter2xyzzy\n")
    new = compare(path, stored, now_ns=_later())
    assert new is not None and new != stored
    assert compare(path, new, now_ns=_later()) is None
    for other in ("api: hunter2xyzzz\ndoor: open sesame 42\n",  # a value changed
                  "door: open sesame 42\n",  # one withdrawn
                  "key: hunter2xyzzy\ndoor: open sesame 42\n"):  # renamed: another mask
        _write(path, other)
        with pytest.raises(MaskChanged):
            compare(path, new, now_ns=_later())
    path.unlink()
    with pytest.raises(MaskChanged):
        compare(path, new, now_ns=_later())


def test_a_stat_too_recent_is_not_trusted(tmp_path: Path) -> None:
    """Written again within the timestamp's tick with the same size, a file may keep its
    stat: a mark taken then keeps no stat, so the next look compares the secrets."""
    path = tmp_path / "secrets.yaml"
    _write(path, "api: hunter2xyzzy\n")
    stored = mark(path)  # just written
    assert json.loads(stored)["stat"] == []
    st = os.stat(path)
    _write(path, "api: hunter2xyzzz\n")  # same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(MaskChanged):
        compare(path, stored)


def test_an_index_from_before_the_mark(tmp_path: Path) -> None:
    path = tmp_path / "secrets.yaml"
    for stored in (None, "", "{not json", '"a string"'):
        assert compare(path, stored) is not None  # no secrets: the mark is written
    _write(path, "api: hunter2xyzzy\n")
    for stored in (None, "{not json"):
        with pytest.raises(MaskChanged):
            compare(path, stored)


def test_the_mark_gives_no_secret_away(tmp_path: Path) -> None:
    path = tmp_path / "secrets.yaml"
    _write(path, "api: hunter2xyzzy\n")
    one, two = json.loads(mark(path)), json.loads(mark(path))
    assert "hunter2" not in json.dumps(one)
    assert one["salt"] != two["salt"] and one["digest"] != two["digest"]
    assert len(bytes.fromhex(one["salt"])) == 16 and len(one["digest"]) == 64


def test_a_long_lived_process_reads_a_secrets_file_rewritten_within_its_tick(
        tmp_path: Path) -> None:
    """Masker.load caches by stat: a same-size rewrite that keeps the mtime (a tick, or a
    tool putting it back) is read again while the change is recent."""
    from memidex.masking import Masker

    path = tmp_path / "secrets.yaml"
    _write(path, "api: hunter2xyzzy\n")
    assert Masker.load(path).secrets == (("api", "hunter2xyzzy"),)
    st = os.stat(path)
    _write(path, "api: hunter2xyzzz\n")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert Masker.load(path).secrets == (("api", "hunter2xyzzz"),)
