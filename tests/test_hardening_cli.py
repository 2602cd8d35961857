"""Error paths of the CLI (issue 9, item 12): a clear one-line error, nothing read whole."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import run_cli


def test_a_body_file_that_never_ends_is_refused_at_the_cap(repo: Path) -> None:
    out = run_cli(repo, "knowledge", "add", "--kind", "fact", "--anchor", "page:/x",
                  "--title", "t", "--body-file", "/dev/zero")
    assert out.returncode == 4, out.stderr
    assert out.stderr.startswith("error: --body-file /dev/zero is over 1048576 bytes")
    assert "Traceback" not in out.stderr
    assert not list((repo / "agent-qa-knowledge/memory/records").rglob("*.md"))


def test_a_body_file_that_is_not_utf8_is_refused(repo: Path, tmp_path: Path) -> None:
    bad = tmp_path / "body.txt"
    bad.write_bytes(b"caf\xe9")
    out = run_cli(repo, "knowledge", "add", "--kind", "fact", "--anchor", "page:/x",
                  "--title", "t", "--body-file", str(bad))
    assert out.returncode == 4 and out.stderr.startswith("error: cannot read --body-file")


def test_a_root_that_does_not_exist_gets_a_hint_about_roots(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "memidex", "--root",
                          str(tmp_path / "nonexistent"), "doctor"],
                         capture_output=True, text=True)
    assert out.returncode == 2
    lines = out.stderr.splitlines()
    assert lines[0].startswith("error: --root") and "is not a folder" in lines[0]
    assert "memidex.toml or .git" in out.stderr


def test_a_usage_error_is_one_error_line_and_a_hint(repo: Path) -> None:
    """SPEC §7: expected errors are one `error:` line plus a hint, not click's usage block."""
    for args in (["knowledge", "search"], ["knowledge", "review", "--output=x"],
                 ["knowledge", "search", "x", "--bogus"], ["doctor", "--nope"]):
        out = run_cli(repo, *args)
        assert out.returncode == 2, (args, out.stderr)
        lines = out.stderr.splitlines()
        assert len(lines) == 2 and lines[0].startswith("error: "), (args, out.stderr)
        assert lines[1].startswith("hint: see `memidex") and "--help`" in lines[1]
        assert "Usage:" not in out.stderr


def test_memidex_alone_still_prints_its_help(repo: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "memidex"], cwd=repo, capture_output=True,
                         text=True)
    assert "Usage: memidex" in out.stdout + out.stderr and "Commands" in out.stdout + out.stderr


def test_symlinked_state_files_never_lead_outside_the_repository(repo: Path,
                                                                  tmp_path: Path) -> None:
    """A symlink planted at the visibility lock or the ledger (ignored local state) must
    not make a search or a write create or append to a file outside the repository."""
    queue = repo / "agent-qa-knowledge/memory/queue"
    add = ("knowledge", "add", "--kind", "fact", "--anchor", "el:button:x", "--title")
    assert run_cli(repo, *add, "X one").returncode == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    (queue / "visibility.lock").unlink(missing_ok=True)
    (queue / "visibility.lock").symlink_to(outside / "lock")
    ledger = queue / "ledger" / "ledger.jsonl"
    ledger.unlink()
    ledger.symlink_to(outside / "ledger.jsonl")
    assert run_cli(repo, "knowledge", "search", "one").returncode == 0
    out = run_cli(repo, *add, "X two")
    assert "Traceback" not in out.stderr
    assert out.returncode in (0, 4), out.stderr
    if out.returncode == 4:
        assert "symlink" in out.stderr.splitlines()[0], out.stderr
    assert list(outside.iterdir()) == []
