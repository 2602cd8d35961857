"""README.md's "In your own repository" steps, run verbatim in a fresh git repository: the
README cannot drift from what memidex does (issue 10, item 1)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO_ROOT

SECTION = "### In your own repository"


def own_repository_blocks() -> list[str]:
    """The ```sh blocks of README.md's own-repository section, as written."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index(SECTION)
    end = readme.find("\n#", start + len(SECTION))
    section = readme[start:end if end != -1 else len(readme)]
    return re.findall(r"^```sh\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)


def test_the_section_shows_the_whole_path() -> None:
    blocks = own_repository_blocks()
    assert len(blocks) == 1
    commands = blocks[0]
    assert "memidex init" in commands and "memidex doctor" in commands
    git_add = next(line for line in commands.splitlines() if line.startswith("git add"))
    assert ".gitignore" in git_add.split() and "memidex.toml" in git_add.split()


def test_readme_own_repository_steps_run_verbatim(tmp_path: Path) -> None:
    app = tmp_path / "your-app"
    app.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=app, check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    for block in own_repository_blocks():
        out = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path,
                             env=env, capture_output=True, text=True, check=False)
        assert out.returncode == 0, f"{block}\n--- stdout\n{out.stdout}\n--- stderr\n" \
                                    f"{out.stderr}"
        assert "error:" not in out.stderr and "warning:" not in out.stderr, out.stderr
        assert "memidex doctor: healthy" in out.stdout
    doctor = subprocess.run(["memidex", "doctor", "--json"], cwd=app, env=env,
                            capture_output=True, text=True, check=False)
    assert doctor.returncode == 0 and json.loads(doctor.stdout)["healthy"] is True
    status = subprocess.run(["git", "status", "--porcelain"], cwd=app, capture_output=True,
                            text=True, check=True).stdout
    assert status == "", f"left uncommitted or unignored after the README's commit:\n{status}"
    committed = subprocess.run(["git", "ls-files"], cwd=app, capture_output=True, text=True,
                               check=True).stdout.split()
    assert ".gitignore" in committed and "memidex.toml" in committed
    assert any(f.startswith("agent-qa-knowledge/memory/records/fact/fact-") for f in committed)


LEARNING = "### Learning from test runs"


def learning_block() -> str:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index(LEARNING)
    blocks = re.findall(r"^```sh\n(.*?)^```$", readme[start:readme.index("\n### ", start + 1)],
                        re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1
    return str(blocks[0])


def _tracked_state(paths: list[str]) -> str:
    return subprocess.run(["git", "status", "--porcelain", "--", *paths], cwd=REPO_ROOT,
                          capture_output=True, text=True, check=True).stdout + \
        subprocess.run(["git", "ls-files", "-s", "--", *paths], cwd=REPO_ROOT,
                       capture_output=True, text=True, check=True).stdout


def test_readme_learning_block_runs_verbatim_and_leaves_the_example_shop(
        tmp_path: Path) -> None:
    # issue 19 item 27: the tour learns in a scratch repository (the bundled knowledge was
    # learned from the example runs already), its rollback works, and nothing of the
    # example shop changes
    block = learning_block()
    assert "rollback" in block and "mktemp -d" in block
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["TMPDIR"] = str(tmp_path)  # the scratch repository lands in this test's folder
    watched = ["agent-qa-knowledge/memory/records", "policies", "memidex.toml", "examples"]
    before = _tracked_state(watched)
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", block + "\npwd\n"],
                         cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                         check=False, timeout=600)
    assert out.returncode == 0, f"{block}\n--- stdout\n{out.stdout}\n--- stderr\n{out.stderr}"
    assert "error:" not in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert "rolled back r-0052" in out.stdout
    assert out.stdout.splitlines()[-1] == str(REPO_ROOT)  # back in the example shop
    assert _tracked_state(watched) == before
    scratch = [p for p in tmp_path.iterdir() if (p / "memidex.toml").exists()]
    assert len(scratch) == 1 and list((scratch[0] / ".agent-qa/runs").glob("*.json"))


_PATH = re.compile(r"(?<![\w/.$-])((?:\.ci|bench|docs|examples|scripts|src|tests|policies|"
                   r"agent-qa-knowledge)/[\w./-]*[\w/])")


def test_every_path_the_readme_names_exists() -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    # what a sample output shows is of the reader's repository, not this one
    readme = re.sub(r"^```text\n.*?^```$", "", readme, flags=re.MULTILINE | re.DOTALL)
    readme = readme.replace("$EX/", "examples/")  # the learning block's variable
    named = sorted(set(_PATH.findall(readme)))
    assert "examples/reports/playwright-report.json" in named
    assert "examples/runs/r-0052.json" in named
    missing = [p for p in named if not (REPO_ROOT / p).exists()
               and not p.startswith("agent-qa-knowledge/memory/index")]  # made by demo
    assert not missing, missing
