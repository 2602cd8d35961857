"""Regenerate the dashboard's screenshots in docs/dashboard/ (PNG, 1280 px wide).

    python scripts/dashboard_screenshots.py [--out docs/dashboard]

Builds the example shop the dashboard tests use (tests/test_dashboard_shop.py: the
example knowledge with its ten runs learned, and a regression build whose supersessions
wait as proposals) in a scratch folder, accepts the Place order proposal through the
library (so that record shows three versions), starts ``memidex dashboard --port 0`` on
it and photographs every page (its first 1,800 px) in Debian's Chromium
(``/usr/bin/chromium``, driven by Playwright). Screenshots are quantised to 256 colours
when Pillow is installed (about a third of the size); without it they are written as
Chromium takes them.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PLACE_ORDER = "fact-el-button-place-order-b9ec294f56697d9c"
MAX_HEIGHT = 1800
"""A page taller than this is cut there (the brief preview is a long page)."""

SHOTS = (
    ("overview", "/"),
    ("runs", "/runs"),
    ("run", "/runs/r-0054"),
    ("build", "/builds/v1.5.0"),
    ("flakiness", "/flaky"),
    ("record", f"/records/{PLACE_ORDER}"),
    ("proposals", "/proposals"),
    ("proposal", None),  # the first proposal left, found on the proposals page
    ("brief", "/brief?test=checkout-happy-path&at=52"),
    ("search", "/search?q=place+order"),
)


def _small(path: Path) -> None:
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as img:
        img.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(
            path, optimize=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "dashboard")
    args = p.parse_args()
    os.environ.setdefault("GIT_AUTHOR_NAME", "memidex")
    os.environ.setdefault("GIT_AUTHOR_EMAIL", "memidex@example.invalid")
    os.environ.setdefault("GIT_COMMITTER_NAME", "memidex")
    os.environ.setdefault("GIT_COMMITTER_EMAIL", "memidex@example.invalid")
    from playwright.sync_api import sync_playwright

    from memidex.app import Memidex
    from test_dashboard_shop import Server, build_shop

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="memidex-shots-") as d:
        shop = build_shop(Path(d) / "shop")
        with Memidex(shop.root) as m:
            (pid,) = [x.id for x in m.proposals().proposals if x.record_id == PLACE_ORDER]
            m.decide_proposal(pid, accept=True)
        server = Server(shop.root)
        err = ""
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                for name, path in SHOTS:
                    if path is None:
                        page.goto(server.url.rstrip("/") + "/proposals")
                        path = page.get_attribute("tr[data-proposal] a", "href") or "/"
                    page.goto(server.url.rstrip("/") + path)
                    out = args.out / f"{name}.png"
                    height = min(MAX_HEIGHT, int(page.evaluate(
                        "document.documentElement.scrollHeight")))
                    page.screenshot(path=str(out), full_page=True,
                                    clip={"x": 0, "y": 0, "width": 1280, "height": height})
                    _small(out)
                    print(f"{out.relative_to(ROOT)}: {out.stat().st_size // 1024} KB")
                browser.close()
        finally:
            err = server.stop()
    if "Traceback" in err:
        sys.stderr.write(err)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
