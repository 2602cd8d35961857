"""The recipes work as written: the pre-commit hook and the GitHub Actions workflow are
valid YAML, and their commands run on a scratch repository."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from conftest import REPO_ROOT, git, make_record, write_record
from memidex.records.transitions import confirm


def _memidex(root: Path, command: str, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    args = shlex.split(command)
    assert args[0] == "memidex"
    return subprocess.run([sys.executable, "-m", "memidex", *args[1:]], cwd=root,
                          capture_output=True, text=True, env={**os.environ, **(env or {})},
                          check=False)


def test_pre_commit_hook_is_valid_and_runs(repo: Path) -> None:
    hooks = yaml.safe_load((REPO_ROOT / ".pre-commit-hooks.yaml").read_text())
    assert isinstance(hooks, list) and hooks[0]["id"] == "memidex-check"
    hook = hooks[0]
    assert {"id", "name", "entry", "language"} <= hook.keys()
    rel = write_record(repo, make_record()).relative_to(repo).as_posix()
    assert re.search(hook["files"], rel)
    assert _memidex(repo, hook["entry"]).returncode == 0
    (repo / rel).write_text("---\nid: [\n---\n")
    assert _memidex(repo, hook["entry"]).returncode == 1


def test_github_workflow_is_valid_and_its_commands_run(repo: Path, tmp_path: Path) -> None:
    flow = yaml.safe_load((REPO_ROOT / "examples/ci/github-actions.yml").read_text())
    steps = flow["jobs"]["knowledge"]["steps"]
    commands = [s["run"] for s in steps if "run" in s and s["run"].startswith("memidex ")]
    assert [c.split()[:3] for c in commands] == [["memidex", "knowledge", "check"],
                                                 ["memidex", "knowledge", "review"]]
    r = make_record()
    write_record(repo, r)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "branch", "-M", "main")
    git(repo, "update-ref", "refs/remotes/origin/main", "main")
    git(repo, "checkout", "-qb", "pr")
    write_record(repo, confirm(r, 4))
    git(repo, "commit", "-qam", "pr")
    summary = tmp_path / "summary.md"
    env = {"GITHUB_STEP_SUMMARY": str(summary)}
    for command in commands:
        out = _memidex(repo, command.replace("${{ github.base_ref }}", "main"), env)
        assert out.returncode == 0, out.stderr
    assert "| confirmed |" in summary.read_text(encoding="utf-8")
