"""`memidex init` lays out the configured folders (memidex.toml) and ignores the right ones."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import git, run_cli
from memidex.config import load_config
from memidex.records.model import KINDS
from memidex.store.layout import IGNORED, init_repository

CUSTOM = 'knowledge_dir = "kb/qa"\npolicies_dir = "rules"\nstate_dir = "local/state"\n'


def _git_repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    return root


def _ignored(root: Path, *paths: str) -> set[str]:
    out = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=root,
                         capture_output=True, text=True, check=False)
    return set(out.stdout.split())


def test_init_uses_the_configured_folders_and_is_idempotent(tmp_path: Path) -> None:
    root = _git_repo(tmp_path)
    (root / "memidex.toml").write_text(CUSTOM, encoding="utf-8")
    first = run_cli(root, "init", "--json", check=True)
    created = json.loads(first.stdout)["created"]
    for kind in KINDS:
        assert (root / "kb/qa/records" / kind / ".gitkeep").is_file()
        assert f"kb/qa/records/{kind}/" in created
    for name in ("index", "queue", "staging"):
        assert (root / "kb/qa" / name).is_dir()
    assert (root / "rules/.gitkeep").is_file() and (root / "local/state").is_dir()
    assert not (root / "agent-qa-knowledge").exists() and not (root / "policies").exists()
    assert not (root / ".agent-qa").exists()
    assert (root / "memidex.toml").read_text(encoding="utf-8") == CUSTOM  # left alone
    lines = (root / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert "kb/qa/index/" in lines and "local/state/" in lines
    assert not [line for line in lines if "agent-qa" in line]
    # what git itself ignores: derived state yes, records and policies no
    derived = ["kb/qa/index/memidex.sqlite", "kb/qa/queue/x.json", "kb/qa/staging/t",
               "kb/qa/.lease", "kb/qa/.epoch", "kb/qa/.writer-authority.sqlite",
               "local/state/secrets.yaml"]
    kept = ["kb/qa/records/fact/f.md", "rules/p.yaml", "memidex.toml"]
    assert _ignored(root, *derived, *kept) == set(derived)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and ".git/" not in
              p.as_posix()}
    second = run_cli(root, "init", "--json", check=True)
    assert json.loads(second.stdout) == {"root": str(root.resolve()), "created": [],
                                         "changed": False, "product": None,
                                         "warnings": []}
    after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and ".git/" not in
             p.as_posix()}
    assert after == before


def test_the_store_finds_what_init_made_with_a_custom_folder(tmp_path: Path) -> None:
    root = _git_repo(tmp_path)
    (root / "memidex.toml").write_text(CUSTOM + 'product = "shop-web"\n', encoding="utf-8")
    init_repository(root)
    added = run_cli(root, "knowledge", "add", "--kind", "fact", "--anchor", "el:x",
                    "--title", "Custom folders work", "--body", "Yes.", "--json")
    assert added.returncode == 0, added.stderr
    assert list((root / "kb/qa/records/fact").glob("*.md"))
    run_cli(root, "knowledge", "rebuild-index", check=True)
    assert (root / "kb/qa/index/memidex.sqlite").is_file()
    found = json.loads(run_cli(root, "knowledge", "search", "custom folders", "--json",
                               check=True).stdout)
    assert found["level"] == "lexical-only"
    assert found["results"][0]["title"] == "Custom folders work"
    status = git(root, "status", "--porcelain", "--untracked-files=all")
    assert "kb/qa/index" not in status and "kb/qa/.lease" not in status
    assert "kb/qa/records/fact/" in status


def test_defaults_without_a_config_file(tmp_path: Path) -> None:
    root = _git_repo(tmp_path)
    report = init_repository(root)
    assert "agent-qa-knowledge/memory/records/fact/" in report.created
    assert "memidex.toml" in report.created and (root / "policies/.gitkeep").is_file()
    lines = (root / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert lines[1:] == list(IGNORED)
    assert load_config(root).knowledge_path == root.resolve() / "agent-qa-knowledge/memory"
    assert init_repository(root).created == []


def test_a_folder_outside_the_repository_is_made_but_not_ignored(tmp_path: Path) -> None:
    root = _git_repo(tmp_path)
    (root / "memidex.toml").write_text('state_dir = "../st"\n', encoding="utf-8")
    report = init_repository(root)
    assert (tmp_path / "st").is_dir() and "../st/" in report.created
    lines = (root / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert "../st/" not in lines and ".agent-qa/" not in lines


def test_a_knowledge_folder_outside_the_repository_is_refused_before_anything(
        tmp_path: Path) -> None:
    from memidex.errors import InvalidInputError

    root = _git_repo(tmp_path)
    outside = tmp_path / "elsewhere"
    (root / "memidex.toml").write_text(f'knowledge_dir = "{outside}"\n', encoding="utf-8")
    before = sorted(p.name for p in root.iterdir())
    with pytest.raises(InvalidInputError, match="outside the repository"):
        init_repository(root)
    assert not outside.exists()
    assert sorted(p.name for p in root.iterdir()) == before


def test_existing_gitignore_lines_are_kept_and_not_repeated(tmp_path: Path) -> None:
    root = _git_repo(tmp_path)
    (root / "memidex.toml").write_text(CUSTOM, encoding="utf-8")
    (root / ".gitignore").write_text("node_modules/\nkb/qa/index/", encoding="utf-8")
    report = init_repository(root)
    text = (root / ".gitignore").read_text(encoding="utf-8")
    assert text.startswith("node_modules/\nkb/qa/index/\n# memidex")
    assert text.count("kb/qa/index/") == 1
    assert ".gitignore (entries)" in report.created
