"""Time ``import_report`` on the 394-test Playwright report and the 338-test CTRF report
(SPEC §9: ≤ 1 s end to end), each against a raw limit measured in the same run —
``json.load`` of the file and a walk over its tests, what any reader must at least do —
and ``probe`` of both. Prints one line per figure, the median of a few runs:

    python bench/import_bench.py [--repeat 5] [REPORT ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from memidex.importers import import_report, probe  # noqa: E402

REPORT = REPO / "tests/data/reports/playwright-buerokratt-TDD-Playwright.json"
CTRF = REPO / "tests/data/ctrf/cypress-ministryofjustice-hmpps-challenge-support-" \
                "intervention-plan-ui.json"


def runs(report: Path = REPORT, repeat: int = 5) -> tuple[list[float], int]:
    """The seconds of each of ``repeat`` imports, and the number of tests imported."""
    times, tests = [], 0
    with tempfile.TemporaryDirectory() as root:
        for _ in range(repeat):
            start = time.perf_counter()
            result = import_report(report, product="bench", root=Path(root))
            times.append(time.perf_counter() - start)
            tests = result.counts["tests"]
    return times, tests


def _walk(data: Any) -> int:
    """The tests of a parsed Playwright or CTRF report, counted."""
    if "results" in data:
        return len(data["results"]["tests"])
    n, stack = 0, list(data["suites"])
    while stack:
        suite = stack.pop()
        stack.extend(suite.get("suites", ()))
        n += sum(len(spec["tests"]) for spec in suite.get("specs", ()))
    return n


def raw_runs(report: Path = REPORT, repeat: int = 5) -> list[float]:
    """The raw limit: read the file, ``json.load`` it, walk its tests."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        with report.open(encoding="utf-8") as fh:
            _walk(json.load(fh))
        times.append(time.perf_counter() - start)
    return times


def probe_runs(report: Path = REPORT, repeat: int = 5) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        probe(report)
        times.append(time.perf_counter() - start)
    return times


def measure(report: Path = REPORT, repeat: int = 5) -> tuple[float, int]:
    """The median seconds of ``repeat`` imports, and the number of tests imported."""
    times, tests = runs(report, repeat)
    return statistics.median(times), tests


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("reports", nargs="*", type=Path, default=[REPORT, CTRF])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    repeat = max(1, args.repeat)
    for report in args.reports:
        fmt = probe(report)
        seconds, tests = measure(report, repeat)
        raw = statistics.median(raw_runs(report, repeat))
        probed = statistics.median(probe_runs(report, repeat))
        size = report.stat().st_size / 1e6
        print(f"import {tests}-test {fmt} report ({size:.1f} MB): {seconds:.3f} s; raw "
              f"json.load + walk {raw:.3f} s (x{seconds / raw:.1f}); probe "
              f"{probed * 1000:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
