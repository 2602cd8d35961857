"""``memidex init``: the repository layout of SPEC §1, created idempotently."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from memidex.config import CONFIG_FILE, Config, load_config
from memidex.errors import InvalidInputError, UsageError
from memidex.records.ids import PRODUCT_RE
from memidex.records.model import KINDS
from memidex.store.gitsetup import append_missing, git_output, setup_git

__all__ = ["IGNORED", "InitReport", "ignored_entries", "in_git_repository", "infer_product",
           "init_repository", "init_root", "product_name"]

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
product = "{product}"  # the default product for search, list and briefs ({source})
# knowledge_dir = "agent-qa-knowledge/memory"
# policies_dir = "policies"
# state_dir = ".agent-qa"
# lease_ttl_seconds = 30
"""

NOT_GIT = ("not inside a git repository: memidex records are meant to be committed and "
           "reviewed; run `git init` here (or init inside your repository)")


@dataclass
class InitReport:
    """What ``init`` did: what it created, the product it configured (and where that name
    came from), and warnings for a person (``init`` prints them on stderr)."""

    root: Path
    created: list[str] = field(default_factory=list)
    product: str | None = None
    product_source: str = ""
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {"root": str(self.root), "created": self.created, "changed": bool(self.created),
                "product": self.product, "warnings": self.warnings}


def init_root(start: Path) -> Path:
    """Where ``init`` works: the git top level around ``start``, else ``start`` itself."""
    top = git_output(start, "rev-parse", "--show-toplevel")
    return Path(top).resolve() if top else start.resolve()


def in_git_repository(root: Path) -> bool:
    return git_output(root, "rev-parse", "--is-inside-work-tree") == "true"


def product_name(text: str) -> str | None:
    """``text`` as a product name (letters, digits, ``.``, ``_``, ``-``), or None."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")[:100].strip("-._")
    return name if name and PRODUCT_RE.fullmatch(name) else None


def infer_product(root: Path) -> tuple[str, str]:
    """The product ``init`` writes when none is given: the name of the git remote's
    repository (``origin``, else the first remote), else the folder's name, else
    ``my-app``; with where it came from."""
    remotes = (git_output(root, "remote") or "").split()
    if remotes:
        remote = "origin" if "origin" in remotes else remotes[0]
        url = git_output(root, "remote", "get-url", remote) or ""
        last = re.split(r"[/:\\]", url.rstrip("/"))[-1]
        name = product_name(last[:-4] if last.endswith(".git") else last)
        if name:
            return name, f"the name of git remote {remote}"
    name = product_name(root.name)
    if name:
        return name, "the folder name"
    return "my-app", "a placeholder: set your own"


def _inside(root: Path, configured: str) -> str | None:
    """``configured`` (relative to ``root``, or absolute) as a clean path relative to the
    resolved ``root``, or None when it is outside (or is ``root`` itself)."""
    try:
        rel = Path(os.path.normpath(root / configured)).relative_to(root)
    except ValueError:
        return None
    return rel.as_posix() if rel.parts else None


def init_repository(root: Path, *, product: str | None = None) -> InitReport:
    """Create what is missing; change nothing that exists (a second run is a no-op).

    The folders are the configured ones when ``memidex.toml`` already names them
    (``knowledge_dir``, ``policies_dir``, ``state_dir``), else the defaults. A knowledge
    folder outside the repository is refused (exit 4, nothing created); a state or
    policies folder outside it is created but gets no ``.gitignore`` entry. A new
    ``memidex.toml`` names the product: ``product``, else :func:`infer_product`; an
    existing one gets ``product`` only when it names none and ``product`` is given.
    Each step below is one function, so a new step is one more line.
    """
    if product is not None and PRODUCT_RE.fullmatch(product) is None:
        raise UsageError(f"--product {product!r} is not a product name",
                         hint="use letters, digits, '.', '_' or '-'")
    report = InitReport(root)
    if not in_git_repository(root):
        report.warnings.append(NOT_GIT)
    config = load_config(root, environ={})  # the file only: the layout is the repository's
    if _inside(config.root, config.knowledge_dir) is None:
        # every write refuses a knowledge folder outside the repository (its records are
        # committed files): refuse here too, before anything is created
        raise InvalidInputError(
            f"knowledge_dir {config.knowledge_dir!r} is outside the repository {config.root}",
            hint="records are committed with the repository: keep knowledge_dir inside it")
    _folders(report, config)
    _config_file(report, config.root, config.product, product)
    _gitignore(report, config.root, ignored_entries(_inside(config.root, config.knowledge_dir),
                                                    _inside(config.root, config.state_dir)))
    report.created += setup_git(config.root, _inside(config.root, config.knowledge_dir))
    return report


def _folders(report: InitReport, config: Config) -> None:
    base = config.root

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


def _config_file(report: InitReport, base: Path, configured: str | None,
                 product: str | None) -> None:
    """A new ``memidex.toml`` naming the product; an existing one is left alone unless it
    names no product and one was given (the line goes before the first ``[table]``)."""
    config_file = base / CONFIG_FILE
    if not config_file.exists():
        source = "given to init" if product else ""
        if product is None:
            product, source = infer_product(base)
        config_file.write_text(CONFIG_TEMPLATE.format(product=product, source=source),
                               encoding="utf-8")
        report.created.append(CONFIG_FILE)
        report.product, report.product_source = product, source
        return
    report.product = configured
    if configured or product is None:
        return
    text = config_file.read_bytes().decode("utf-8", "surrogateescape")
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    at = next((i for i, line in enumerate(lines) if line.lstrip().startswith("[")),
              len(lines))
    if at == len(lines) and lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += newline
    lines.insert(at, f'product = "{product}"{newline}')
    config_file.write_bytes("".join(lines).encode("utf-8", "surrogateescape"))
    report.created.append(f"{CONFIG_FILE} (product)")
    report.product, report.product_source = product, "given to init"


def _gitignore(report: InitReport, base: Path, entries: tuple[str, ...]) -> None:
    """The missing ``entries``, appended under a header (:func:`append_missing`)."""
    added = append_missing(base / ".gitignore", GITIGNORE_HEADER, entries)
    if added is not None:
        report.created.append(added)


def _shown(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)
