"""Learn the example shop's knowledge from its runs (examples/runs/), in a scratch copy.

    python scripts/learn_examples.py              # ingest the series into a scratch copy,
                                                  # print what each run taught
    python scripts/learn_examples.py --update     # and replace the committed example
                                                  # records with what the runs taught

The scratch copy is a new git repository holding this repository's memidex.toml,
policies/ and the hand-written example records about subjects the runs do not teach (so
the runs are numbered after the ordinals those records name); the runs are ingested into
it with the real CLI, in order. ``--update`` then writes the learned records into
agent-qa-knowledge/ and removes the hand-made records about the same kind and main anchor
(the runs replace them); hand-made records about other subjects stay.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORDS = "agent-qa-knowledge/memory/records"


def _memidex(root: Path, *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "memidex", "--root", str(root), *args],
                         capture_output=True, text=True, check=False,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(root)})
    if out.returncode != 0:
        raise SystemExit(f"memidex {' '.join(args)} failed:\n{out.stderr}")
    return out.stdout


def _subject(path: Path) -> tuple[str, str]:
    """(kind, main anchor) of a record file, read from its front matter."""
    kind = anchor = ""
    for line in path.read_text(encoding="utf-8").splitlines()[1:40]:
        if line.startswith("kind: "):
            kind = line[6:].strip()
        elif line.startswith("anchor: "):
            anchor = line[8:].strip().strip('"')
    return kind, anchor


def _learned(path: Path) -> bool:
    head = path.read_text(encoding="utf-8").split("\n---", 1)[0]
    return "\nwritten_by: " in head


def learn(scratch: Path, *, quiet: bool = False) -> Path:
    """Ingest the example runs into a scratch repository that holds the hand-written
    example records about other subjects (so the runs are numbered after the ordinals
    those records name, as in the repository)."""
    first = _ingest(scratch / "subjects", [], quiet=True)
    taught = {_subject(p) for p in (first / RECORDS).rglob("*.md")}
    keep = [p for p in sorted((ROOT / RECORDS).rglob("*.md"))
            if not _learned(p) and _subject(p) not in taught]
    return _ingest(scratch / "shop", keep, quiet=quiet)


def _ingest(repo: Path, records: list[Path], *, quiet: bool) -> Path:
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    shutil.copy(ROOT / "memidex.toml", repo / "memidex.toml")
    shutil.copytree(ROOT / "policies", repo / "policies")
    _memidex(repo, "init")
    for path in records:
        dst = repo / RECORDS / path.relative_to(ROOT / RECORDS)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dst)
    for run in sorted((ROOT / "examples/runs").glob("*.json")):
        out = _memidex(repo, "runs", "ingest", str(run))
        if not quiet:
            sys.stdout.write(out)
    return repo


def update(learned: Path) -> None:
    taught = {p.relative_to(learned / RECORDS): p for p in (learned / RECORDS).rglob("*.md")
              if _learned(p)}
    subjects: dict[tuple[str, str], str] = {}
    for rel in sorted(taught):
        subjects.setdefault(_subject(taught[rel]), rel.stem)
    replaced: dict[str, str] = {}  # a removed hand-made id -> the learned id replacing it
    for path in sorted((ROOT / RECORDS).rglob("*.md")):
        rel = path.relative_to(ROOT / RECORDS)
        if rel in taught:
            continue
        if _subject(path) in subjects:
            replaced[path.stem] = subjects[_subject(path)]
            path.unlink()
        elif _learned(path):  # learned before, no longer taught
            path.unlink()
    for path in sorted((ROOT / RECORDS).rglob("*.md")):  # references follow the records
        text = path.read_text(encoding="utf-8")
        new = text
        for old, learned_id in replaced.items():
            new = new.replace(old, learned_id)
        if new != text:
            path.write_text(new, encoding="utf-8")
    removed = len(replaced)
    for rel, src in sorted(taught.items()):
        dst = ROOT / RECORDS / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    print(f"wrote {len(taught)} learned records; removed {removed} hand-made ones they "
          "replace")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--update", action="store_true",
                   help="replace the committed example records with the learned ones")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="memidex-examples-") as d:
        repo = learn(Path(d))
        sys.stdout.write(_memidex(repo, "runs", "list"))
        sys.stdout.write(_memidex(repo, "knowledge", "diff", "v1.4.2"))
        if args.update:
            update(repo)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
