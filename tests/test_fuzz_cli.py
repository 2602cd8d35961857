"""Issue 9: a seeded random driver over command lines and record files. On every input the
CLI keeps its three global promises: no traceback, an exit code in {0, 1, 2, 3, 4}, and
no file outside the knowledge folder changed."""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path

from conftest import make_record, run_cli, write_record

KNOWLEDGE = "agent-qa-knowledge"
SEED = int(os.environ.get("MEMIDEX_FUZZ_SEED", "20261130"))
RUNS = int(os.environ.get("MEMIDEX_FUZZ_RUNS", "60"))

WEIRD = ["", " ", "-", "--", "x" * 300, "99999999999999999999999", "-1", "0", "nan",
         "../../etc/passwd", "el:button:place-order", "page:/login?x=1", "\x1b[2Jhi",
         "é😀", "a=b", "=", "fact", "procedure", "caution", "--json", "--all-products",
         "shop-web", "other-product", "%s%n", "\\", "'", '"']


def _tree(folder: Path, skip: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for dirpath, dirs, files in os.walk(folder):
        rel = os.path.relpath(dirpath, folder)
        dirs[:] = [d for d in dirs if os.path.normpath(os.path.join(rel, d)) not in skip]
        for name in files:
            path = os.path.join(dirpath, name)
            key = os.path.normpath(os.path.join(rel, name))
            if os.path.islink(path):
                out[key] = "link:" + os.readlink(path)
            else:
                out[key] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return out


def _command(rng: random.Random, ids: list[str]) -> list[str]:
    def pick() -> str:
        return rng.choice(WEIRD + ids + ids[:1] + [i[:8] for i in ids])

    kind = rng.choice(["fact", "procedure", "caution", "bogus"])
    choices: list[list[str]] = [
        ["knowledge", "search", pick()] + rng.sample(["--json", "-n", "3", "--kind", kind,
                                                      "--status", pick(), "--anchor", pick(),
                                                      "--all-products"], rng.randint(0, 3)),
        ["knowledge", "list"] + rng.sample(["--json", "--kind", kind, "--status", "any",
                                            "--all-products", "--product", pick()],
                                           rng.randint(0, 2)),
        ["knowledge", "show", pick()] + (["--json"] if rng.random() < 0.5 else []),
        ["knowledge", "add", "--kind", kind, "--anchor", pick(), "--title", pick()]
        + rng.sample(["--body", pick(), "--scope", pick(), "--json", "--wait", "1"],
                     rng.randint(0, 2)),
        ["knowledge", rng.choice(["confirm", "deprecate", "quarantine", "release"]), pick(),
         "--wait", "2"] + rng.sample(["--run-ordinal", "--ordinal", pick(), "--json"],
                                     rng.randint(0, 2)),
        ["knowledge", "supersede", pick()] + rng.sample(["--title", pick(), "--by", pick(),
                                                         "--body", pick()], rng.randint(0, 3)),
        ["knowledge", "purge", pick()],
        ["knowledge", "check"] + rng.sample(["--format", "github", "json", "text"],
                                            rng.randint(0, 2)),
        ["doctor"] + (["--json"] if rng.random() < 0.5 else []),
        ["knowledge", "rebuild-index"] + (["--json"] if rng.random() < 0.5 else []),
        ["daemon", "--once"],
        [pick(), pick()],
        ["knowledge", pick(), pick(), pick()],
    ]
    return rng.choice(choices)


def _mutate_records(rng: random.Random, repo: Path) -> None:
    """Break or change a record file as a person (or a bad merge) might."""
    files = sorted((repo / KNOWLEDGE).rglob("records/*/*.md"))
    if not files:
        return
    target = rng.choice(files)
    data = target.read_bytes()
    how = rng.randrange(7)
    if how == 0:
        target.write_bytes(data[: rng.randrange(len(data) + 1)])
    elif how == 1:
        target.write_bytes(b"\xff\xfe" + data)
    elif how == 2:
        target.write_bytes(data.replace(b"confirmations: 0",
                                        b"confirmations: 99999999999999999999999"))
    elif how == 3:
        target.write_bytes(data.replace(b"\nstatus:", b"\nstatus: active\nstatus:", 1))
    elif how == 4:
        target.write_bytes(data.replace(b"\n", b"\r\n"))
    elif how == 5:
        target.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(200))))
    else:
        target.unlink()


def test_cli_keeps_its_promises_on_random_input(repo: Path, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("untouched\n")
    ids = [write_record(repo, make_record()).stem,
           write_record(repo, make_record(kind="procedure", anchor="page:/checkout",
                                          title="Check out with a card")).stem,
           write_record(repo, make_record(kind="caution", anchor="el:input:email",
                                          title="Email is validated late")).stem]
    before_outside = _tree(outside, ())
    before_repo = _tree(repo, (KNOWLEDGE, ".git"))
    failures: list[str] = []
    for n in range(RUNS):
        if rng.random() < 0.15:
            _mutate_records(rng, repo)
            before_repo = _tree(repo, (KNOWLEDGE, ".git"))
        args = _command(rng, ids)
        out = run_cli(repo, *args)
        tag = f"#{n} seed {SEED}: memidex {args!r} -> {out.returncode}"
        if "Traceback" in out.stderr or "Traceback" in out.stdout:
            failures.append(f"{tag}: traceback\n{out.stderr[-1500:]}")
        if out.returncode not in (0, 1, 2, 3, 4):
            failures.append(f"{tag}: exit code\n{out.stderr[-500:]}")
        if out.returncode not in (0,) and out.stderr and not any(
                line.startswith(("error:", "Usage:", "Error:", "Try ", "usage:"))
                for line in out.stderr.splitlines()) and out.returncode != 1:
            failures.append(f"{tag}: no error line\n{out.stderr[-500:]}")
        if _tree(repo, (KNOWLEDGE, ".git")) != before_repo:
            failures.append(f"{tag}: changed a file outside the knowledge folder")
            before_repo = _tree(repo, (KNOWLEDGE, ".git"))
        if _tree(outside, ()) != before_outside:
            failures.append(f"{tag}: changed a file outside the repository")
    assert not failures, "\n\n".join(failures[:5])
