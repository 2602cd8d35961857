"""Time ``import_report`` on the 394-test Playwright report (SPEC §9, issue: ≤ 1 s end to
end). Prints one line, the median of a few runs:

    python bench/import_bench.py [--repeat 5] [REPORT]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from memidex.importers import import_report  # noqa: E402

REPORT = REPO / "tests/data/reports/playwright-buerokratt-TDD-Playwright.json"


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


def measure(report: Path = REPORT, repeat: int = 5) -> tuple[float, int]:
    """The median seconds of ``repeat`` imports, and the number of tests imported."""
    times, tests = runs(report, repeat)
    return statistics.median(times), tests


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", nargs="?", type=Path, default=REPORT)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    seconds, tests = measure(args.report, max(1, args.repeat))
    print(f"import {tests}-test playwright report: {seconds:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
