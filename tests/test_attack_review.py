"""Adversarial inputs to the merge driver, ``knowledge review`` and ``init``'s git set-up:
hostile bytes, hostile paths and hostile existing files."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from conftest import git, make_record, run_cli
from memidex.records.codec import dump_record
from memidex.store.gitsetup import DRIVER, run_merge_driver, setup_git


def _three(tmp_path: Path) -> tuple[Path, Path, Path]:
    r = make_record()
    base, ours, theirs = (tmp_path / n for n in ("O", "A", "B"))
    base.write_text(dump_record(r), encoding="utf-8")
    ours.write_text(dump_record(replace(r, title="Ours title")), encoding="utf-8")
    theirs.write_text(dump_record(replace(r, title="Theirs title")), encoding="utf-8")
    return base, ours, theirs


def test_a_side_git_calls_binary_keeps_both_sides(tmp_path: Path) -> None:
    base, ours, theirs = _three(tmp_path)
    ours.write_bytes(ours.read_bytes() + b"ours \x00 nul\n")
    theirs_bytes = theirs.read_bytes()
    code, note = run_merge_driver(str(base), str(ours), str(theirs), "r.md")
    merged = ours.read_bytes()
    assert code == 1 and note
    assert b"ours \x00 nul" in merged and theirs_bytes in merged  # nothing lost


def test_identical_non_utf8_sides_come_back_byte_for_byte(tmp_path: Path) -> None:
    base, ours, theirs = (tmp_path / n for n in ("O", "A", "B"))
    for f in (base, ours, theirs):
        f.write_bytes(b"not a record \xff\xfe\r\n")
    ours.write_bytes(b"changed \xff\n")
    code, _ = run_merge_driver(str(base), str(ours), str(theirs), "r.md")
    assert code == 0 and ours.read_bytes() == b"changed \xff\n"
    out = run_cli(tmp_path, "merge-driver", str(base), str(ours), str(theirs), "r.md")
    assert out.returncode == 0 and "Traceback" not in out.stderr
    assert ours.read_bytes() == b"changed \xff\n"


def test_driver_accepts_a_path_with_a_leading_dash(tmp_path: Path) -> None:
    assert " -- %O %A %B %P" in DRIVER  # git substitutes %P as given: "--" ends options
    base, ours, theirs = _three(tmp_path)
    args = DRIVER.split()[1:]
    args = [{"%O": str(base), "%A": str(ours), "%B": str(theirs), "%P": "-k/r.md"}.get(a, a)
            for a in args]
    out = run_cli(tmp_path, *args)
    text = ours.read_text(encoding="utf-8")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "Ours title" in text and "Theirs title" in text


def _set_up_twice(tmp_path: Path, original: bytes) -> bytes:
    """``.gitattributes`` holding ``original`` after ``setup_git`` ran (it changed
    something) and ran again (it changed nothing)."""
    git(tmp_path, "init", "-q")
    (tmp_path / ".gitattributes").write_bytes(original)
    assert setup_git(tmp_path, "kb")
    data = (tmp_path / ".gitattributes").read_bytes()
    assert setup_git(tmp_path, "kb") == []
    assert (tmp_path / ".gitattributes").read_bytes() == data
    return data


def test_setup_keeps_a_crlf_gitattributes_byte_for_byte(tmp_path: Path) -> None:
    original = b"*.png binary\r\n# keep \xc3\xa9\r\n"
    data = _set_up_twice(tmp_path, original)
    assert data.startswith(original)
    assert data.endswith(b"kb/records/**/*.md merge=memidex\r\n")
    assert b"\n" not in data.replace(b"\r\n", b"")


def test_setup_keeps_a_non_utf8_gitattributes(tmp_path: Path) -> None:
    original = b"x \xff binary"
    data = _set_up_twice(tmp_path, original)
    assert data.startswith(original + b"\n") and b"merge=memidex" in data


def test_review_markdown_is_inert_for_a_hostile_file_name(repo: Path) -> None:
    git(repo, "add", "-A")
    git(repo, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "init")
    name = "x`](javascript:alert(1)) a\n# Injected <b>.md"
    (repo / "agent-qa-knowledge/memory/records/fact" / name).write_text("---\nbroken\n",
                                                                        encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
    out = subprocess.run([sys.executable, "-m", "memidex", "--root", str(repo), "knowledge",
                          "review", "HEAD"], cwd=repo, capture_output=True, text=True,
                         env=env, check=False)
    assert out.returncode == 0, out.stderr
    assert "\n# Injected" not in out.stdout
    assert "`](javascript:" not in out.stdout and "<b>" not in out.stdout


def test_review_does_not_follow_a_symlinked_record_out_of_the_repository(
        tmp_path: Path) -> None:
    """A record path that is a symlink is read as git stores it (the link's target name):
    the file it points to, outside the repository, is never read or scanned."""
    import json

    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([sys.executable, "-m", "memidex", "--root", str(repo), "init",
                    "--product", "shop"], check=True, capture_output=True)
    for args in (["config", "user.email", "t@example.com"], ["config", "user.name", "t"],
                 ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("AKIAIOSFODNN7EXAMPLE is the key\n")
    link = repo / "agent-qa-knowledge/memory/records/fact/fact-x-0000000000000000.md"
    link.symlink_to(outside)
    out = subprocess.run([sys.executable, "-m", "memidex", "--root", str(repo), "knowledge",
                          "review", "HEAD", "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "AKIA" not in out.stdout and "secret" not in out.stdout.lower()
    assert json.loads(out.stdout)["count"] == 1
