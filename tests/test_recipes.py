"""The recipes work as written from this repository (issue 25, item 1): memidex is built
as a wheel (`python -m build`), installed by pip into a fresh venv — the way a CI job
installs it — and each recipe's own commands run there on a scratch repository: the
GitHub Actions workflow, the GitLab CI job, the pre-commit config (run by pre-commit
itself) and the repository's pre-commit hook.

The install is real: pip resolves memidex's dependencies from the package index it is
configured with (its cache kept between runs); a machine that cannot reach one fails
here, as its CI would."""

from __future__ import annotations

import os
import pwd
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from conftest import REPO_ROOT, git, make_record, write_record
from memidex.records.transitions import confirm

CI = REPO_ROOT / "examples/ci"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv with memidex installed from the wheel built from this checkout;
    its bin/ folder."""
    work = tmp_path_factory.mktemp("install")
    built = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation",
                            "--outdir", str(work / "dist"), str(REPO_ROOT)],
                           capture_output=True, text=True, check=False, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    wheel = next((work / "dist").glob("memidex-*-py3-none-any.whl"))
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = _env(venv / "bin", MEMIDEX=str(wheel))
    flow = yaml.safe_load((CI / "github-actions.yml").read_text(encoding="utf-8"))
    install = next(s["run"] for s in flow["jobs"]["knowledge"]["steps"]
                   if s.get("run", "").startswith("pip install"))
    out = subprocess.run(["bash", "-c", install], env=env, capture_output=True, text=True,
                         check=False, timeout=900, cwd=work)  # the recipe's own line
    assert out.returncode == 0, out.stderr[-3000:]
    yield venv / "bin"


def _env(bin_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a CI job: the fresh venv first on PATH, pip's cache kept in
    the real home (the suite's HOME is a scratch folder)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MEMIDEX_", "VIRTUAL_ENV", "PYTHON"))}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("PIP_CACHE_DIR", str(Path(pwd.getpwuid(os.getuid()).pw_dir) /
                                        ".cache/pip"))
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return {**env, **extra}


def _run(command: str, root: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=root, env=env, capture_output=True,
                          text=True, check=False, timeout=300)


def _pull_request(repo: Path) -> None:
    """``repo`` with a main branch (also as origin/main) and a branch confirming one
    record."""
    r = make_record()
    write_record(repo, r)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "branch", "-M", "main")
    git(repo, "update-ref", "refs/remotes/origin/main", "main")
    git(repo, "checkout", "-qb", "pr")
    write_record(repo, confirm(r, 4))
    git(repo, "commit", "-qam", "pr")


def test_the_wheel_runs_from_where_it_was_installed(installed: Path, repo: Path) -> None:
    env = _env(installed)
    out = _run("memidex --version", repo, env)
    assert out.returncode == 0, out.stderr
    where = out.stdout.splitlines()[1]
    assert where.startswith(f"  from {installed.parent}/lib/") and \
        where.endswith("/site-packages/memidex"), out.stdout
    topics = _run("memidex help topics", repo, env).stdout.split()
    assert {"configuration", "mcp", "cli"} <= set(topics)  # the docs came with the wheel
    listed = _run("memidex mcp --help", repo, env)
    assert listed.returncode == 0


def test_github_workflow_runs_as_written(installed: Path, repo: Path, tmp_path: Path) -> None:
    flow = yaml.safe_load((CI / "github-actions.yml").read_text(encoding="utf-8"))
    steps = flow["jobs"]["knowledge"]["steps"]
    commands = [s["run"] for s in steps if s.get("run", "").startswith("memidex ")]
    assert [c.split()[:3] for c in commands] == [["memidex", "--version"],
                                                 ["memidex", "knowledge", "check"],
                                                 ["memidex", "knowledge", "review"]]
    _pull_request(repo)
    summary = tmp_path / "summary.md"
    env = _env(installed, GITHUB_STEP_SUMMARY=str(summary))
    for command in commands:
        out = _run(command.replace("${{ github.base_ref }}", "main"), repo, env)
        assert out.returncode == 0, (command, out.stderr)
    assert "| confirmed |" in summary.read_text(encoding="utf-8")


def test_gitlab_job_runs_as_written(installed: Path, repo: Path, tmp_path: Path) -> None:
    job = yaml.safe_load((CI / "gitlab-ci.yml").read_text(encoding="utf-8"))["knowledge"]
    assert job["rules"][0]["if"] == '$CI_PIPELINE_SOURCE == "merge_request_event"'
    _pull_request(repo)
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(origin))
    git(repo, "remote", "add", "origin", str(origin))
    env = _env(installed, CI_MERGE_REQUEST_TARGET_BRANCH_NAME="main", CI="true",
               **{k: str(v) for k, v in job["variables"].items() if k != "MEMIDEX"})
    lines = [c for c in job["before_script"] + job["script"]
             if not c.startswith(("apt-get", "pip install"))]  # the image's own setup
    assert lines[0] == "memidex --version"
    for command in lines:
        out = _run(command, repo, env)
        assert out.returncode == 0, (command, out.stderr)
    report = (repo / "knowledge-review.md").read_text(encoding="utf-8")
    assert report.startswith("## Knowledge review: 1 record change(s)")
    assert "| confirmed |" in report and job["artifacts"]["paths"] == ["knowledge-review.md"]


def test_pre_commit_config_runs_under_pre_commit(installed: Path, repo: Path) -> None:
    env = _env(installed)
    got = _run("pip install -q 'pre-commit>=3'", repo, env)
    assert got.returncode == 0, got.stderr[-2000:]
    (repo / ".pre-commit-config.yaml").write_text(
        (CI / "pre-commit-config.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    path = write_record(repo, make_record())
    git(repo, "add", "-A")
    ok = _run("pre-commit run memidex-check --all-files", repo, env)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "memidex knowledge check" in ok.stdout and "Passed" in ok.stdout
    path.write_text("---\nid: [\n---\n", encoding="utf-8")
    git(repo, "add", "-A")
    bad = _run("pre-commit run memidex-check --all-files", repo, env)
    assert bad.returncode == 1 and "Failed" in bad.stdout
    assert path.name in bad.stdout


def test_pre_commit_hook_is_valid_and_runs(installed: Path, repo: Path) -> None:
    hooks = yaml.safe_load((REPO_ROOT / ".pre-commit-hooks.yaml").read_text())
    assert isinstance(hooks, list) and hooks[0]["id"] == "memidex-check"
    hook = hooks[0]
    assert {"id", "name", "entry", "language"} <= hook.keys()
    local = yaml.safe_load((CI / "pre-commit-config.yaml").read_text())
    assert local["repos"][0]["hooks"][0]["entry"] == hook["entry"]
    rel = write_record(repo, make_record()).relative_to(repo).as_posix()
    assert re.search(hook["files"], rel)
    env = _env(installed)
    assert shlex.split(hook["entry"])[0] == "memidex"
    assert _run(hook["entry"], repo, env).returncode == 0
    (repo / rel).write_text("---\nid: [\n---\n")
    assert _run(hook["entry"], repo, env).returncode == 1
