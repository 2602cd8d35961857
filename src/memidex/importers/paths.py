"""The paths of the machine that wrote a report: repository-relative, or redacted.

A report holds absolute paths of its author's machine (``/home/ci/work/shop/tests/…``,
``/Users/kim/src/shop/test-results/…``, ``D:\\shop\\tests\\…``). :class:`MachinePaths`
knows the folders that stand for the repository root — this repository's ``root``, and
the report machine's project folder read from the report (Playwright's config file, the
parent of its output folder; Surefire's ``basedir``) — and

- :meth:`MachinePaths.redact` rewrites free text: a path under one of those roots becomes
  relative to it; any other home folder (``/home/<user>`` followed by a path,
  ``/Users/<user>``, ``/root``, ``X:\\Users\\<user>``) becomes ``~``; any other Windows
  drive path becomes ``[path]/<its last part>``. An app route such as ``/home/dashboard``
  (no further path) and URLs are data and stay.
- :meth:`MachinePaths.artifact` keeps an attachment only when it lies inside the
  repository's ``artifacts/`` folder, as a relative ``artifacts/…`` path.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path, PureWindowsPath

from memidex.evidence import artifact_problem

__all__ = ["MachinePaths", "parent_dir"]

_TOKEN_END = r"""[^\s'"`<>|;,()\[\]{}]"""
_HOMES = re.compile(
    r"(?<![\w.%-])(?:/home/[A-Za-z0-9._-]+(?=/)|/Users/[A-Za-z0-9._ -]*[A-Za-z0-9._-]"
    r"(?=[/\\\s'\"`:;,)\]]|$)|/root(?=/)|[A-Za-z]:[\\/]+Users[\\/]+[^\\/\s'\"`;:]+)",
    re.M)
_DRIVE = re.compile(rf"(?<![A-Za-z0-9])[A-Za-z]:[\\/]{_TOKEN_END}*")


def parent_dir(path: str) -> str | None:
    """The folder holding ``path`` on the report's machine (Windows or POSIX)."""
    text = path.strip().rstrip("/\\")
    cut = max(text.rfind("/"), text.rfind("\\"))
    if cut <= 0:
        return None
    head = text[:cut]
    return head if _is_absolute(head) else None


def _is_absolute(path: str) -> bool:
    return path.startswith("/") or bool(re.match(r"[A-Za-z]:[\\/]", path))


def _norm(path: str) -> str:
    """A path with ``/`` separators (a Windows path's backslashes turned)."""
    if re.match(r"[A-Za-z]:[\\/]", path) or "\\" in path:
        return str(PureWindowsPath(path).as_posix())
    return path


class MachinePaths:
    """Where the report's paths are relative to, and how to redact the rest."""

    def __init__(self, root: Path, machine_roots: Iterable[str] = ()) -> None:
        roots = {str(root.resolve()).rstrip("/")}
        roots.update(r.rstrip("/\\") for r in machine_roots if r and _is_absolute(r))
        self.roots = sorted((r for r in roots if r and len(r) > 3),
                            key=lambda r: (-len(r), r))
        alts = []
        for r in self.roots:
            flex = re.escape(_norm(r)).replace("/", r"[\\/]")
            alts.append(flex)
        self._roots_re = (re.compile(
            rf"(?<![\w.-])(?:{'|'.join(alts)})(?:[\\/]({_TOKEN_END}*)|(?!{_TOKEN_END}))",
            re.I) if alts else None)

    def redact(self, text: str) -> str:
        """``text`` with the report machine's paths made relative or redacted."""
        if "/" not in text and "\\" not in text:
            return text
        if self._roots_re is not None:
            text = self._roots_re.sub(_relative, text)
        text = _HOMES.sub("~", text)
        return _DRIVE.sub(_drive, text)

    def relative(self, path: str) -> str | None:
        """``path`` relative to the repository root (``/`` separators), or ``None``
        when it lies outside every root the report names."""
        norm = _norm(path.strip())
        if not _is_absolute(norm):
            return norm.lstrip("./") if not norm.startswith("../") else None
        for r in self.roots:
            base = _norm(r)
            if norm.lower().startswith(base.lower() + "/"):
                return norm[len(base) + 1:]
        return None

    def artifact(self, path: str) -> str | None:
        """The attachment ``path`` as ``artifacts/…`` when it lies inside the
        repository's ``artifacts/`` folder and is a safe artifact path; else ``None``."""
        rel = self.relative(path)
        if rel is None or not rel.startswith("artifacts/") or len(rel) > 1000:
            return None
        return rel if artifact_problem(rel) is None else None


def _relative(m: re.Match[str]) -> str:
    rest = m.group(1)
    return "." if rest is None else rest.replace("\\", "/") or "."


def _drive(m: re.Match[str]) -> str:
    parts = [p for p in re.split(r"[\\/]+", m.group(0)[2:]) if p]
    return "[path]/" + parts[-1] if parts else "[path]"
