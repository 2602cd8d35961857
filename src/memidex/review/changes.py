"""``memidex knowledge review [BASE] [HEAD]``: what a branch changes in knowledge.

The changed record files come from ``git diff --name-status`` between the two
revisions (HEAD absent: the working tree, untracked records included); both versions of
each are read from git's object store through one ``git cat-file --batch`` process per
revision, never from a checkout. Each change gets one verb — added, promoted, confirmed,
superseded, deprecated, quarantined, purged, changed — and some need a human look: a
record a person wrote changed by automation, an active record retired, a rewrite of
more than half of a title and body, a record that fails validation, a possible secret.
"""

from __future__ import annotations

import difflib
import os
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memidex.errors import RecordError, UsageError

__all__ = ["REWRITE_THRESHOLD", "Change", "ReviewReport", "classify", "review"]

REWRITE_THRESHOLD = 0.5
"""A title and body rewritten by more than this fraction (1 - difflib ratio) without a new
version needs a human look."""
_RETIRED = ("deprecated", "superseded", "quarantined")


@dataclass
class Change:
    """One changed record file."""

    verb: str
    path: str
    id: str
    product: str
    title: str
    kind: str = ""
    old: dict[str, Any] | None = None  # {title, body, status, trust}
    new: dict[str, Any] | None = None
    attention: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"verb": self.verb, "path": self.path, "id": self.id, "product": self.product,
                "kind": self.kind, "title": self.title, "old": self.old, "new": self.new,
                "attention": self.attention}


@dataclass
class ReviewReport:
    base: str
    head: str
    changes: list[Change] = field(default_factory=list)

    @property
    def attention(self) -> list[Change]:
        return [c for c in self.changes if c.attention]

    def by_product(self) -> dict[str, list[Change]]:
        out: dict[str, list[Change]] = {}
        for c in sorted(self.changes, key=lambda c: (c.product, _ORDER.get(c.verb, 99),
                                                     c.id, c.path)):
            out.setdefault(c.product, []).append(c)
        return out

    def to_json(self) -> dict[str, Any]:
        products = {p: {verb: [c.as_dict() for c in cs if c.verb == verb]
                        for verb in VERBS if any(c.verb == verb for c in cs)}
                    for p, cs in self.by_product().items()}
        return {"base": self.base, "head": self.head, "count": len(self.changes),
                "products": products,
                "attention": [{"path": c.path, "id": c.id, "reasons": c.attention}
                              for c in self.attention]}


VERBS = ("added", "promoted", "confirmed", "superseded", "deprecated", "quarantined",
         "purged", "changed")
_ORDER = {v: i for i, v in enumerate(VERBS)}


def _git(root: Path, *args: str, required: bool = True) -> str:
    """git's output; when git fails, a :class:`UsageError` (``required``) or ``""``."""
    out = subprocess.run(["git", "--literal-pathspecs", *args], cwd=root, capture_output=True,
                         text=True, check=False)  # (a folder's name is never pathspec magic)
    if out.returncode == 0:
        return out.stdout
    if not required:
        return ""
    raise UsageError((out.stderr.strip().splitlines() or ["git failed"])[-1],
                     hint="give revisions git knows (a branch, tag or commit)")


def default_base(root: Path) -> str:
    """The merge base of HEAD with the default branch (``origin/HEAD``, else ``main``,
    ``master``, their ``origin/`` copies), else HEAD itself."""
    origin_head = _git(root, "symbolic-ref", "-q", "refs/remotes/origin/HEAD",
                       required=False).strip()
    for ref in ([origin_head] if origin_head else []) + ["origin/main", "origin/master",
                                                         "main", "master"]:
        base = _git(root, "merge-base", "HEAD", ref, required=False).strip()
        if base:
            return base
    return "HEAD"


_NO_BLOB = "0" * 40


def _changed(root: Path, base: str, head: str | None, under: str
             ) -> list[tuple[str, str, str, str]]:
    """(status letter, path, old blob id, new blob id) of the record files that differ.

    ``git diff --raw`` names the blobs on both sides, so their bytes are read by id: a
    ``rev:path`` lookup walks the records folder's tree (tens of thousands of entries)
    once per file. A side that is the working tree, or absent, has the all-zero id.
    ``--relative``: the paths from memidex's root, which may be a sub-folder of the
    repository (git names them from its top)."""
    args = ["diff", "--raw", "--relative", "-z", "--no-renames", "--no-abbrev", base]
    if head is not None:
        args.append(head)
    parts = _git(root, *args, "--", under).split("\0")
    out: list[tuple[str, str, str, str]] = []
    for i in range(0, len(parts) - 1, 2):
        meta = parts[i].split()  # :old-mode new-mode old-blob new-blob status
        if len(meta) == 5:
            out.append((meta[4][:1], parts[i + 1], meta[2], meta[3]))
    if head is None:
        others = _git(root, "ls-files", "-z", "--others", "--exclude-standard", "--", under)
        out += [("A", p, _NO_BLOB, _NO_BLOB) for p in others.split("\0") if p]
    return [c for c in out if c[1].endswith(".md")]


def _cat(root: Path, blobs: Sequence[tuple[str, str]]) -> dict[str, bytes]:
    """The bytes of each (path, blob id), through one ``git cat-file --batch``."""
    wanted = [(p, b) for p, b in blobs if b != _NO_BLOB]
    if not wanted:
        return {}
    request = "".join(f"{b}\n" for _p, b in wanted).encode("ascii")
    out = subprocess.run(["git", "cat-file", "--batch"], cwd=root, input=request,
                         capture_output=True, check=False).stdout
    found: dict[str, bytes] = {}
    at = 0
    for p, _b in wanted:
        nl = out.index(b"\n", at)
        header = out[at:nl].split()
        at = nl + 1
        if len(header) == 3:  # "<id> <type> <size>": skip what is not a blob
            size = int(header[2])
            if header[1] == b"blob":
                found[p] = out[at:at + size]
            at += size + 1
    return found


def _summary(r: Any) -> dict[str, Any]:
    t = r.trust
    return {"title": r.title, "body": r.body, "status": r.status,
            "valid": {"from": r.valid.from_, "until": r.valid.until},
            "trust": {"source": t.source, "confirmations": t.confirmations,
                      "contradictions": t.contradictions,
                      "last_confirmed": t.last_confirmed}}


def classify(path: str, old: Any, new: Any) -> Change:
    """The verb and the human-look reasons of one change (``old``/``new``: a record, or
    ``None`` when the file is absent on that side)."""
    r = new if new is not None else old
    change = Change("changed", path, r.id, r.product, r.title, r.kind,
                    _summary(old) if old is not None else None,
                    _summary(new) if new is not None else None)
    if old is None:
        change.verb = "added"
        return change
    if new is None:
        change.verb = "purged"
        if old.status in ("active", "candidate"):
            article = "an" if old.status[0] in "aeiou" else "a"
            change.attention.append(f"{article} {old.status} record purged")
        return change
    if new.valid.from_ != old.valid.from_ or (
            new.status == "superseded" and old.status != "superseded"):
        change.verb = "superseded"
    elif new.status != old.status and new.status in ("deprecated", "quarantined"):
        change.verb = new.status
    elif old.status == "candidate" and new.status == "active":
        change.verb = "promoted"
    elif (new.trust.confirmations, new.trust.last_confirmed or 0) > (
            old.trust.confirmations, old.trust.last_confirmed or 0):
        change.verb = "confirmed"
    if old.status == "active" and new.status in _RETIRED:
        change.attention.append(f"an active record {new.status}")
    if old.trust.source == "human" and new.trust.source != "human":
        change.attention.append(f"written by a person, changed by automation "
                                f"(source {new.trust.source})")
    elif old.trust.source == "human":
        # an ingest that confirms (or contradicts) a person's record keeps its source, but
        # it is still a run changing what a person wrote: its new evidence names the runs
        seen = {repr(tuple(e)) for e in old.evidence}
        runs = sorted({e.run for e in new.evidence if repr(tuple(e)) not in seen and e.run})
        if runs:
            shown = ", ".join(runs[:3]) + (" …" if len(runs) > 3 else "")
            change.attention.append(f"written by a person, changed by run {shown}")
    same_version = new.valid.from_ == old.valid.from_
    if same_version and (old.title, old.body) != (new.title, new.body):
        ratio = difflib.SequenceMatcher(None, f"{old.title}\n{old.body}",
                                        f"{new.title}\n{new.body}").ratio()
        if 1 - ratio > REWRITE_THRESHOLD:
            change.attention.append(f"rewritten without a new version "
                                    f"({round((1 - ratio) * 100)}% changed)")
    return change


def review(root: Path, records_rel: str, base: str | None = None, head: str | None = None,
           *, secrets: Sequence[tuple[str, str]] = (), allow: Iterable[str] = (),
           scan: bool = True) -> ReviewReport:
    """What ``head`` (default: the working tree) changes in the records under
    ``records_rel`` since ``base`` (default: :func:`default_base`)."""
    from memidex.records.codec import parse_record_bytes

    for rev in (base, head):
        if rev is not None:
            try:
                _git(root, "rev-parse", "--verify", "--end-of-options", f"{rev}^{{commit}}")
            except UsageError as exc:
                raise UsageError(f"unknown revision {rev!r} ({exc.message})",
                                 hint=exc.hint) from None
    base_rev = base or default_base(root)
    changed = _changed(root, base_rev, head, records_rel)
    old_blobs = _cat(root, [(p, old) for s, p, old, _new in changed if s != "A"])
    if head is None:
        new_blobs = {}
        for s, p, _old, _new in changed:
            if s != "D":
                try:
                    # a symlink is read as git stores it (its target's name), never
                    # followed: a record linked to a file outside the repository is
                    # neither read nor scanned
                    file = root / p
                    new_blobs[p] = (os.fsencode(os.readlink(file)) if file.is_symlink()
                                    else file.read_bytes())
                except OSError:
                    continue
    else:
        new_blobs = _cat(root, [(p, new) for s, p, _old, new in changed if s != "D"])
    report = ReviewReport(base_rev, head or "working tree")
    scanned: list[tuple[str, bytes]] = []
    for _status, path, _old, _new in changed:
        old = new = None
        problem = ""
        if path in old_blobs:
            try:
                old = parse_record_bytes(old_blobs[path], path)
            except RecordError:
                old = None
        if path in new_blobs:
            scanned.append((path, new_blobs[path]))
            try:
                new = parse_record_bytes(new_blobs[path], path)
            except RecordError as exc:
                problem = str(exc.problem)
        if new is None and old is None:
            name = path.rsplit("/", 1)[-1].removesuffix(".md")
            change = Change("changed", path, name, "?", name)
        elif new is None and path in new_blobs:  # malformed now, not purged
            change = classify(path, old, old)
        else:
            change = classify(path, old, new)
        if new is not None:
            expected = f"{records_rel.rstrip('/')}/{new.relpath.removeprefix('records/')}"
            if path != expected:  # a copy under another name (a duplicate id) or folder
                problem = problem or f"a {new.kind} record with id {new.id} belongs at " \
                    f"{expected}"
        if problem:
            change.verb = "changed" if old is not None else "added"
            change.attention.append(f"fails validation: {problem}")
        report.changes.append(change)
    if scan and scanned:
        from memidex.review.secrets import scan_records

        by_path = {c.path: c for c in report.changes}
        for f in scan_records(scanned, secrets, allow):
            by_path[f.path].attention.append(str(f.problem()))
    return report
