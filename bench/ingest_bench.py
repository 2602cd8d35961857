"""The ingest figures of SPEC §9: a 150-test x 3-step run into an empty repository, and
again (a new run id: everything confirms) into one of N records, each beside the raw
limit measured in the same run — a plain script writing the same record files with
write + fsync + rename.

Run alone: ``python bench/ingest_bench.py [--corpus DIR]``; ``bench/run.py`` calls
:func:`ingest_figures` with its corpus.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TESTS = 150
STEPS = 3


def make_run(run_id: str, product: str = "bench-shop", build: str = "b1") -> dict[str, Any]:
    """A run of TESTS passing tests of STEPS verified steps each (all checks hold)."""
    tests = []
    for i in range(TESTS):
        page = f"page:/area-{i % 25}"
        steps = [
            {"index": 0, "action": "goto", "target": page, "anchors": [f"test:t-{i:03d}"],
             "observed": f"Area {i % 25}", "check": {"kind": "assert-visible", "passed": True}},
            {"index": 1, "action": "click", "target": f"el:button:b-{i:03d}",
             "anchors": [page], "observed": f"Button {i} pressed",
             "check": {"kind": "assert-text", "passed": True}},
            {"index": 2, "action": "assert", "target": f"el:text:t-{i:03d}",
             "anchors": [page], "observed": f"Result {i} shown after 120 ms",
             "check": {"kind": "assert-text", "passed": True}},
        ][:STEPS]
        tests.append({"test_id": f"t-{i:03d}", "verdict": "pass", "steps": steps})
    return {"run_id": run_id, "product": product, "build_tag": build, "ci": False,
            "tests": tests}


RAW_SCRIPT = r"""
import os, sys
src, dst = sys.argv[1], sys.argv[2]
names = sorted(os.listdir(src))
for name in names:
    data = open(os.path.join(src, name), "rb").read()
    tmp = os.path.join(dst, name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, data)
    os.fsync(fd)
    os.close(fd)
    os.replace(tmp, os.path.join(dst, name))
fd = os.open(dst, os.O_RDONLY)
os.fsync(fd)
os.close(fd)
"""


def _run(cmd: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - t0


def _init(root: Path, exe: str) -> None:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([exe, "--root", str(root), "init", "--product", "bench-shop"], check=True,
                   capture_output=True)


def _records(root: Path) -> list[Path]:
    return sorted((root / "agent-qa-knowledge/memory/records").rglob("*.md"))


def raw_limit(files: list[Path], tmp: Path) -> float:
    """A plain script writing the same files (write + fsync + rename), end to end."""
    src = tmp / "raw-src"
    dst = tmp / "raw-dst"
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(dst, ignore_errors=True)
    src.mkdir()
    dst.mkdir()
    for i, f in enumerate(files):
        shutil.copyfile(f, src / f"{i:05d}-{f.name}")
    return _run([sys.executable, "-c", RAW_SCRIPT, str(src), str(dst)], tmp)


def ingest_figures(exe: str, tmp: Path, corpus: Path | None, repeat: int = 3
                   ) -> dict[str, Any]:
    """Seconds (medians) for: ingest into an empty repository (adds), a second run into it
    (confirms), the raw limit for the same files, and the confirm run into ``corpus``."""
    first = tmp / "run-a.json"
    second = tmp / "run-b.json"
    first.write_text(json.dumps(make_run("bench-a")), encoding="utf-8")
    second.write_text(json.dumps(make_run("bench-b")), encoding="utf-8")
    adds: list[float] = []
    confirms: list[float] = []
    raws: list[float] = []
    files: list[Path] = []
    for k in range(repeat):
        root = tmp / f"empty-{k}"
        _init(root, exe)
        adds.append(_run([exe, "--root", str(root), "runs", "ingest", str(first)], root))
        files = _records(root)
        confirms.append(_run([exe, "--root", str(root), "runs", "ingest", str(second)], root))
        raws.append(raw_limit(files, tmp))
        shutil.rmtree(root, ignore_errors=True)
    out: dict[str, Any] = {"records_written": len(files), "add_empty": sorted(adds),
                           "confirm_empty": sorted(confirms), "raw": sorted(raws)}
    if corpus is not None:
        out["confirm_corpus"] = [_corpus_case(exe, corpus.resolve(), first, second)]
    return out


def _corpus_case(exe: str, corpus: Path, first: Path, second: Path) -> float:
    """The confirm run into the corpus; everything the two ingests made is removed after."""
    before = {p for p in _records(corpus)}
    state = corpus / ".agent-qa"
    had_state = state.exists()
    try:
        subprocess.run([exe, "--root", str(corpus), "runs", "ingest", str(first)],
                       check=True, capture_output=True)
        return _run([exe, "--root", str(corpus), "runs", "ingest", str(second)], corpus)
    finally:
        for p in _records(corpus):
            if p not in before:
                p.unlink()
        for sub in ("runs", "build-ordinals.json"):
            target = state / sub
            if target.is_dir():
                shutil.rmtree(target, ignore_errors=True)
            elif target.exists():
                target.unlink()
        if not had_state:
            shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(corpus / "agent-qa-knowledge/memory/queue", ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--corpus", type=Path, default=None, help="a corpus repository "
                   "(bench/corpus/...) for the into-N-records case")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    exe = shutil.which("memidex", path=str(Path(sys.executable).parent)) or "memidex"
    with tempfile.TemporaryDirectory(prefix="memidex-ingest-") as d:
        figures = ingest_figures(exe, Path(d), args.corpus, args.repeat)
    med = {k: v[len(v) // 2] for k, v in figures.items() if isinstance(v, list)}
    raw = med["raw"]
    print(f"records written per run: {figures['records_written']}")
    for key in ("add_empty", "confirm_empty", "confirm_corpus"):
        if key in med:
            print(f"ingest {key:15} {med[key]:.3f} s   ratio {med[key] / raw:.2f} x raw "
                  f"write+fsync+rename ({raw:.3f} s)")
    if "confirm_corpus" in med:
        ratio = med["confirm_corpus"] / med["confirm_empty"]
        print(f"corpus / empty (confirm runs): {ratio:.2f} x")
    return 0


if __name__ == "__main__":
    os.environ.pop("CI", None)
    raise SystemExit(main())
