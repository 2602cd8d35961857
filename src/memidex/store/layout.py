"""``memidex init``: the repository layout of SPEC §1, created idempotently."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from memidex.config import CONFIG_FILE
from memidex.records.model import KINDS

__all__ = ["IGNORED", "InitReport", "init_repository", "init_root"]

KNOWLEDGE = "agent-qa-knowledge/memory"
IGNORED: tuple[str, ...] = (
    f"{KNOWLEDGE}/index/",
    f"{KNOWLEDGE}/queue/",
    f"{KNOWLEDGE}/staging/",
    f"{KNOWLEDGE}/.lease",
    f"{KNOWLEDGE}/.epoch",
    f"{KNOWLEDGE}/.writer-authority.*",
    ".agent-qa/",
    "artifacts/",
)
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


def init_repository(root: Path) -> InitReport:
    """Create what is missing; change nothing that exists (a second run is a no-op)."""
    report = InitReport(root)

    def folder(rel: str, keep: bool = False) -> None:
        path = root / rel
        if not path.is_dir():
            path.mkdir(parents=True)
            report.created.append(rel + "/")
        if keep and not any(path.iterdir()):
            (path / ".gitkeep").write_bytes(b"")
            report.created.append(f"{rel}/.gitkeep")

    for kind in KINDS:
        folder(f"{KNOWLEDGE}/records/{kind}", keep=True)
    for rel in (f"{KNOWLEDGE}/index", f"{KNOWLEDGE}/queue", f"{KNOWLEDGE}/staging",
                ".agent-qa", "artifacts"):
        folder(rel)
    folder("policies", keep=True)
    config = root / CONFIG_FILE
    if not config.exists():
        config.write_text(CONFIG_TEMPLATE, encoding="utf-8")
        report.created.append(CONFIG_FILE)
    gitignore = root / ".gitignore"
    text = gitignore.read_text(encoding="utf-8") if gitignore.exists() else ""
    present = {line.strip() for line in text.splitlines()}
    missing = [p for p in IGNORED if p not in present]
    if missing:
        lines = ([] if GITIGNORE_HEADER in present else [GITIGNORE_HEADER]) + missing
        sep = "" if not text or text.endswith("\n") else "\n"
        gitignore.write_text(text + sep + "\n".join(lines) + "\n", encoding="utf-8")
        report.created.append(".gitignore" + (" (entries)" if text else ""))
    return report
