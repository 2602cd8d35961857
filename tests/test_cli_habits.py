"""The CLI has the habits of git and gh (issue 25, item 4): -h, `memidex help`, TSV off a
terminal and tables on one, a pager, --color / FORCE_COLOR / NO_COLOR, --quiet, a hint
for a knowledge command given at the top, shell completion of what memidex knows,
unique id prefixes for runs and proposals, purge asking first, `runs ingest --dry-run`;
and review of what learning did (item 5): titles in diff and runs show, a proposal as a
diff, a product column across products."""

from __future__ import annotations

import csv
import io
import json
import os
import pty
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO_ROOT, make_record, run_cli, write_record

EXAMPLES = REPO_ROOT / "examples"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MEMIDEX_") and k not in ("NO_COLOR", "FORCE_COLOR",
                                                          "CLICOLOR_FORCE", "PAGER")}
    return {**env, **extra}


def _on_a_terminal(root: Path, *args: str, answer: str | None = None,
                   env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run memidex with stdin, stdout and stderr on a pseudo-terminal (24 lines); its
    exit code and everything the terminal showed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "memidex", "--root", str(root), *args],
                            stdin=follower, stdout=follower, stderr=follower, cwd=root,
                            env=env or _env(LINES="24", COLUMNS="100", TERM="xterm"))
    os.close(follower)
    out = b""
    sent = answer is None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            if not sent and b"?" in out:
                os.write(leader, (answer or "") .encode() + b"\n")
                sent = True
        elif proc.poll() is not None:
            break
    code = proc.wait(timeout=30)
    os.close(leader)
    return code, out.decode("utf-8", "replace")


@pytest.fixture
def shop(repo: Path) -> Path:
    """``repo`` with four example runs ingested (proposals held back) and the index."""
    (repo / "memidex.toml").write_text('product = "shop-web"\n[learning]\nmax_rewrites = 0\n',
                                       encoding="utf-8")
    for n in (51, 52, 53, 58):
        run_cli(repo, "runs", "ingest", str(EXAMPLES / f"runs/r-00{n}.json"), check=True)
    write_record(repo, make_record(product="shop-admin", anchor="page:/login",
                                   title="Admin sign-in is SSO only"))
    run_cli(repo, "knowledge", "rebuild-index", check=True)
    return repo


# --- help ---------------------------------------------------------------------------

def test_h_is_help_and_help_names_a_command_or_a_topic(repo: Path) -> None:
    for path in ([], ["knowledge"], ["knowledge", "search"], ["runs", "ingest"],
                 ["notes", "add"]):
        long = run_cli(repo, *path, "--help", check=True).stdout
        assert run_cli(repo, *path, "-h", check=True).stdout == long
        assert run_cli(repo, "help", *path, check=True).stdout == long
    topics = run_cli(repo, "help", "topics", check=True).stdout.split()
    assert {"configuration", "mcp", "learning", "cli"} <= set(topics)
    page = run_cli(repo, "help", "configuration", check=True).stdout
    assert page == (REPO_ROOT / "docs/configuration.md").read_text(encoding="utf-8")
    bad = run_cli(repo, "help", "no-such")
    assert bad.returncode == 2 and "memidex help topics" in bad.stderr


def test_a_hint_names_memidex_help_not_a_file_of_memidex_source(repo: Path) -> None:
    (repo / "memidex.toml").write_text('product = "shop-web"\nnope = 1\n', encoding="utf-8")
    out = run_cli(repo, "knowledge", "list")
    assert out.returncode == 4 and "hint: see `memidex help configuration`" in out.stderr
    assert "docs/" not in out.stderr


@pytest.mark.parametrize(("given", "meant"), [
    ("search", "knowledge search"), ("show", "knowledge show"), ("list", "knowledge list"),
    ("check", "knowledge check"), ("ingest", "runs ingest")])
def test_a_knowledge_command_at_the_top_gets_a_hint(repo: Path, given: str,
                                                    meant: str) -> None:
    out = run_cli(repo, given, "x")
    assert out.returncode == 2
    assert f"hint: did you mean `memidex {meant}`?" in out.stderr


# --- tables for people, TSV for pipes ------------------------------------------------

def test_listings_are_tsv_when_piped_and_take_every_format(shop: Path) -> None:
    piped = run_cli(shop, "knowledge", "list", check=True).stdout
    lines = piped.splitlines()
    assert lines[0] == "kind\tstatus\tid\ttitle"
    rows = [line.split("\t") for line in lines[1:]]
    assert rows and all(len(r) == 4 for r in rows)
    assert "─" not in piped and "│" not in piped  # no table drawing
    listed = json.loads(run_cli(shop, "knowledge", "list", "--json", check=True).stdout)
    assert [r[2] for r in rows] == [r["id"] for r in listed["records"]]
    as_csv = run_cli(shop, "knowledge", "list", "--format", "csv", check=True).stdout
    parsed = list(csv.reader(io.StringIO(as_csv)))
    assert parsed[0] == ["kind", "status", "id", "title"] and parsed[1:] == rows
    assert json.loads(run_cli(shop, "knowledge", "list", "-f", "json", check=True).stdout
                      ) == listed
    table = run_cli(shop, "knowledge", "list", "--format", "table", check=True).stdout
    assert "┃" in table or "│" in table
    bad = run_cli(shop, "knowledge", "list", "--format", "yaml")
    assert bad.returncode == 2 and "table, tsv, csv, json" in bad.stderr


def test_cross_product_listings_have_a_product_column(shop: Path) -> None:
    rows = [line.split("\t") for line in
            run_cli(shop, "knowledge", "list", "--all-products", check=True
                    ).stdout.splitlines()]
    assert rows[0] == ["product", "kind", "status", "id", "title"]
    assert {r[0] for r in rows[1:]} == {"shop-web", "shop-admin"}
    found = run_cli(shop, "knowledge", "search", "sign in", "--all-products", check=True)
    assert " shop-admin  Admin sign-in is SSO only" in found.stdout  # whose record it is
    runs = [line.split("\t") for line in run_cli(shop, "runs", "list", check=True
                                                 ).stdout.splitlines()]
    assert runs[0][:3] == ["product", "run", "ordinal"]
    assert [r[1] for r in runs[1:]] == ["r-0051", "r-0052", "r-0053", "r-0058"]
    assert {r[0] for r in runs[1:]} == {"shop-web"}


def test_on_a_terminal_a_listing_is_a_table(shop: Path) -> None:
    code, screen = _on_a_terminal(shop, "--no-pager", "knowledge", "list", "--kind",
                                  "caution")
    assert code == 0
    assert "┃" in screen or "│" in screen  # rich's table
    assert "kind\tstatus" not in screen


# --- pager, colour, quiet --------------------------------------------------------------

def test_long_output_goes_through_the_pager_on_a_terminal(shop: Path, tmp_path: Path) -> None:
    seen = tmp_path / "paged.txt"
    pager = f"{sys.executable} -c \"import sys; open({str(seen)!r}, 'w').write(sys.stdin.read())\""
    env = _env(LINES="10", COLUMNS="120", TERM="xterm", PAGER=pager)
    code, screen = _on_a_terminal(shop, "knowledge", "list", env=env)
    assert code == 0 and seen.exists()
    assert "fact-el-button-place-order" in seen.read_text(encoding="utf-8")
    assert "fact-el-button-place-order" not in screen  # the pager had it, not the terminal
    seen.unlink()
    code, screen = _on_a_terminal(shop, "--no-pager", "knowledge", "list", env=env)
    assert code == 0 and not seen.exists() and "fact-el-button-place-order" in screen
    short = run_cli(shop, "knowledge", "list", "--kind", "unknown", check=True)  # piped
    assert short.stdout and not seen.exists()


def test_colour_follows_the_flag_and_the_environment(shop: Path) -> None:
    def search(*flags: str, **env: str) -> str:
        out = subprocess.run([sys.executable, "-m", "memidex", "--root", str(shop), *flags,
                              "knowledge", "search", "place order"], capture_output=True,
                             text=True, env=_env(**env), check=True, cwd=shop)
        return out.stdout

    assert "\x1b[" not in search()  # piped: plain
    assert "\x1b[" in search("--color", "always")
    assert "\x1b[" in search(FORCE_COLOR="1") and "\x1b[" in search(CLICOLOR_FORCE="1")
    assert "\x1b[" not in search(FORCE_COLOR="0")
    assert "\x1b[" not in search("--color", "never", FORCE_COLOR="1")
    assert "\x1b[" not in search(NO_COLOR="1", FORCE_COLOR="1")  # NO_COLOR wins
    out = subprocess.run([sys.executable, "-m", "memidex", "--root", str(shop), "--color",
                          "always", "knowledge", "show", "fact-el-button-place-order-b9ec"],
                         capture_output=True, text=True, env=_env(), check=True, cwd=shop)
    assert "\x1b[" in out.stdout  # rich output too
    bad = run_cli(shop, "--color", "sometimes", "knowledge", "list")
    assert bad.returncode == 2 and "auto, always or never" in bad.stderr


def test_a_long_command_shows_progress_on_a_terminal_unless_quiet(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from memidex.cli import plain, term

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Tty()
    monkeypatch.setattr(sys, "stderr", err)
    assert plain.with_ticker("checking records", lambda: time.sleep(1.2) or 7) == 7
    assert "checking records …" in err.getvalue() and err.getvalue().endswith("\x1b[K")
    monkeypatch.setattr(term.SETTINGS, "quiet", True)
    quiet = Tty()
    monkeypatch.setattr(sys, "stderr", quiet)
    assert plain.with_ticker("checking records", lambda: time.sleep(0.7) or 8) == 8
    assert quiet.getvalue() == ""


def test_quiet_prints_the_results_only(shop: Path) -> None:
    loud = run_cli(shop, "runs", "ingest", str(EXAMPLES / "runs/r-0059.json"), "--dry-run",
                   check=True).stdout
    quiet = run_cli(shop, "-q", "runs", "ingest", str(EXAMPLES / "runs/r-0059.json"),
                    "--dry-run", check=True).stdout
    assert "note:" not in quiet and quiet.splitlines()[0] == loud.splitlines()[0]


# --- completion ----------------------------------------------------------------------

def _complete(root: Path, words: str) -> list[str]:
    env = _env(_MEMIDEX_COMPLETE="complete_bash", COMP_WORDS=words,
               COMP_CWORD=str(len(words.split()) - (0 if words.endswith(" ") else 1)))
    out = subprocess.run([sys.executable, "-c", "import sys; sys.argv[0] = 'memidex'; "
                          "from memidex.cli.main import run; run()"], cwd=root, env=env,
                         capture_output=True, text=True, check=False)
    return out.stdout.split()


def test_completion_of_ids_products_kinds_and_tests(shop: Path) -> None:
    ids = _complete(shop, "memidex knowledge show fact-el-button-place")
    assert ids and all(i.startswith("fact-el-button-place-order-") for i in ids)
    assert _complete(shop, "memidex knowledge list --kind ca") == ["caution"]
    assert "shop-web" in _complete(shop, "memidex knowledge search x --product shop")
    assert "checkout-happy-path" in _complete(shop, "memidex brief checkout")
    assert _complete(shop, "memidex runs show r-005") == ["r-0051", "r-0052", "r-0053",
                                                          "r-0058"]
    queue = json.loads(run_cli(shop, "knowledge", "proposals", "--json").stdout)["proposals"]
    assert sorted(_complete(shop, "memidex knowledge proposals show p-")) == sorted(
        p["id"] for p in queue)


# --- prefixes, purge, dry run --------------------------------------------------------

def test_runs_and_proposals_take_a_unique_prefix(shop: Path) -> None:
    run = json.loads(run_cli(shop, "runs", "show", "r-0058", "--json", check=True).stdout)
    assert json.loads(run_cli(shop, "runs", "show", "r-0058"[:5] + "8", "--json").stdout
                      ) == run  # "r-0058" is its own id; a prefix needs to be unique:
    ambiguous = run_cli(shop, "runs", "show", "r-005")
    assert ambiguous.returncode == 2 and "ambiguous" in ambiguous.stderr
    assert "r-0051" in ambiguous.stderr
    queue = json.loads(run_cli(shop, "knowledge", "proposals", "--json").stdout)["proposals"]
    first = queue[0]["id"]
    prefix = next(first[:n] for n in range(3, 18)
                  if sum(p["id"].startswith(first[:n]) for p in queue) == 1)
    shown = json.loads(run_cli(shop, "knowledge", "proposals", "show", prefix, "--json",
                               check=True).stdout)
    assert shown["id"] == first
    rejected = json.loads(run_cli(shop, "knowledge", "proposals", "reject", prefix,
                                  "--json", check=True).stdout)
    assert rejected["id"] == first and rejected["decision"] == "rejected"


def test_purge_asks_on_a_terminal_unless_yes(repo: Path) -> None:
    r = make_record()
    path = write_record(repo, r)
    code, screen = _on_a_terminal(repo, "knowledge", "purge", r.id[:20], answer="n")
    assert code == 2 and "Place order is disabled" in screen and path.exists()
    assert "nothing changed" in screen
    code, screen = _on_a_terminal(repo, "knowledge", "purge", r.id[:20], answer="y")
    assert code == 0 and not path.exists() and "purged" in screen
    write_record(repo, r)
    code, screen = _on_a_terminal(repo, "knowledge", "purge", r.id, "--yes")
    assert code == 0 and not path.exists() and "?" not in screen


def _tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` but git's and the derived index (which any reading
    command may refresh)."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and not rel.startswith((".git/", "agent-qa-knowledge/memory/index/")):
            out[rel] = p.read_bytes()
    return out


def test_dry_run_prints_what_the_run_would_teach_and_changes_nothing(shop: Path) -> None:
    run = str(EXAMPLES / "runs/r-0059.json")
    before = _tree(shop)
    text = run_cli(shop, "runs", "ingest", run, "--dry-run", check=True).stdout
    preview = json.loads(run_cli(shop, "runs", "ingest", run, "--dry-run", "--json",
                                 check=True).stdout)
    assert _tree(shop) == before  # not a byte written: records, state, index, lease
    assert text.startswith(f"r-0059 would be ordinal {preview['ordinal']} of shop-web")
    assert "nothing was written" in text
    for change in preview["changes"]:
        assert change["title"] in text and change["id"] in text
    done = json.loads(run_cli(shop, "runs", "ingest", run, "--json", check=True).stdout)
    assert done["ordinal"] == preview["ordinal"]
    assert [(c["op"], c["id"]) for c in done["changes"]] == [
        (c["op"], c["id"]) for c in preview["changes"]]
    assert done["proposals"] == [p["id"] for p in preview["proposals"]]
    assert done["analysis"] == preview["analysis"]
    again = run_cli(shop, "runs", "ingest", run, "--dry-run", check=True).stdout
    assert "already ingested" in again


# --- reviewing what learning did -------------------------------------------------------

def test_diff_and_runs_show_name_titles(shop: Path) -> None:
    listed = {r["id"]: r["title"] for r in json.loads(run_cli(
        shop, "knowledge", "list", "--json", check=True).stdout)["records"]}
    rows = [line.split("\t") for line in run_cli(shop, "knowledge", "diff", "v1.4.2",
                                                 check=True).stdout.splitlines()]
    assert rows[0] == ["change", "title", "record"]
    assert rows[1:] and all(listed.get(r[2], "(no longer in the records)") == r[1]
                            for r in rows[1:])
    shown = run_cli(shop, "runs", "show", "r-0051", check=True).stdout
    detail = json.loads(run_cli(shop, "runs", "show", "r-0051", "--json").stdout)
    for change in detail["changes"]:
        assert change["id"] in shown and listed[change["id"]] in shown


def test_a_proposal_is_shown_as_a_diff_of_its_record(shop: Path) -> None:
    queue = json.loads(run_cli(shop, "knowledge", "proposals", "--json").stdout)["proposals"]
    p = next(q for q in queue if q["record_id"].startswith("fact-el-button-place-order-b9ec"))
    assert p["op"] == "supersede"  # r-0058 saw the button enabled: a new title
    text = run_cli(shop, "knowledge", "proposals", "show", p["id"], check=True).stdout
    assert text.startswith(f"proposal {p['id']}: supersede {p['record_id']}")
    assert f"held back: {p['reason']}" in text
    assert f"--- a/{p['path']}" in text and f"+++ b/{p['path']}" in text
    assert any(line.startswith("+title:") for line in text.splitlines())
    assert any(line.startswith("-title:") for line in text.splitlines())
    listing = run_cli(shop, "knowledge", "proposals", check=True).stdout.splitlines()
    assert listing[0] == "id\trun\top\trecord\ttitle\treason"


def test_a_pager_that_is_missing_is_not_an_error(shop: Path) -> None:
    env = _env(LINES="5", COLUMNS="100", TERM="xterm", PAGER="no-such-pager-here")
    code, screen = _on_a_terminal(shop, "knowledge", "list", env=env)
    assert code == 0 and "fact-el-button-place-order" in screen
    assert shutil.which("no-such-pager-here") is None
