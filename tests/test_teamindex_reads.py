"""Reading commands answered by the team index (docs/team-index.md, "Reading from it").

A "CI" repository holds the example knowledge and a run learned from it; it pushes to a
real PostgreSQL (``conftest_pg.py``). A fresh clone with ``MEMIDEX_INDEX_URL`` set then
answers ``knowledge search``, ``brief``, ``knowledge show`` and ``knowledge list`` — the
real CLI in a subprocess, and the library API — from the team index, naming the pushed
commit, with the same ids as a local index of the same commit. A server that stops, a
snapshot behind the clone's branch, a commit the clone has not fetched, several branches
and a vector strategy each fall back to the local index with one warning. Nothing is
mocked.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO_ROOT, git, make_record, write_record
from memidex.app import Memidex
from memidex.errors import UsageError
from memidex.teamindex import push
from pgserver import PASSWORD, PASSWORD_ROLE, PgServer, started

SCHEMAS = REPO_ROOT / "docs/schemas"
RECORDS = "agent-qa-knowledge/memory/records"


def cli(root: Path, *args: str, url: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real ``memidex`` in a subprocess, ``MEMIDEX_INDEX_URL`` set to ``url``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
    if url is not None:
        env["MEMIDEX_INDEX_URL"] = url
    return subprocess.run([sys.executable, "-m", "memidex", "--root", str(root), *args],
                          cwd=root, capture_output=True, text=True, env=env, check=False)


def doc(root: Path, *args: str, url: str | None = None, schema: str | None = None,
        warnings: int = 0) -> dict[str, Any]:
    """The command's JSON object (valid against its schema), asserting how many
    ``warning:`` lines it printed on stderr."""
    import jsonschema

    out = cli(root, *args, "--json", url=url)
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.startswith("warning:")]
    assert len(lines) == warnings, out.stderr
    assert "Traceback" not in out.stderr
    data: dict[str, Any] = json.loads(out.stdout)
    if schema is not None:
        spec = json.loads((SCHEMAS / f"{schema}.schema.json").read_text(encoding="utf-8"))
        jsonschema.validate(data, spec, cls=jsonschema.Draft202012Validator)
    if warnings:
        data["_warning"] = lines[0]
    return data


def head(root: Path) -> str:
    return git(root, "rev-parse", "HEAD").strip()


def clone(origin: Path, dest: Path) -> Path:
    subprocess.run(["git", "clone", "-q", "-b", "main", str(origin), str(dest)], check=True,
                   capture_output=True)
    return dest


def commit(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return head(root)


@pytest.fixture(scope="module")
def ci_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example knowledge on ``main``, after CI learned run r-0051 (so the run store —
    the test's anchors, the run counter — is on this machine only)."""
    root = tmp_path_factory.mktemp("ci") / "shop"
    root.mkdir()
    for name in (RECORDS, "policies"):
        shutil.copytree(REPO_ROOT / name, root / name)
    shutil.copy(REPO_ROOT / "memidex.toml", root / "memidex.toml")
    (root / ".gitignore").write_text(".agent-qa/\nagent-qa-knowledge/memory/index/\n"
                                     "agent-qa-knowledge/memory/queue/\n", encoding="utf-8")
    git(root, "init", "-q", "-b", "main")
    commit(root, "examples")
    out = cli(root, "runs", "ingest", str(REPO_ROOT / "examples/runs/r-0051.json"))
    assert out.returncode == 0, out.stderr
    commit(root, "what r-0051 taught")
    return root


@pytest.fixture(scope="module")
def team_url(pg_server: PgServer, ci_repo: Path) -> Iterator[str]:
    """A database CI pushed ``ci_repo``'s main to, with ``memidex index push``."""
    pg_server.psql("CREATE DATABASE reads TEMPLATE memidex", database="postgres")
    url = pg_server.url(database="reads")
    pushed = doc(ci_repo, "index", "push", url=url, schema="index-push")
    assert pushed["action"] == "full" and pushed["commit"] == head(ci_repo)
    assert pushed["test_anchors"] > 0  # the run store went with it
    yield url
    pg_server.psql("DROP DATABASE reads WITH (FORCE)", database="postgres")


def ids(answer: dict[str, Any]) -> list[str]:
    return [r["id"] for r in answer.get("results", answer.get("records", []))]


def test_a_fresh_clone_answers_from_the_team_index_naming_its_commit(
        ci_repo: Path, team_url: str, tmp_path: Path) -> None:
    fresh = clone(ci_repo, tmp_path / "fresh")
    pushed = head(ci_repo)
    # a fresh clone has no local index: the team index answers at once
    team = doc(fresh, "knowledge", "search", "cookie banner", url=team_url, schema="search")
    assert (team["source"], team["commit"], team["level"]) == ("team", pushed, "lexical-only")
    assert not (fresh / "agent-qa-knowledge/memory/index/memidex.sqlite").exists()
    assert cli(fresh, "knowledge", "rebuild-index").returncode == 0  # to compare with
    for words in ("place order disabled", "cookie banner", "checkout", "terms"):
        team = doc(fresh, "knowledge", "search", words, url=team_url, schema="search")
        local = doc(fresh, "knowledge", "search", words, schema="search")
        assert (team["source"], team["commit"]) == ("team", pushed)
        assert (local["source"], local["commit"], local["level"]) == (
            "local", pushed, "lexical-only")
        assert ids(team) and ids(team) == ids(local), words
        assert [r["score"] for r in team["results"]] == [r["score"] for r in local["results"]]
    # the brief ranks the test's anchors from CI's run store, which this clone lacks: it
    # is the brief CI's own local index gives
    team = doc(fresh, "brief", "checkout-happy-path", "--no-record", url=team_url,
               schema="brief")
    ci = doc(ci_repo, "brief", "checkout-happy-path", "--no-record", schema="brief")
    bare = doc(fresh, "brief", "checkout-happy-path", "--no-record", schema="brief")
    assert (team["source"], team["commit"], ci["source"]) == ("team", pushed, "local")
    assert ids(team) and ids(team) == ids(ci)
    assert team["anchors"] == ci["anchors"] and team["ordinal"] == ci["ordinal"]
    assert len(bare["anchors"]["test"]) < len(team["anchors"]["test"])
    # show and list: the same records, from the snapshot's commit
    rid = ids(team)[0]
    shown = doc(fresh, "knowledge", "show", rid, url=team_url, schema="show")
    here = doc(fresh, "knowledge", "show", rid, schema="show")
    assert (shown.pop("source"), shown.pop("commit")) == ("team", pushed)
    assert (here.pop("source"), here.pop("commit")) == ("local", pushed)
    assert shown == here
    listed = doc(fresh, "knowledge", "list", "--kind", "caution", url=team_url, schema="list")
    assert listed["source"] == "team" and listed["count"] > 0
    assert listed["records"] == doc(fresh, "knowledge", "list", "--kind", "caution")["records"]
    # the human output says it too
    out = cli(fresh, "knowledge", "search", "cookie banner", url=team_url)
    assert f"from the team index at {pushed[:12]}" in out.stdout and not out.stderr


def test_the_library_api_reads_the_team_index_and_keeps_its_snapshot(
        ci_repo: Path, team_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
        ) -> None:
    fresh = clone(ci_repo, tmp_path / "fresh")
    monkeypatch.setenv("MEMIDEX_INDEX_URL", team_url)
    with Memidex(fresh) as m:
        found = m.search("place order")
        assert (found.source, found.commit, found.warning) == ("team", head(ci_repo), "")
        assert m.team.snapshot is not None and m.team.snapshot.commit == found.commit
        assert m.list_records(kinds=["fact"]).source == "team"
        assert m.show(found.results[0].id).source == "team"
        assert m.brief("checkout-happy-path", record=False).source == "team"
        # a question the team index answers with an error is that error, not a fallback
        for bad in ({"at": 10**6}, {"product": "no-such-product"}):
            with pytest.raises(UsageError):
                m.brief("checkout-happy-path", record=False, **bad)  # type: ignore[arg-type]
            assert m.team.last_warning == ""
        lexical = m.team.search("place order", strategy="lexical")
        assert lexical.source == "team" and lexical.results == found.results
        # the team index holds no vectors: a vector or hybrid search is the local index's
        for strategy in ("vector", "hybrid"):
            assert m.team.declines(strategy)
            other = m.team.search("place order", strategy=strategy)
            assert other.source == "local" and f"strategy {strategy}" in other.warning
            assert f"strategy {strategy}" in other.to_json()["note"]


def test_a_snapshot_behind_this_clone_falls_back_and_one_it_lacks_answers(
        ci_repo: Path, pg_url: str, tmp_path: Path) -> None:
    origin = clone(ci_repo, tmp_path / "origin")
    push(origin, pg_url)
    pushed = head(origin)
    mine = clone(origin, tmp_path / "mine")
    # a commit of main here that the team index lacks: behind, so the local index
    new = make_record(anchor="el:button:gift-wrap", title="Gift wrap toggle hides the note")
    write_record(mine, new)
    local_head = commit(mine, "a record CI has not pushed")
    found = doc(mine, "knowledge", "search", "gift wrap", url=pg_url, warnings=1,
                schema="search")
    assert (found["source"], found["commit"]) == ("local", local_head)
    assert ids(found) == [new.id]
    assert "behind this clone's main" in found["_warning"] and pushed[:12] in found["_warning"]
    assert "local index" in found["_warning"] and "behind" in found["note"]
    briefed = doc(mine, "brief", "checkout-happy-path", "--no-record", url=pg_url,
                  warnings=1, schema="brief")
    assert briefed["source"] == "local" and "behind" in briefed["notes"][-1]
    # CI pushes a newer commit this clone has not fetched: the team index answers
    other = make_record(anchor="el:link:returns", title="Returns link opens a modal")
    write_record(origin, other)
    newer = commit(origin, "returns")
    push(origin, pg_url)
    git(mine, "reset", "-q", "--hard", "HEAD~1")
    found = doc(mine, "knowledge", "search", "returns link modal", url=pg_url,
                schema="search")
    assert (found["source"], found["commit"], ids(found)[:1]) == ("team", newer, [other.id])
    # ... but its file is not in this clone until it is fetched
    out = cli(mine, "knowledge", "show", other.id, url=pg_url)
    assert out.returncode == 2 and "has not fetched" in out.stderr
    assert out.stderr.count("error:") == 1 and "git fetch origin main" in out.stderr
    git(mine, "fetch", "-q", "origin")
    shown = doc(mine, "knowledge", "show", other.id, url=pg_url, schema="show")
    assert (shown["source"], shown["commit"], shown["title"]) == ("team", newer, other.title)
    # an id the snapshot does not have, but this clone does (an uncommitted record)
    mine_only = make_record(anchor="el:input:gift-card-pin", title="Gift card PIN field")
    write_record(mine, mine_only)
    shown = doc(mine, "knowledge", "show", mine_only.id, url=pg_url, warnings=1,
                schema="show")
    assert shown["source"] == "local" and "no record with id" in shown["note"]


@pytest.fixture(scope="module")
def own_pg() -> Iterator[PgServer]:
    """A cluster of this module's own, which a test stops and starts again."""
    server = started()
    try:
        yield server
    finally:
        server.remove()


def test_a_stopped_server_falls_back_with_one_warning_then_answers_again(
        ci_repo: Path, own_pg: PgServer, tmp_path: Path) -> None:
    own_pg.psql("CREATE DATABASE stops TEMPLATE memidex", database="postgres")
    url = own_pg.url(database="stops")
    fresh = clone(ci_repo, tmp_path / "fresh")
    push(fresh, url)
    answered = doc(fresh, "knowledge", "search", "cookie banner", url=url)
    assert answered["source"] == "team"
    # the URL from memidex.toml this time; a long-lived facade (an MCP server's)
    (fresh / "memidex.toml").write_text(
        (ci_repo / "memidex.toml").read_text(encoding="utf-8")
        + f'\n[index]\nurl = "{url}"\ntimeout = 2\n', encoding="utf-8")
    with Memidex(fresh) as m:
        told: list[str] = []
        m.team.on_change = told.append
        m.team.retry_seconds = 0.0
        assert m.search("cookie banner").source == "team"
        own_pg.stop()
        try:
            down = doc(fresh, "knowledge", "search", "cookie banner", warnings=1,
                       schema="search")
            assert down["source"] == "local" and ids(down) == ids(answered)
            assert "cannot be reached" in down["_warning"]
            assert down["_warning"].endswith("answered from the local index")
            brief = doc(fresh, "brief", "checkout-happy-path", "--no-record", warnings=1)
            assert brief["source"] == "local"
            quiet = cli(fresh, "--quiet", "knowledge", "search", "cookie banner", "--json")
            assert quiet.returncode == 0 and quiet.stderr == ""
            later = m.search("cookie banner")
            assert later.source == "local" and "cannot be reached" in later.warning
            assert m.search("cookie banner").source == "local"
            assert len(told) == 1 and "cannot be reached" in told[0]
        finally:
            own_pg.start()
        back = m.search("cookie banner")
        assert back.source == "team" and [h.id for h in back.results] == ids(answered)
        assert len(told) == 2 and "answers again" in told[1]


def test_several_branches_need_index_branch_and_the_password_never_shows(
        ci_repo: Path, pg_server: PgServer, pg_url: str, tmp_path: Path) -> None:
    origin = clone(ci_repo, tmp_path / "origin")
    push(origin, pg_url)
    git(origin, "checkout", "-q", "-b", "feature")
    write_record(origin, make_record(anchor="el:button:feature-flag", title="Feature flag"))
    commit(origin, "feature")
    push(origin, pg_url)
    git(origin, "checkout", "-q", "main")
    found = doc(origin, "knowledge", "search", "cookie banner", url=pg_url, warnings=1)
    assert found["source"] == "local" and "several branches" in found["_warning"]
    config = (origin / "memidex.toml").read_text(encoding="utf-8")
    (origin / "memidex.toml").write_text(config + '\n[index]\nbranch = "feature"\n',
                                         encoding="utf-8")
    found = doc(origin, "knowledge", "search", "feature flag", url=pg_url)
    feature = git(origin, "rev-parse", "feature").strip()
    assert (found["source"], found["commit"]) == ("team", feature) and ids(found)
    # the password of a URL is masked in the configuration doctor prints, and in warnings
    role = pg_server.url(user=PASSWORD_ROLE, password=PASSWORD, database="nowhere")
    out = cli(origin, "doctor", "--json", url=role)
    assert PASSWORD not in out.stdout + out.stderr
    assert json.loads(out.stdout)["config"]["index"]["url"].count("***") == 1
    found = doc(origin, "knowledge", "search", "cookie banner", url=role, warnings=1)
    assert PASSWORD not in json.dumps(found) and "***" in found["_warning"]


def test_index_table_errors_are_config_errors(repo: Path) -> None:
    for table, words in (('[index]\nurls = "x"\n', "unknown key `urls`"),
                         ("[index]\nurl = 3\n", "`url` must be a non-empty string"),
                         ('[index]\ntimeout = "soon"\n', "`timeout` must be a number"),
                         ("index = 3\n", "`[index]` must be a table")):
        (repo / "memidex.toml").write_text('product = "shop-web"\n' + table, encoding="utf-8")
        out = cli(repo, "knowledge", "search", "x")
        assert out.returncode == 4, out.stderr
        assert out.stderr.count("error:") == 1 and words in out.stderr, out.stderr
        assert "memidex.toml" in out.stderr and "Traceback" not in out.stderr
    # MEMIDEX_INDEX_URL overrides [index] url; a push without either is one error line
    (repo / "memidex.toml").write_text('product = "shop-web"\n', encoding="utf-8")
    out = cli(repo, "index", "push")
    assert out.returncode == 4 and out.stderr.count("error:") == 1
    assert "MEMIDEX_INDEX_URL" in out.stderr


def test_the_ci_recipe_pushes_as_written(ci_repo: Path, pg_url: str, tmp_path: Path) -> None:
    """examples/ci/team-index.yml: its push step's command, in a full clone, with the URL
    from the environment as the secret gives it."""
    import shlex

    import yaml

    recipe = yaml.safe_load((REPO_ROOT / "examples/ci/team-index.yml").read_text("utf-8"))
    steps = recipe["jobs"]["push"]["steps"]
    assert steps[0]["with"]["fetch-depth"] == 0
    step = next(s for s in steps if s.get("name") == "memidex index push")
    assert set(step["env"]) == {"MEMIDEX_INDEX_URL"}
    words = shlex.split(step["run"])
    assert words[:3] == ["memidex", "index", "push"] and words[-1] == "--json"
    checkout = clone(ci_repo, tmp_path / "checkout")
    for expected in ("full", "unchanged"):  # a second run of the job changes nothing
        pushed = doc(checkout, *words[1:-1], url=pg_url, schema="index-push")
        assert pushed["action"] == expected and pushed["branch"] == "main"
        assert pushed["commit"] == head(checkout) and "postgres@" in pushed["url"]
