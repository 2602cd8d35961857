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
