"""The adapters' hardening (issue 19): each test failed on the code before the fix.

* 26 — a malformed anchor is refused by search and list, not answered with nothing;
* 29 — messages: the real range of --budget, the same exit code for a malformed run id
  everywhere, a missing --body-file said plainly, doctor outside an initialised folder
  points at `init` (not "epoch None"), the review's trust column never says "@None";
* 11 — `knowledge review` masks the secrets it flags in every output: its Markdown
  table, --json and $GITHUB_STEP_SUMMARY (meant for pull-request comments).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import git, make_record, run_cli, write_record

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # a GitHub token's shape
SECRET = "hunter2-s3cr3t-value"


@pytest.mark.parametrize("args", [
    ["knowledge", "search", "place", "--anchor", "bad"],
    ["knowledge", "list", "--anchor", "bad"],
    ["knowledge", "search", "place", "--anchor", "Page:/x"],
    ["knowledge", "list", "--anchor", "el"],
])
def test_a_malformed_anchor_filter_is_refused_not_answered_empty(repo: Path,
                                                                 args: list[str]) -> None:
    write_record(repo, make_record())
    out = run_cli(repo, *args)
    assert out.returncode == 2, (out.returncode, out.stdout)
    assert out.stderr.startswith("error: malformed") and out.stdout == ""
    doc = json.loads(run_cli(repo, *args, "--json").stdout)
    assert doc["error"]["code"] == "UsageError"


def test_a_huge_budget_names_the_real_range(repo: Path) -> None:
    out = run_cli(repo, "brief", "t", "--budget", "99999999999999999999")
    assert out.returncode == 2
    assert "9223372036854775807" in out.stderr and ">= 1" not in out.stderr


def test_a_malformed_run_id_exits_2_everywhere(repo: Path) -> None:
    for args in (["runs", "show", "../../x"], ["knowledge", "rollback", "../../x"],
                 ["notes", "list", "--run", "../../x"]):
        out = run_cli(repo, *args)
        assert out.returncode == 2, (args, out.returncode, out.stderr)
        assert out.stderr.startswith("error: run id '../../x' must be")


def test_a_missing_body_file_is_said_plainly(repo: Path) -> None:
    out = run_cli(repo, "knowledge", "add", "--kind", "fact", "--anchor", "el:a:b",
                  "--title", "t", "--body-file", "no-such-file.txt")
    assert out.returncode == 4
    assert out.stderr.splitlines()[0] == "error: --body-file no-such-file.txt does not exist"
    assert "Errno" not in out.stderr


def test_doctor_outside_an_initialised_folder_points_at_init(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    git(folder, "init", "-q")
    out = run_cli(folder, "doctor")
    assert out.returncode == 1
    assert "memidex init" in out.stdout and "rebuild-index" not in out.stdout
    assert "None" not in out.stdout  # no "epoch None", "product None"


def _branch_with_secrets(repo: Path) -> None:
    (repo / ".agent-qa").mkdir(exist_ok=True)
    (repo / ".agent-qa/secrets.yaml").write_text(f"db_password: {SECRET}\n", encoding="utf-8")
    old = make_record(anchor="el:input:password", title="The password field")
    write_record(repo, old)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "branch", "-M", "main")
    git(repo, "checkout", "-qb", "pr")
    write_record(repo, make_record(anchor="el:input:password",
                                   title=f"Type {SECRET} into the password field",
                                   body=f"The API takes the token {TOKEN} as well."))
    write_record(repo, make_record(anchor="el:input:token", title=f"Token {TOKEN}"))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "pr")


def test_review_masks_the_secrets_it_flags_in_every_output(repo: Path,
                                                           tmp_path: Path) -> None:
    _branch_with_secrets(repo)
    summary = tmp_path / "summary.md"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
    env["GITHUB_STEP_SUMMARY"] = str(summary)
    outputs = {}
    for fmt in ("markdown", "json", "github"):
        out = subprocess.run([sys.executable, "-m", "memidex", "--root", str(repo),
                              "knowledge", "review", "main", "HEAD", "--format", fmt],
                             capture_output=True, text=True, env=env, check=False, cwd=repo)
        assert out.returncode == 0, out.stderr
        outputs[fmt] = out.stdout
    outputs["summary"] = summary.read_text(encoding="utf-8")
    for name, text in outputs.items():
        assert SECRET not in text and TOKEN not in text, name
    assert "[secret:db_password]" in outputs["markdown"].replace("\\", "")
    assert "ghp_" in outputs["markdown"] and "sha256:" in outputs["markdown"]
    report = json.loads(outputs["json"])
    assert report["count"] == 2 and report["attention"]  # still flagged, just masked


def test_the_review_trust_column_never_says_none(repo: Path) -> None:
    write_record(repo, make_record())
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "branch", "-M", "main")
    write_record(repo, make_record(anchor="el:button:pay", title="Pay"))
    out = run_cli(repo, "knowledge", "review", "main")
    assert out.returncode == 0 and "| added |" in out.stdout
    assert "None" not in out.stdout and "never confirmed by a run" in out.stdout
