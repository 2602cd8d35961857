"""The repository the dashboard tests run on, and the real server they talk to.

:func:`build_shop` makes a copy of the example knowledge the way
``scripts/learn_examples.py`` does — ``memidex.toml``, ``policies/`` and the hand-written
records about subjects the runs do not teach — and ingests the ten example runs
(``examples/runs/``) through the library. A record whose title and body are hostile HTML
is added as a person would add it. Then a build v1.5.1 regresses to v1.4.3's checkout:
run r-0061 (r-0056's evidence again) is ingested with ``[learning] max_rewrites = 0``, so
its supersessions wait as proposals a person can accept. :class:`Server` starts ``memidex
dashboard --port 0`` in a subprocess and reads the address it prints.

The tests here check the shop itself: a dashboard test that found no proposal or no
hostile record would prove nothing.
"""

from __future__ import annotations

import http.client
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from conftest import REPO_ROOT, git, run_cli

RECORDS = "agent-qa-knowledge/memory/records"
HOSTILE_TITLE = ('<script>window.__pwned = 1</script><img src=x '
                 'onerror="window.__pwned = 2; alert(2)"> Pwn button')
HOSTILE_BODY = ('<svg onload="window.__pwned = 3; alert(3)"></svg> '
                '"><iframe src=javascript:alert(4)> pwn «body»')
HOSTILE_ANCHOR = "el:button:pwn"
REGRESSION = "r-0061"


def _front(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text(encoding="utf-8").split("\n---", 1)[0].splitlines()[1:]:
        key, sep, value = line.partition(": ")
        if sep:
            out[key] = value.strip().strip('"')
    return out


def _learned(path: Path) -> bool:
    return "written_by" in _front(path)


@dataclass(frozen=True)
class Shop:
    root: Path
    hostile_id: str
    proposals: tuple[str, ...]


def build_shop(root: Path) -> Shop:
    """The example shop with its runs learned (see the module's docstring)."""
    from memidex.app import Memidex
    from memidex.store.layout import init_repository

    root.mkdir(parents=True)
    git(root, "init", "-q")
    shutil.copy(REPO_ROOT / "memidex.toml", root / "memidex.toml")
    shutil.copytree(REPO_ROOT / "policies", root / "policies")
    init_repository(root)
    src = REPO_ROOT / RECORDS
    taught = {(_front(p)["kind"], _front(p)["anchor"]) for p in src.rglob("*.md")
              if _learned(p)}
    for path in sorted(src.rglob("*.md")):
        f = _front(path)
        if not _learned(path) and (f["kind"], f["anchor"]) not in taught:
            dst = root / RECORDS / path.relative_to(src)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dst)
    with Memidex(root) as m:
        for run in sorted((REPO_ROOT / "examples/runs").glob("*.json")):
            m.ingest(run)
        hostile = m.add(kind="fact", anchors=[HOSTILE_ANCHOR, "page:/checkout"],
                        title=HOSTILE_TITLE, body=HOSTILE_BODY)
    # build v1.5.1 regressed to v1.4.3's checkout (r-0056's steps again); with no
    # rewrite allowed, its supersessions wait for a person
    with (root / "memidex.toml").open("a", encoding="utf-8") as f:
        f.write("\n[learning]\nmax_rewrites = 0\n")
    regression = json.loads((REPO_ROOT / "examples/runs/r-0056.json").read_text("utf-8"))
    regression.update(run_id=REGRESSION, build_tag="v1.5.1")
    run_file = root.parent / f"{REGRESSION}.json"
    run_file.write_text(json.dumps(regression), encoding="utf-8")
    with Memidex(root) as m:
        proposals = list(m.ingest(run_file).proposals)
    return Shop(root, hostile.id, tuple(proposals))


def cli_json(root: Path, *args: str) -> Any:
    out = run_cli(root, *args, "--json")
    assert out.returncode in (0, 1), f"memidex {' '.join(args)}: {out.stderr}"
    return json.loads(out.stdout)


class Server:
    """``memidex --root ROOT dashboard --port 0 ...`` in a subprocess, until stopped."""

    def __init__(self, root: Path, *args: str, env: dict[str, str] | None = None) -> None:
        base = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memidex", "--root", str(root), "dashboard", "--port", "0",
             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**base, "HOME": str(root), **(env or {})})
        self.lines: list[str] = []
        assert self.proc.stdout is not None
        lines: queue.Queue[str | None] = queue.Queue()
        stdout = self.proc.stdout

        def read() -> None:
            for line in stdout:
                lines.put(line.rstrip("\n"))
            lines.put(None)

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            if "Ctrl-C stops it" in line:
                break
        if not self.lines or not self.lines[0].startswith("memidex dashboard: "):
            err = self.stop()
            raise AssertionError(f"the dashboard did not start: {self.lines} {err}")
        self.url = self.lines[0].split(": ", 1)[1].split("?", 1)[0]
        parts = urlsplit(self.url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80

    def request(self, method: str, path: str, body: str | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
        """One HTTP request (redirects not followed): status, headers, body."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            hdrs = {"Host": f"{self.host}:{self.port}", **(headers or {})}
            if body is not None:
                hdrs.setdefault("Content-Type", "application/x-www-form-urlencoded")
            conn.request(method, path, body=body, headers=hdrs)
            resp = conn.getresponse()
            data = resp.read().decode("utf-8", "replace")
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        finally:
            conn.close()

    def stop(self) -> str:
        """Stop the server (SIGTERM, as Ctrl-C would) and return what it wrote on stderr."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        err = self.proc.stderr.read() if self.proc.stderr else ""
        self.reader.join(timeout=10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return err


# --- the shop itself ------------------------------------------------------------------


def test_the_shop_has_runs_proposals_and_a_hostile_record(tmp_path: Path) -> None:
    shop = build_shop(tmp_path / "shop")
    runs = cli_json(shop.root, "runs", "list")["runs"]
    assert [r["run_id"] for r in runs] == [f"r-00{n}" for n in range(51, 62)]
    listed = cli_json(shop.root, "knowledge", "proposals")["proposals"]
    assert len(listed) >= 2 and {p["id"] for p in listed} == set(shop.proposals)
    assert {p["run_id"] for p in listed} == {REGRESSION}
    shown = cli_json(shop.root, "knowledge", "show", shop.hostile_id)
    assert shown["title"] == HOSTILE_TITLE and "<svg onload" in shown["body"]
    causes = {t["cause"] for r in runs for t in
              cli_json(shop.root, "runs", "show", r["run_id"])["tests"]}
    assert {"flaky", "environment", "app-bug"} <= causes
