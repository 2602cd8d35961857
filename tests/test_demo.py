"""`make demo` tells a short story (issue 25, item 5): what the index holds, a search, a
brief, the check, and what each example run taught — not a raw command log."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO_ROOT


def test_the_demo_tells_what_each_step_shows() -> None:
    out = subprocess.run([sys.executable, str(REPO_ROOT / "scripts/demo.py")],
                         capture_output=True, text=True, check=False, timeout=600)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    headings = re.findall(r"^\d\. (.+)$", text, re.MULTILINE)
    assert [h.split()[0] for h in headings] == ["What", "A", "A", "The", "What"]
    assert re.search(r"^  \d+ records — \d+ of shop-web, \d+ of shop-admin — and 3 "
                     "policies", text, re.MULTILINE)
    assert '  $ memidex knowledge search "place order disabled"' in text
    assert "## Learned records (3)" in text  # the brief serves records
    assert "ok: " in text and " records and 3 policies are valid" in text
    runs = re.findall(r"^  (r-00\d\d) \(run \d+, build v[\d.]+\): .+ → .+$", text,
                      re.MULTILINE)
    assert runs == [f"r-00{n}" for n in range(51, 61)]
    assert "      supersede: The place order button is enabled on /checkout" in text
    assert "Traceback" not in out.stderr
