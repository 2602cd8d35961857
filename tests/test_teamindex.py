"""The team index (issue 23, docs/team-index.md): push and reads against a real PostgreSQL.

Every test gets a fresh database of one throw-away cluster (``conftest_pg.py``) and a
real git repository; nothing is mocked.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from conftest import git, make_record, write_record
from memidex.app import Memidex
from memidex.errors import ConfigError, IndexUnavailableError, UsageError
from memidex.records.codec import dump_record
from memidex.records.model import Relations, Trust, Valid
from memidex.search.ranking import SearchQuery
from memidex.teamindex import TeamIndex, push, reachable
from pgserver import PASSWORD, PASSWORD_ROLE, PgServer


def _commit(root: Path, message: str = "records") -> str:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message, "--allow-empty")
    return git(root, "rev-parse", "HEAD").strip()


def _seed(repo: Path) -> list[str]:
    """Three records and a policy, committed on main."""
    git(repo, "checkout", "-q", "-b", "main")
    records = [
        make_record(anchor="el:button:place-order", title="Place order stays disabled",
                    body="The Place order button is disabled until the terms are accepted.",
                    anchors=("page:/checkout", "test:checkout-happy-path"),
                    trust=Trust("local", 3, 0, 40), valid=Valid(30, None)),
        make_record(kind="caution", anchor="el:banner:cookie-consent",
                    title="Cookie banner covers the footer",
                    body="Dismiss the cookie banner before clicking in the footer.",
                    anchors=("page:/checkout",), trust=Trust("ci", 1, 0, 35)),
        make_record(anchor="el:input:card-number", product="shop-admin",
                    title="Card number field", body="Card numbers are masked."),
    ]
    for r in records:
        write_record(repo, r)
    (repo / "policies").mkdir(exist_ok=True)
    (repo / "policies" / "cards.yaml").write_text(
        'id: no-real-cards\nrule: "Only use the test card 4242"\n'
        'applies_to: {products: [shop-web], anchors: ["page:/checkout*"]}\nseverity: must\n',
        encoding="utf-8")
    _commit(repo, "seed")
    return [r.id for r in records]


def _dump(url: str) -> dict[str, list[tuple[object, ...]]]:
    """The logical contents of every branch's snapshot (no generation numbers)."""
    out: dict[str, list[tuple[object, ...]]] = {}
    with psycopg.connect(url) as c:
        out["snapshots"] = c.execute(
            "SELECT branch, commit, records, max_rowid, tokens FROM memidex.snapshots"
            " ORDER BY branch").fetchall()
        for table, cols in (
                ("records", "rowid, id, path, kind, status, product, anchor, title, body,"
                 " anchors, scope, source, confirmations, contradictions, last_confirmed,"
                 " valid_from, valid_until, history, sha256, ntokens, fts, tsv::text"),
                ("anchors", "anchor, rowid, main"), ("edges", "rowid, rel, dst, src"),
                ("history_versions", "rowid, version, id, title, valid_from, valid_until"),
                ("policies", "id, path, line, rule, severity, products, anchors"),
                ("problems", "path, line, reason"), ("terms", "term, ndocs")):
            order = ", ".join(str(i) for i in range(1, cols.count(",") + 3))
            out[table] = c.execute(
                f"SELECT s.branch, {cols} FROM memidex.{table} t JOIN memidex.snapshots s"
                f" ON s.gen = t.gen ORDER BY {order}").fetchall()
        out["orphans"] = c.execute(
            "SELECT count(*) FROM memidex.records WHERE gen NOT IN"
            " (SELECT gen FROM memidex.snapshots)").fetchall()
    return out


def test_first_push_loads_everything_and_answers_carry_the_commit(
        any_repo: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = any_repo  # (in a sub-folder of the repository too: git names paths from its top)
    ids = _seed(repo)
    head = git(repo, "rev-parse", "HEAD").strip()
    report = push(repo, pg_url)
    assert (report.action, report.branch, report.commit, report.records) == (
        "full", "main", head, 3)
    assert report.policies == 1 and report.problems == ()
    assert "postgresql://" in report.url
    with TeamIndex.connect(pg_url) as ti:
        snap = ti.snapshot()
        assert (snap.commit, snap.branch, snap.records) == (head, "main", 3)
        found = ti.search(SearchQuery("place order disabled", "shop-web"))
        assert found.commit == head
        assert [h.id for h in found.value] == [ids[0]]
        assert found.value[0].confidence == "reliable" and "«" in found.value[0].snippet
        # every search is scoped: the admin record is not in shop-web's answers
        assert ti.search(SearchQuery("card", "shop-web")).value == []
        assert [h.id for h in ti.search(SearchQuery("card", None)).value] == [ids[2]]
        listed = ti.list_records(product="shop-web", anchors=("page:/checkout*",))
        assert sorted(r.id for r in listed.value) == sorted(ids[:2])
        assert [r.id for r in ti.find_ids(ids[1][:12]).value] == [ids[1]]
        assert [p.id for p in ti.policies("shop-web").value] == ["no-real-cards"]
        assert ti.policies("shop-admin").value == []
    monkeypatch.setenv("MEMIDEX_INDEX_URL", pg_url)
    with Memidex(repo) as m:  # a record shown as the snapshot's commit has it
        shown = m.show(ids[1])
        assert shown.source == "team" and shown.warning == ""
        assert shown.text == (repo / shown.path).read_text(encoding="utf-8")


def test_push_reads_git_objects_not_the_work_tree(repo: Path, pg_url: str) -> None:
    ids = _seed(repo)
    # an uncommitted edit, an untracked record and a staged deletion are not HEAD
    path = repo / "agent-qa-knowledge/memory/records/fact" / f"{ids[0]}.md"
    path.write_text(path.read_text().replace("disabled", "greyed"), encoding="utf-8")
    write_record(repo, make_record(anchor="el:link:help", title="Help link"))
    git(repo, "rm", "-q", "--cached", str(path.relative_to(repo)))
    push(repo, pg_url)
    with TeamIndex.connect(pg_url) as ti:
        assert ti.snapshot().records == 3
        assert [h.id for h in ti.search(SearchQuery("disabled", "shop-web")).value] == [ids[0]]
        assert ti.search(SearchQuery("greyed", "shop-web")).value == []
        assert ti.search(SearchQuery("help", "shop-web")).value == []


def test_incremental_push_equals_a_full_load_and_repeats_change_nothing(
        any_repo: Path, pg_url: str, pg_server: PgServer) -> None:
    repo = any_repo
    ids = _seed(repo)
    push(repo, pg_url)
    base = "agent-qa-knowledge/memory/records"
    changed = make_record(anchor="el:button:place-order", title="Place order stays greyed",
                          body="Greyed until the terms box is ticked.",
                          anchors=("page:/checkout",), valid=Valid(45, None))
    write_record(repo, changed)  # same id, new content
    (repo / base / "caution" / f"{ids[1]}.md").unlink()
    write_record(repo, make_record(anchor="el:link:help", title="Help link opens a modal"))
    (repo / base / "fact" / "broken.md").write_text("not a record\n", encoding="utf-8")
    (repo / "policies" / "cards.yaml").write_text("id: no-real-cards\nrule: Test cards only\n",
                                                  encoding="utf-8")
    head = _commit(repo, "edit, delete, add, break")
    report = push(repo, pg_url)
    assert report.action == "incremental"
    assert (report.added, report.changed, report.deleted) == (2, 1, 1)
    assert [p.path for p in report.problems] == [f"{base}/fact/broken.md"]
    incremental = _dump(pg_url)
    assert push(repo, pg_url).action == "unchanged"
    assert _dump(pg_url) == incremental  # a second push of the same commit changes nothing
    # the same commit loaded from scratch gives the same rows (rowids aside: the refresh
    # numbers changed files after the others, as the local index does)
    pg_server.psql("CREATE DATABASE fresh TEMPLATE memidex", database="postgres")
    try:
        fresh_url = pg_server.url(database="fresh")
        assert push(repo, fresh_url).action == "full"
        full = _dump(fresh_url)
    finally:
        pg_server.psql("DROP DATABASE fresh WITH (FORCE)", database="postgres")

    def without_rowids(d: dict[str, list[tuple[object, ...]]]) -> dict[str, object]:
        by_rowid = {r[1]: r[3] for r in d["records"]}  # rowid -> path
        out: dict[str, object] = {}
        for table, rows in d.items():
            if table == "snapshots":
                out[table] = [r[:3] + r[4:] for r in rows]
            elif table in ("records", "anchors", "edges", "history_versions"):
                col = 1 if table != "anchors" else 2
                out[table] = sorted(
                    tuple(by_rowid[v] if i == col else v for i, v in enumerate(r))
                    for r in rows)
            else:
                out[table] = rows
        return out

    assert without_rowids(incremental) == without_rowids(full)
    assert incremental["snapshots"][0][1] == head
    with TeamIndex.connect(pg_url) as ti:
        assert [h.id for h in ti.search(SearchQuery("greyed", "shop-web")).value] == [ids[0]]
        assert ti.search(SearchQuery("cookie", "shop-web")).value == []
        assert [p.rule for p in ti.policies().value] == ["Test cards only"]


def test_force_push_and_another_branch_rebuild_that_branch_only(repo: Path, pg_url: str
                                                                ) -> None:
    ids = _seed(repo)
    push(repo, pg_url)
    git(repo, "checkout", "-q", "-b", "feature")
    write_record(repo, make_record(anchor="el:link:help", title="Help link"))
    _commit(repo, "feature work")
    assert push(repo, pg_url).action == "full"  # a second branch, a second snapshot
    git(repo, "checkout", "-q", "main")
    (repo / "agent-qa-knowledge/memory/records/fact" / f"{ids[0]}.md").unlink()
    rewritten = _commit(repo, "main, rewritten")
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    git(repo, "commit", "-q", "--amend", "-m", "main, amended")  # not a descendant
    amended = git(repo, "rev-parse", "HEAD").strip()
    assert amended != rewritten
    report = push(repo, pg_url)
    assert (report.action, report.commit) == ("rebuilt", amended)
    with TeamIndex.connect(pg_url) as ti, pytest.raises(UsageError, match="several branches"):
        ti.snapshot()
    with TeamIndex.connect(pg_url, branch="main") as main, \
            TeamIndex.connect(pg_url, branch="feature") as feature:
        assert main.snapshot().records == 3 and feature.snapshot().records == 4
        assert main.search(SearchQuery("help", "shop-web")).value == []
        assert len(feature.search(SearchQuery("help", "shop-web")).value) == 1
    with psycopg.connect(pg_url) as c:  # the replaced generation is gone
        assert c.execute("SELECT count(DISTINCT gen) FROM memidex.records").fetchone() == (2,)


def test_a_late_push_of_an_older_commit_is_behind(repo: Path, pg_url: str) -> None:
    _seed(repo)
    old = git(repo, "rev-parse", "HEAD").strip()
    write_record(repo, make_record(anchor="el:link:help", title="Help link"))
    new = _commit(repo)
    push(repo, pg_url)
    git(repo, "branch", "-f", "ci", old)
    git(repo, "branch", "-f", "main-copy", new)
    git(repo, "update-ref", "refs/heads/main", old)  # as a CI job that checked out earlier
    report = push(repo, pg_url, branch="main")
    assert report.action == "behind" and report.notes
    with TeamIndex.connect(pg_url) as ti:
        assert ti.snapshot().commit == new
    assert push(repo, pg_url, branch="main", rewind=True).action == "rebuilt"
    with TeamIndex.connect(pg_url) as ti:
        assert ti.snapshot().commit == old and ti.snapshot().records == 3


def test_run_store_anchors_and_ordinals_are_merged(repo: Path, pg_url: str) -> None:
    from memidex.config import load_config
    from memidex.learning.fold import TestState
    from memidex.runstate.tests import TestsFile
    from memidex.store.state import DIRECT

    _seed(repo)
    config = load_config(repo)
    TestsFile(config, "shop-web").save(DIRECT, {
        "checkout-happy-path": TestState(anchors={"page:/checkout", "el:button:place-order"})},
        ordinal=0)
    ordinals = config.state_path / "build-ordinals.json"
    ordinals.write_text(json.dumps({"products": {"shop-web": {"next": 42}}}), encoding="utf-8")
    assert push(repo, pg_url).test_anchors == 2
    # another machine (no run store) pushes: nothing is lost; a third adds an anchor
    TestsFile(config, "shop-web").save(DIRECT, {
        "checkout-happy-path": TestState(anchors={"flow:checkout"})}, ordinal=0)
    ordinals.write_text(json.dumps({"products": {"shop-web": {"next": 7}}}), encoding="utf-8")
    assert push(repo, pg_url).test_anchors == 1
    with TeamIndex.connect(pg_url) as ti:
        assert ti.test_anchors("shop-web", "checkout-happy-path").value == (
            "el:button:place-order", "flow:checkout", "page:/checkout")
        with ti.session() as s:
            assert s.next_ordinal("shop-web") == 42
            assert s.max_ordinal("shop-web") == 40
            assert s.known_product("shop-admin") and not s.known_product("nope")


def test_bad_url_wrong_credentials_and_no_server_are_one_memidex_error(
        repo: Path, pg_server: PgServer, tmp_path: Path) -> None:
    _seed(repo)
    with pytest.raises(ConfigError, match="not a PostgreSQL URL"):
        push(repo, "mysql://x@y/z")
    with pytest.raises(ConfigError, match="cannot be read"):
        TeamIndex.connect("postgresql://[bad")
    wrong = pg_server.url(PASSWORD_ROLE, "wrong-password")
    with pytest.raises(ConfigError, match="refused the credentials") as err:
        push(repo, wrong)
    assert "wrong-password" not in str(err.value) and "***" in str(err.value)
    nowhere = f"postgresql://postgres@/memidex?host={tmp_path}&port=5999"
    with pytest.raises(IndexUnavailableError, match="cannot be reached"):
        TeamIndex.connect(nowhere, timeout=2)
    assert not reachable(nowhere, timeout=1) and not reachable(wrong)
    assert reachable(pg_server.url(PASSWORD_ROLE, PASSWORD))
    # a database that was never pushed: unavailable, with the command to run
    with TeamIndex.connect(pg_server.url(database="postgres")) as ti, \
            pytest.raises(IndexUnavailableError, match="holds nothing yet"):
        ti.snapshot()


def test_cli_push_prints_one_error_line_and_a_json_report(repo: Path, pg_url: str,
                                                          pg_server: PgServer) -> None:
    """The typer command, registered as the lead will (one add_typer line), run by
    memidex's own entry point and its one error handler."""
    _seed(repo)
    code = ("import sys; from memidex.cli.commands import app; "
            "from memidex.cli.teamindex import index; app.add_typer(index, name='index'); "
            "from memidex.cli.main import main; sys.exit(main(sys.argv[1:]))")
    ok = subprocess.run([sys.executable, "-c", code, "--root", str(repo), "index", "push",
                         "--url", pg_url, "--json"], capture_output=True, text=True,
                        check=False)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["action"] == "full"
    bad = subprocess.run([sys.executable, "-c", code, "--root", str(repo), "index", "push",
                          "--url", pg_server.url(PASSWORD_ROLE, "nope")],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 4
    lines = bad.stderr.strip().splitlines()
    assert lines[0].startswith("error: the team index at") and "Traceback" not in bad.stderr
    assert "nope" not in bad.stderr


def test_records_with_history_relations_and_duplicates_read_as_locally(repo: Path,
                                                                       pg_url: str) -> None:
    from memidex.records.model import HistoryEntry

    git(repo, "checkout", "-q", "-b", "main")
    old = make_record(anchor="el:toast:saved", title="Saved toast shows")
    cited = make_record(anchor="el:toast:error", title="Error toast")
    r = make_record(anchor="el:toast:saved", title="Saved toast shows for 3 s",
                    valid=Valid(10, None))
    from dataclasses import replace

    r = replace(r, history=(HistoryEntry(Valid(2, 10), old.title, "It showed."),),
                relations=Relations(cites=(cited.id,)))
    write_record(repo, r)
    write_record(repo, cited)
    dup = repo / "agent-qa-knowledge/memory/records/fact/copy.md"
    dup.write_text(dump_record(cited), encoding="utf-8")
    _commit(repo)
    push(repo, pg_url)
    with TeamIndex.connect(pg_url) as ti, ti.session() as s:
        at5 = s.versions_at(5, "shop-web")
        assert [(v.id, v.version, v.current, v.title) for v in at5 if v.id == r.id] == [
            (r.id, 1, False, old.title)]
        assert len([v for v in s.versions_at(12, "shop-web") if v.id == cited.id]) == 2
        rowid = {v.id: v.record_rowid for v in s.versions_at(12, "shop-web")}[r.id]
        assert s.citations([rowid])
        assert len(s.find_ids(cited.id)) == 2


def test_importing_the_package_does_not_import_psycopg() -> None:
    out = subprocess.run([sys.executable, "-c", "import sys, memidex.teamindex as t; "
                          "t.__all__; print('psycopg' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
