"""A big Playwright JSON report, for the memory and time of ``runs ingest``
(docs/import.md, "Big reports"): specs of a real report (tests/data/reports) repeated
under new titles until the file reaches ``--mb``, each result carrying what makes real
reports big — an error with its stack, a few hundred lines of stdout and stderr, inline
attachments (base64) and a tree of steps. Deterministic for a size.

    python bench/big_report.py --mb 200 --out /tmp/big.json
"""

from __future__ import annotations

import argparse
import base64
import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "tests/data/reports/playwright-buerokratt-TDD-Playwright.json"


def _specs(suite: dict[str, Any]) -> list[dict[str, Any]]:
    out = list(suite.get("specs", ()))
    for child in suite.get("suites", ()):
        out.extend(_specs(child))
    return out


def _heavy(result: dict[str, Any], i: int) -> dict[str, Any]:
    """``result`` with logs, attachments and steps added (about 70 KB)."""
    r = dict(result)
    r["stdout"] = [{"text": f"[{i}] line {k}: " + "console output of the app " * 4 + "\n"}
                   for k in range(150)]
    r["stderr"] = [{"text": f"[{i}] warning {k}: deprecated call\n"} for k in range(50)]
    blob = base64.b64encode(bytes((i * 7 + k) % 256 for k in range(12_000))).decode()
    r["attachments"] = [*r.get("attachments", ()),
                        {"name": "screenshot", "contentType": "image/png", "body": blob},
                        {"name": "log", "contentType": "text/plain", "body": blob[:4000]}]
    r["steps"] = [{"title": f"page.click(#button-{k}) in the list of items the page shows",
                   "category": "pw:api", "duration": 12, "steps": [
        {"title": f"expect(locator('#item-{k}')).toHaveText(\"Item {k} of the cart\")",
         "category": "expect", "duration": 3}]} for k in range(150)]
    return r


def write(mb: float, out: Path) -> dict[str, int]:
    """Write a report of about ``mb`` MB to ``out``; (tests, bytes)."""
    base = json.loads(SOURCE.read_text(encoding="utf-8"))
    specs = _specs(base["suites"][0]) or _specs(base)
    target = int(mb * 1024 * 1024)
    size, tests, copy = 0, 0, 0
    with out.open("w", encoding="utf-8") as f:
        f.write('{"config": ' + json.dumps(base["config"]) + ', "suites": [')
        first = True
        while size < target:
            suite_specs = []
            for spec in specs:
                s = dict(spec)
                s["title"] = f"{spec['title']} (copy {copy})"
                s["id"] = f"{spec.get('id', 'x')}-{copy}"
                s["tests"] = [dict(t, results=[_heavy(r, tests) for r in t["results"]])
                              for t in spec["tests"]]
                tests += len(s["tests"])
                suite_specs.append(s)
            text = json.dumps({"title": f"copy-{copy}.spec.ts", "file": f"copy-{copy}.spec.ts",
                               "line": 0, "column": 0, "specs": suite_specs, "suites": []})
            f.write(("" if first else ", ") + text)
            size += len(text)
            first = False
            copy += 1
        f.write('], "errors": []}')
    return {"tests": tests, "bytes": out.stat().st_size}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--mb", type=float, default=200)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    info = write(args.mb, args.out)
    print(f"{args.out}: {info['tests']} tests, {info['bytes'] / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
