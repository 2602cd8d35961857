"""Record the real loop: run the Playwright suite once per scheduled run, each against the
app started at that run's build, and keep every report (docs/realloop.md).

    python bench/realloop/record.py [--only 3,7] [--chromium /usr/bin/chromium]

``make realloop`` installs what this needs (``npm ci``; Debian's chromium when
``/usr/bin/chromium`` is missing) and runs it. For each run of ``SCHEDULE``, in order: the
app (``app.py --build B --seed S [--outage]``) on a free port of 127.0.0.1, then
``npx playwright test`` with ``BASE_URL``, ``REALLOOP_BUILD`` and the report files in its
environment; the JSON report goes to ``reports/run-NN-buildB.json`` and the JUnit report
beside it (``.xml``). ``reports/runs.yaml`` is the manifest: order, build, build tag, seed,
outage, report files and the runner's counts. Playwright exits 1 when a test failed,
which is what some runs are for; a run without a report is an error.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPORTS = HERE / "reports"
PRODUCT = "roombook"


@dataclass(frozen=True)
class Planned:
    """One run of the schedule."""

    run: int
    build: int
    seed: int
    outage: bool = False

    @property
    def tag(self) -> str:
        return f"v{self.build}"

    @property
    def stem(self) -> str:
        return f"run-{self.run:02d}-build{self.build}"


SCHEDULE: tuple[Planned, ...] = (
    Planned(1, 1, 1101), Planned(2, 1, 1102), Planned(3, 1, 1103, outage=True),
    Planned(4, 2, 1204), Planned(5, 2, 1205, outage=True), Planned(6, 2, 1206),
    Planned(7, 3, 1307), Planned(8, 3, 1308), Planned(9, 3, 1309),
    Planned(10, 4, 1410), Planned(11, 4, 1411), Planned(12, 4, 1412, outage=True),
    Planned(13, 4, 1413),
    Planned(14, 5, 1514), Planned(15, 5, 1515), Planned(16, 5, 1516),
)
"""Three or four runs per build, in build order; the outage of ``/api/availability`` in one
run of builds 1, 2 and 4; a fixed seed per run (the slow elements' delays)."""


class RecordError(Exception):
    """A run could not be recorded (the message says which and why)."""


def start_app(p: Planned) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, str(HERE / "app.py"), "--build", str(p.build), "--seed",
           str(p.seed), "--port", "0"] + (["--outage"] if p.outage else [])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.kill()
        raise RecordError(f"run {p.run}: the app did not start ({line!r})")
    url = line.removeprefix("listening on ")
    with urllib.request.urlopen(url + "/api/health", timeout=10) as res:
        health = json.load(res)
    if health != {"build": p.build, "seed": p.seed, "outage": p.outage}:
        proc.kill()
        raise RecordError(f"run {p.run}: the app says {health}, not build {p.build}")
    return proc, url


def record(p: Planned, chromium: str) -> dict[str, Any]:
    json_out, junit_out = REPORTS / f"{p.stem}.json", REPORTS / f"{p.stem}.xml"
    for f in (json_out, junit_out):
        f.unlink(missing_ok=True)
    proc, url = start_app(p)
    started = time.monotonic()
    try:
        env = {**os.environ, "BASE_URL": url, "REALLOOP_BUILD": str(p.build),
               "REALLOOP_JSON": str(json_out), "REALLOOP_JUNIT": str(junit_out),
               "CHROMIUM": chromium, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1", "CI": ""}
        log = REPORTS / f"{p.stem}.log"
        with log.open("w", encoding="utf-8") as fh:
            done = subprocess.run(["npx", "playwright", "test"], cwd=HERE, env=env,
                                  stdout=fh, stderr=subprocess.STDOUT, timeout=900)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    if done.returncode not in (0, 1) or not json_out.is_file():
        raise RecordError(f"run {p.run}: playwright exited {done.returncode} without a "
                          f"report (see {log})")
    log.unlink()  # the console's copy of what the reports say
    stats = json.loads(json_out.read_text(encoding="utf-8")).get("stats", {})
    return {"run": p.run, "build": p.build, "build_tag": p.tag, "seed": p.seed,
            "outage": p.outage, "report": json_out.name, "junit": junit_out.name,
            "counts": {k: stats.get(k) for k in ("expected", "unexpected", "flaky",
                                                 "skipped")},
            "seconds": round(time.monotonic() - started, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="record only these runs (comma-separated numbers); "
                        "the manifest keeps the others' entries")
    parser.add_argument("--chromium", default=os.environ.get("CHROMIUM", "/usr/bin/chromium"))
    args = parser.parse_args(argv)
    if not (HERE / "node_modules" / "@playwright" / "test").is_dir():
        print("error: bench/realloop/node_modules has no @playwright/test: run "
              "`npm ci` there (or `make realloop`)", file=sys.stderr)
        return 2
    if shutil.which(args.chromium) is None:
        print(f"error: no browser at {args.chromium}: `apt-get install -y chromium` (or "
              "`make realloop`)", file=sys.stderr)
        return 2
    only = {int(x) for x in args.only.split(",")} if args.only else None
    REPORTS.mkdir(exist_ok=True)
    manifest = REPORTS / "runs.yaml"
    kept: dict[int, dict[str, Any]] = {}
    if only is not None and manifest.is_file():
        kept = {r["run"]: r for r in yaml.safe_load(manifest.read_text())["runs"]}
    began = time.monotonic()
    for p in SCHEDULE:
        if only is not None and p.run not in only:
            continue
        try:
            kept[p.run] = record(p, args.chromium)
        except (RecordError, OSError, subprocess.SubprocessError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        c = kept[p.run]["counts"]
        print(f"run {p.run:2d} build {p.build}{' outage' if p.outage else '':7s} "
              f"{c['expected']} passed, {c['unexpected']} failed, {c['flaky']} flaky "
              f"({kept[p.run]['seconds']} s)", flush=True)
    runs = [kept[p.run] for p in SCHEDULE if p.run in kept]
    manifest.write_text(
        "# The real loop's recorded runs, in order (written by bench/realloop/record.py;\n"
        "# docs/realloop.md). The truth of each build is truth.yaml.\n"
        + yaml.safe_dump({"product": PRODUCT, "runs": runs}, sort_keys=False,
                         allow_unicode=True), encoding="utf-8")
    print(f"{len(runs)} runs in {manifest} ({time.monotonic() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
