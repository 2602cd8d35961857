"""The team index and the secrets file (docs/team-index.md, "Secrets"): a push masks
every record as the local index does, so the shared server holds no secret typed by
hand into a committed record, and a search of it cannot confirm a guess; a reader whose
secrets differ from the pusher's is answered by its own local index; the pusher's
secrets changing rebuilds the branch. A real PostgreSQL (``conftest_pg.py``), real git
repositories, the real CLI in a subprocess; nothing is mocked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg

from conftest import git, make_record, write_record
from memidex.teamindex import push

WORD = "hunter2xyzzy"
PHRASE = "open sesame 42"


def _cli(root: Path, *args: str, url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
    env["MEMIDEX_INDEX_URL"] = url
    return subprocess.run([sys.executable, "-m", "memidex", "--root", str(root), *args],
                          cwd=root, capture_output=True, text=True, env=env, check=False)


def _search(root: Path, words: str, url: str) -> dict[str, Any]:
    out = _cli(root, "knowledge", "search", words, "--json", url=url)
    assert out.returncode == 0, out.stderr
    data: dict[str, Any] = json.loads(out.stdout)
    data["_stderr"] = out.stderr
    return data


def _secrets(root: Path, text: str) -> None:
    (root / ".agent-qa").mkdir(exist_ok=True)
    (root / ".agent-qa/secrets.yaml").write_text(text, encoding="utf-8")


def _held(url: str) -> str:
    """Every text the team index holds, as one string."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT title || body || anchors || scope || coalesce(history, '') || fts "
            "FROM memidex.records").fetchall()
        rows += conn.execute("SELECT title || body FROM memidex.history_versions").fetchall()
        rows += conn.execute("SELECT term FROM memidex.terms").fetchall()
        rows += conn.execute("SELECT anchor FROM memidex.anchors").fetchall()
    return "\n".join(str(r[0]) for r in rows)


def test_a_push_masks_every_record_and_a_team_search_is_no_oracle(repo: Path,
                                                                   pg_url: str) -> None:
    git(repo, "checkout", "-q", "-b", "main")
    write_record(repo, make_record(
        anchor="el:input:api-key", title="The API key field",
        body=f"Paste {WORD} into the API key field; the door takes {PHRASE}.",
        anchors=(f"test:login-{WORD}",)))
    write_record(repo, make_record(anchor="el:button:place-order", title="Place order",
                                   body="Place order waits for the terms box."))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "records")
    _secrets(repo, f"api: {WORD}\ndoor: {PHRASE}\n")
    assert push(repo, pg_url).action == "full"
    held = _held(pg_url)
    assert WORD not in held and "sesame" not in held and "sesam" not in held
    for guess in (WORD, "sesame", PHRASE, "sesame 42"):
        found = _search(repo, guess, pg_url)
        assert found["source"] == "team" and found["results"] == [], (guess, found)
    found = _search(repo, "api key", pg_url)
    assert found["source"] == "team" and [r["title"] for r in found["results"]] == \
        ["The API key field"]
    assert WORD not in json.dumps(found)
    # a reader with other secrets than the pusher's: its own (masked) local index answers,
    # whatever the words asked, so the answer's source tells nothing of them
    _secrets(repo, f"api: {WORD}\ndoor: {PHRASE}\ncard: 4242 4242\n")
    for words in ("api key", "place order", WORD):
        found = _search(repo, words, pg_url)
        assert found["source"] == "local", (words, found)
        assert "masked with other secrets" in found["_stderr"]
    # the pusher's secrets change: the next push rebuilds the branch masked with them,
    # even at the same commit
    write_record(repo, make_record(anchor="el:input:card", title="Card field",
                                   body="Type 4242 4242 into the card field."))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "card")
    report = push(repo, pg_url)
    assert report.action == "rebuilt" and any("secrets" in n for n in report.notes)
    assert "4242" not in _held(pg_url)
    assert push(repo, pg_url).action == "unchanged"
    _secrets(repo, f"api: {WORD}\n")
    assert push(repo, pg_url).action == "rebuilt"
    assert "sesame" in _held(pg_url)  # withdrawn: the words are the record's again
    # a reader without a secrets file has nothing to hide: the team index answers
    (repo / ".agent-qa/secrets.yaml").unlink()
    assert _search(repo, "api key", pg_url)["source"] == "team"
