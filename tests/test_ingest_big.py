"""``runs ingest`` of a big Playwright report (issue 19, item 22): read as a stream, its
peak memory a small multiple of the report (measured on a real process), its evidence
validated without jsonschema, and a report over the size limit refused from its size
with one clear line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "bench"))

import big_report  # noqa: E402

PEAK = ("import resource, subprocess, sys\n"
        "out = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "print(out.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.stderr.write(out.stderr); sys.stdout.write(out.stdout)")


def _ingest(root: Path, report: Path) -> tuple[int, int, str, str]:
    """(exit code, peak RSS in KB, stdout, stderr) of `memidex runs ingest REPORT --json`
    as its own process (the peak of that process alone)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
    env["MEMIDEX_WARM"] = "0"
    out = subprocess.run([sys.executable, "-c", PEAK, sys.executable, "-m", "memidex",
                          "--root", str(root), "runs", "ingest", str(report), "--json"],
                         capture_output=True, text=True, env=env, check=True)
    head, _, rest = out.stdout.partition("\n")
    code, peak = (int(x) for x in head.split())
    return code, peak, rest, out.stderr


def test_a_big_report_is_ingested_within_a_few_times_its_size(repo: Path,
                                                              tmp_path: Path) -> None:
    small, big = tmp_path / "small.json", tmp_path / "big.json"
    big_report.write(0.5, small)
    info = big_report.write(24, big)
    code, base, _, err = _ingest(repo, small)
    assert code == 0, err
    code, peak, out, err = _ingest(repo, big)
    assert code == 0, err
    result = json.loads(out)
    assert result["ordinal"] == 2 and result["changes"]
    import jsonschema  # noqa: F401  (the reference, here only to be sure it ran in none)

    ratio = (peak - base) * 1024 / info["bytes"]
    # before (jsonschema, a masked copy, an indented frozen run, two full dumps to hash
    # it): 5.5x; now ~2.5x
    assert ratio < 4.0, f"peak {peak // 1024} MB over {base // 1024} MB for " \
                        f"{info['bytes'] / 1e6:.0f} MB: {ratio:.1f}x"
    frozen = repo / ".agent-qa/runs" / f"{result['run_id']}.json"
    assert frozen.stat().st_size < info["bytes"]  # what learning needs, not the logs


def test_a_report_over_the_limit_is_refused_from_its_size(repo: Path,
                                                          tmp_path: Path) -> None:
    from memidex.importers import MAX_REPORT_BYTES

    huge = tmp_path / "huge.json"
    with huge.open("wb") as f:  # sparse: nothing is written but its size
        f.truncate(MAX_REPORT_BYTES)
    code, _peak, out, err = _ingest(repo, huge)
    assert code == 4 and json.loads(out)["error"]["code"] == "ReportError"
    assert err.splitlines()[0] == (f"error: {huge}: the report is {MAX_REPORT_BYTES:,} "
                                   f"bytes; the limit is {MAX_REPORT_BYTES:,} bytes")
    assert err.splitlines()[1].startswith("hint: split the run")
