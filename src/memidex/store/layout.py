"""``memidex init``: the repository layout of SPEC §1, created idempotently."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from memidex.config import CONFIG_FILE, load_config
from memidex.records.model import KINDS

__all__ = ["IGNORED", "InitReport", "ignored_entries", "init_repository", "init_root"]

KNOWLEDGE = "agent-qa-knowledge/memory"
STATE = ".agent-qa"


def ignored_entries(knowledge: str | None = KNOWLEDGE, state: str | None = STATE
                    ) -> tuple[str, ...]:
    """The ``.gitignore`` lines for the derived and local state under ``knowledge`` and
    the ``state`` folder (``None``: the folder is outside the repository, nothing to add)."""
    under = () if knowledge is None else (
        f"{knowledge}/index/",
        f"{knowledge}/queue/",
        f"{knowledge}/staging/",
        f"{knowledge}/.lease",
        f"{knowledge}/.epoch",
        f"{knowledge}/.writer-authority.*",
    )
    return (*under, *(() if state is None else (f"{state}/",)), "artifacts/")


IGNORED: tuple[str, ...] = ignored_entries()
GITIGNORE_HEADER = "# memidex: derived and local state (memidex init)"

CONFIG_TEMPLATE = """\
# memidex configuration. Every key is optional; see docs/configuration.md.
# product = "my-app"            # the default product for search, list and briefs
# knowledge_dir = "agent-qa-knowledge/memory"
# policies_dir = "policies"
# state_dir = ".agent-qa"
# lease_ttl_seconds = 30
"""


@dataclass
class InitReport:
    root: Path
    created: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {"root": str(self.root), "created": self.created, "changed": bool(self.created)}


def init_root(start: Path) -> Path:
    """Where ``init`` works: the git top level around ``start``, else ``start`` itself."""
    try:
        out = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=start,
                             capture_output=True, text=True, check=False)
    except OSError:
        return start.resolve()
    top = out.stdout.strip()
    return Path(top).resolve() if out.returncode == 0 and top else start.resolve()


def _inside(root: Path, configured: str) -> str | None:
    """``configured`` (relative to ``root``, or absolute) as a clean path relative to the
    resolved ``root``, or None when it is outside (or is ``root`` itself)."""
    try:
        rel = Path(os.path.normpath(root / configured)).relative_to(root)
    except ValueError:
        return None
    return rel.as_posix() if rel.parts else None


def init_repository(root: Path) -> InitReport:
    """Create what is missing; change nothing that exists (a second run is a no-op).

    The folders are the configured ones when ``memidex.toml`` already names them
    (``knowledge_dir``, ``policies_dir``, ``state_dir``), else the defaults. A folder
    outside the repository is created but gets no ``.gitignore`` entry.
    """
    report = InitReport(root)
    config = load_config(root, environ={})  # the file only: the layout is the repository's
    base = config.root
    knowledge = _inside(base, config.knowledge_dir)
    state = _inside(base, config.state_dir)

    def folder(path: Path, keep: bool = False) -> None:
        shown = _shown(base, path)
        if not path.is_dir():
            path.mkdir(parents=True)
            report.created.append(shown + "/")
        if keep and not any(path.iterdir()):
            (path / ".gitkeep").write_bytes(b"")
            report.created.append(f"{shown}/.gitkeep")

    for kind in KINDS:
        folder(config.knowledge_path / "records" / kind, keep=True)
    for name in ("index", "queue", "staging"):
        folder(config.knowledge_path / name)
    folder(config.state_path)
    folder(base / "artifacts")
    folder(config.policies_path, keep=True)
    config_file = base / CONFIG_FILE
    if not config_file.exists():
        config_file.write_text(CONFIG_TEMPLATE, encoding="utf-8")
        report.created.append(CONFIG_FILE)
    gitignore = base / ".gitignore"
    text = gitignore.read_text(encoding="utf-8") if gitignore.exists() else ""
    present = {line.strip() for line in text.splitlines()}
    missing = [p for p in ignored_entries(knowledge, state) if p not in present]
    if missing:
        lines = ([] if GITIGNORE_HEADER in present else [GITIGNORE_HEADER]) + missing
        sep = "" if not text or text.endswith("\n") else "\n"
        gitignore.write_text(text + sep + "\n".join(lines) + "\n", encoding="utf-8")
        report.created.append(".gitignore" + (" (entries)" if text else ""))
    return report


def _shown(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)
