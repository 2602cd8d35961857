"""Hardening, round two (issue 19), the attacks scripted again on fresh repositories
(`memidex init`, real processes): a process whose clock is faked by libfaketime cannot
take a live daemon's lease; unknown products are usage errors; policies reach a test on a
fresh clone; the review's wording; the messages.

`faketime` (Debian's package, installed by `make deps`) fakes the wall clock AND the
monotonic clock of the process it runs: the attack of a process whose clock is ahead.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import git

MEMIDEX = [sys.executable, "-m", "memidex"]


def _fresh(tmp: Path, product: str = "shop") -> Path:
    root = tmp / "repo"
    root.mkdir()
    git(root, "init", "-q")
    out = subprocess.run([*MEMIDEX, "--root", str(root), "init", "-p", product],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return root


def _faketime() -> str:
    path = shutil.which("faketime")
    assert path is not None, "faketime is missing: `make deps` (as root: apt-get install faketime)"
    return path


def _authority_holder(root: Path) -> tuple[int, int | None]:
    import sqlite3

    db = root / "agent-qa-knowledge/memory/.writer-authority.sqlite"
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        epoch, pid = conn.execute("SELECT epoch, pid FROM lease WHERE id = 1").fetchone()
    finally:
        conn.close()
    return int(epoch), pid


class _Daemon:
    def __init__(self, root: Path, *prefix: str) -> None:
        self.proc = subprocess.Popen([*prefix, *MEMIDEX, "--root", str(root), "daemon"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr is not None
        # event-based: the daemon says so once it holds the lease (no sleep, no bound)
        for line in self.proc.stderr:
            if "holds the writer lease" in line:
                break
        else:
            raise AssertionError(f"the daemon stopped before it held the lease: {self.stop()}")

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=120)
        return err


# --- item 1: a clock 60 s ahead (wall AND monotonic, libfaketime) takes no live lease --------


@pytest.mark.parametrize("fake_monotonic", [True, False], ids=["mono-faked", "wall-only"])
def test_faketime_rebuild_index_refuses_under_a_live_daemon(
        tmp_path: Path, fake_monotonic: bool) -> None:
    root = _fresh(tmp_path)
    env = dict(os.environ)
    if not fake_monotonic:
        env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
    daemon = _Daemon(root)
    try:
        epoch, pid = _authority_holder(root)
        assert pid == daemon.proc.pid
        out = subprocess.run([_faketime(), "-f", "+60s", *MEMIDEX, "--root", str(root),
                              "knowledge", "rebuild-index"],
                             capture_output=True, text=True, timeout=120, env=env)
        assert out.returncode == 3, (out.stdout, out.stderr)
        assert f"writer lease is held by pid {daemon.proc.pid}" in out.stderr
        assert _authority_holder(root) == (epoch, daemon.proc.pid)  # never taken over
        assert daemon.proc.poll() is None
    finally:
        err = daemon.stop()
    assert daemon.proc.returncode == 0, err


def test_faketime_write_goes_through_the_live_daemon(tmp_path: Path) -> None:
    # a record-writing command whose clock is ahead sees the daemon live and hands its
    # change to it (it neither takes the lease nor waits it out)
    root = _fresh(tmp_path)
    daemon = _Daemon(root)
    try:
        epoch, _ = _authority_holder(root)
        out = subprocess.run([_faketime(), "-f", "+60s", *MEMIDEX, "--root", str(root),
                              "knowledge", "add", "--kind", "fact", "--anchor", "el:button:pay",
                              "--title", "Pay is shown", "--body", "The Pay button shows.",
                              "--wait", "60", "--json"],
                             capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stderr
        assert _authority_holder(root) == (epoch, daemon.proc.pid)
        assert list((root / "agent-qa-knowledge/memory/records").rglob("*.md"))
    finally:
        err = daemon.stop()
    assert daemon.proc.returncode == 0, err
    assert json.loads(out.stdout)


def test_each_clock_alone_keeps_a_live_holder_fresh() -> None:
    from memidex.write.authority import Holder
    from memidex.write.procs import boot_id, current_process

    me = current_process()
    holder = Holder(7, "t", me.pid, me.start, me.boot_id, me.host, heartbeat=1000.0, ttl=30.0,
                    heartbeat_mono=500.0, heartbeat_kernel=600.0)
    assert me.boot_id == boot_id() != ""
    # wall clock 60 s ahead, monotonic faked too (libfaketime): the kernel's clock is fresh
    assert holder.free_reason(1060.0, 30.0, mono=1e9, kernel=610.0) is None
    # a suspended machine: the kernel's count went on, the monotonic clock did not
    assert holder.free_reason(1060.0, 30.0, mono=510.0, kernel=700.0) is None
    # every clock says stale: stale
    assert holder.free_reason(1060.0, 30.0, mono=560.0, kernel=660.0) == "stale heartbeat"
    # a beat ahead of the caller's clock (the holder's clock was faked) is no evidence
    assert holder.free_reason(1060.0, 30.0, mono=100.0, kernel=100.0) == "stale heartbeat"
    # no clock of the holder's at all (an earlier memidex): the wall clock decides
    bare = Holder(7, "t", me.pid, me.start, me.boot_id, me.host, 1000.0, 30.0)
    assert bare.free_reason(1060.0, 30.0, mono=510.0, kernel=610.0) == "stale heartbeat"


def test_an_authority_db_without_the_kernel_column_gains_it(tmp_path: Path) -> None:
    import sqlite3

    root = _fresh(tmp_path)
    db = root / "agent-qa-knowledge/memory/.writer-authority.sqlite"
    assert db.exists()
    conn = sqlite3.connect(db)
    conn.execute("ALTER TABLE lease DROP COLUMN heartbeat_kernel")
    conn.commit()
    conn.close()
    daemon = _Daemon(root)
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        kernel = conn.execute("SELECT heartbeat_kernel FROM lease").fetchone()[0]
        conn.close()
        assert isinstance(kernel, float) and kernel > 0
    finally:
        err = daemon.stop()
    assert daemon.proc.returncode == 0, err


# --- item 23: the run file's product, unknown products ---------------------------------------

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _cli(root: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MEMIDEX, "--root", str(root), *args], capture_output=True,
                          text=True, timeout=timeout)


def test_ingest_with_another_product_than_the_files_is_a_usage_error(tmp_path: Path) -> None:
    root = _fresh(tmp_path)
    out = _cli(root, "runs", "ingest", str(EXAMPLES / "runs/r-0051.json"), "--product", "other")
    assert out.returncode == 2, out.stderr
    assert "is a run of product 'shop-web', not --product 'other'" in out.stderr
    assert not (root / ".agent-qa/runs").exists() or \
        not list((root / ".agent-qa/runs").iterdir())
    assert not list((root / "agent-qa-knowledge/memory/records").rglob("*.md"))
    # without --product it lands in the file's product, and says so
    out = _cli(root, "runs", "ingest", str(EXAMPLES / "runs/r-0051.json"))
    assert out.returncode == 0, out.stderr
    assert "is a run of product 'shop-web', not memidex.toml's 'shop'" in out.stdout + out.stderr


@pytest.mark.parametrize("command", [
    ("knowledge", "search", "checkout"), ("knowledge", "list"), ("runs", "list"),
    ("knowledge", "search", "checkout", "--strategy", "hybrid")])
def test_an_unknown_product_is_a_usage_error(tmp_path: Path, command: tuple[str, ...]) -> None:
    root = _fresh(tmp_path)
    assert _cli(root, "runs", "ingest", str(EXAMPLES / "runs/r-0051.json")).returncode == 0
    out = _cli(root, *command, "--product", "shopweb")
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("error:")]
    assert lines == ["error: unknown product 'shopweb': no records, runs or policies name it"]
    assert "known products: shop, shop-web" in out.stderr
    assert "Traceback" not in out.stderr
    # the known ones answer, empty or not: the configured product, a run's product
    for product in ("shop", "shop-web"):
        assert _cli(root, *command, "--product", product).returncode == 0


def test_an_unknown_product_over_mcp_is_an_error(tmp_path: Path) -> None:
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    root = _fresh(tmp_path)
    errors: dict[str, dict[str, object]] = {}

    async def main() -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
        params = StdioServerParameters(command=sys.executable,
                                       args=["-m", "memidex", "--root", str(root), "mcp"],
                                       env=env, cwd=str(root))
        with open(tmp_path / "mcp.err", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                for tool, args in (("knowledge_search", {"query": "checkout"}),
                                   ("knowledge_list", {}), ("runs_list", {})):
                    res = await session.call_tool(tool, {**args, "product": "shopweb"})
                    assert res.is_error, (tool, res.content)
                    errors[tool] = json.loads(res.content[-1].text)["error"]  # type: ignore[union-attr]
                    res = await session.call_tool(tool, {**args, "product": "shop"})
                    assert not res.is_error, (tool, res.content)

    anyio.run(main)
    assert set(errors) == {"knowledge_search", "knowledge_list", "runs_list"}
    for tool, err in errors.items():
        assert err["message"] == ("unknown product 'shopweb': no records, runs or "
                                  "policies name it"), tool
        assert err["hint"] == "known products: shop", tool
        assert err["exit_code"] == 2, tool


# --- item 25: the policies on a fresh clone ---------------------------------------------------

REPO = Path(__file__).resolve().parent.parent


def _clone_of_the_bundled_knowledge(tmp: Path) -> Path:
    origin = tmp / "origin"
    origin.mkdir()
    git(origin, "init", "-q")
    for name in ("agent-qa-knowledge", "policies"):
        shutil.copytree(REPO / name, origin / name,
                        ignore=shutil.ignore_patterns("index", ".*", "queue", "staging"))
    shutil.copy2(REPO / "memidex.toml", origin / "memidex.toml")
    shutil.copy2(REPO / ".gitignore", origin / ".gitignore")
    git(origin, "add", "-A")
    git(origin, "-c", "user.name=t", "-c", "user.email=t@example.test", "commit", "-qm", "k")
    clone = tmp / "clone"
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True, timeout=120)
    assert not (clone / ".agent-qa").exists()
    return clone


@pytest.mark.parametrize("index", [True, False], ids=["indexed", "no-index"])
def test_a_fresh_clone_serves_the_policies_the_committed_records_imply(
        tmp_path: Path, index: bool) -> None:
    clone = _clone_of_the_bundled_knowledge(tmp_path)
    if index:
        assert _cli(clone, "knowledge", "rebuild-index").returncode == 0
    out = _cli(clone, "brief", "checkout-happy-path", "--json")
    assert out.returncode == 0, out.stderr
    brief = json.loads(out.stdout)
    ids = [p["id"] for p in brief["policies"]]
    # the committed procedure for checkout-happy-path names page:/checkout and
    # el:input:card-number: no-real-cards (a must) applies; so does mail-sink-only
    assert "no-real-cards" in ids and "mail-sink-only" in ids, ids
    assert not (clone / ".agent-qa/runs").exists()  # no run store was needed
    # a test no committed record carries gets only the product-wide policies
    other = json.loads(_cli(clone, "brief", "some-new-test", "--json").stdout)
    assert [p["id"] for p in other["policies"]] == ["keep-seeded-catalogue"]


def test_a_quarantined_record_lends_the_test_no_anchors(tmp_path: Path) -> None:
    root = _fresh(tmp_path, product="shop-web")
    (root / "policies/cards.yaml").write_text(
        "id: cards\nrule: Only the sandbox card.\napplies_to:\n  products: [shop-web]\n"
        "  anchors: ['page:/pay*']\nseverity: must\n", encoding="utf-8")
    out = _cli(root, "knowledge", "add", "--kind", "procedure", "--anchor", "flow:pay",
               "--anchor", "page:/pay", "--anchor", "test:pay-test", "--title", "Pay",
               "--body", "Pay with the sandbox card.", "--json")
    assert out.returncode == 0, out.stderr
    rid = json.loads(out.stdout)["id"]

    def policies() -> list[str]:
        got = _cli(root, "brief", "pay-test", "--json")
        assert got.returncode == 0, got.stderr
        return [p["id"] for p in json.loads(got.stdout)["policies"]]

    assert policies() == ["cards"]
    out = _cli(root, "knowledge", "quarantine", rid)
    assert out.returncode == 0, out.stderr
    assert policies() == []


# --- item 28: the review's words --------------------------------------------------------------


def _commit(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@example.test", "commit", "-qm", message)
    return git(root, "rev-parse", "HEAD").strip()


def _review(root: Path, base: str) -> dict[str, dict[str, object]]:
    out = _cli(root, "knowledge", "review", base, "--json")
    assert out.returncode in (0, 1), out.stderr
    assert "Traceback" not in out.stderr
    products = json.loads(out.stdout)["products"]
    return {str(c["path"]): c for by_verb in products.values() for cs in by_verb.values()
            for c in cs}


def test_review_names_a_malformed_record_a_misplaced_copy_and_a_run_on_a_persons_record(
        tmp_path: Path) -> None:
    root = _fresh(tmp_path, product="shop-web")
    records = root / "agent-qa-knowledge/memory/records"

    def ingest(run_id: str) -> None:
        run = {"run_id": run_id, "product": "shop-web", "tests": [{
            "test_id": "login", "verdict": "pass", "steps": [{
                "index": 0, "action": "goto", "target": "page:/login",
                "anchors": ["page:/login"], "observed": "Page /login is visible",
                "check": {"kind": "assert-visible", "passed": True}}]}]}
        (tmp_path / f"{run_id}.json").write_text(json.dumps(run), encoding="utf-8")
        out = _cli(root, "runs", "ingest", str(tmp_path / f"{run_id}.json"), "--json")
        assert out.returncode == 0, out.stderr

    ingest("r-0001")
    # a person takes the learned fact over (its source human), then a run confirms it
    fact = next(records.glob("fact/fact-page-login-*.md"))
    human = str(fact.relative_to(root))
    text = fact.read_text(encoding="utf-8")
    assert "source: local" in text
    fact.write_text(text.replace("source: local", "source: human"), encoding="utf-8")
    base = _commit(root, "a person's fact")
    ingest("r-0002")
    changes = _review(root, base)
    assert human in changes, (human, list(changes))
    assert any("written by a person, changed by run r-0002" in a
               for a in changes[human]["attention"]), changes[human]  # type: ignore[union-attr]

    # a malformed record: changed and failing validation, never "purged"
    base = _commit(root, "ingested")
    victim = next(records.glob("procedure/*.md"))
    victim_rel = str(victim.relative_to(root))
    victim.write_text("---\nid: [unclosed\n---\n", encoding="utf-8")
    # a misplaced copy of the person's record (a duplicate id under another name)
    copy = records / "fact/fact-page-login-copy.md"
    copy.write_bytes((root / human).read_bytes())
    changes = _review(root, base)
    bad = changes[victim_rel]
    assert bad["verb"] == "changed", bad
    attention = " | ".join(bad["attention"])  # type: ignore[arg-type]
    assert "purged" not in attention and "fails validation" in attention, attention
    dup = changes[str(copy.relative_to(root))]
    assert dup["verb"] == "added"
    assert any(a.startswith("fails validation: a fact record with id ") and
               a.endswith(f"belongs at {human}")
               for a in dup["attention"]), dup  # type: ignore[union-attr]


def test_review_says_a_candidate_record_purged(tmp_path: Path) -> None:
    from conftest import make_record
    from memidex.records.model import Record
    from memidex.review.changes import classify

    rec: Record = make_record(status="candidate")
    change = classify("x.md", rec, None)
    assert change.verb == "purged" and change.attention == ["a candidate record purged"]
    change = classify("x.md", make_record(status="active"), None)
    assert change.attention == ["an active record purged"]
