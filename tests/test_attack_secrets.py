"""Hardening, masking under attack: a secret split by other whitespace, control or
invisible characters than its own is still a secret — in the brief (markdown, JSON, MCP),
`knowledge show`, the search, the frozen run and `runs show` — and the index stores no
secret typed by hand into a record, so a search cannot confirm a guess.

Real repositories, the real `memidex` command and MCP server, the real SQLite file.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio

from conftest import make_record, run_cli, write_record

SECRET = "open sesame 42"
WORD_SECRET = "hunter2xyzzy"
# the secret as a person might type it into a record, or a runner report it
SPLIT = ("open\tsesame 42", "open\u200bsesame 42", "open\rsesame 42", "open  sesame 42",
         "open\nsesame 42", "open\u00a0sesame\u200b\u200b 42")


def _secrets(repo: Path) -> None:
    (repo / ".agent-qa").mkdir(exist_ok=True)
    (repo / ".agent-qa/secrets.yaml").write_text(
        f"door: {SECRET}\napi: {WORD_SECRET}\n", encoding="utf-8")


def _as_printed(text: str) -> str:
    """``text`` as a screen shows it: every run of whitespace, control or invisible
    characters one space, invisible format characters (ZWSP) nothing."""
    import unicodedata

    out: list[str] = []
    for ch in text:
        if unicodedata.category(ch) == "Cf":
            continue
        out.append(ch if ch.isprintable() and not ch.isspace() else " ")
    return " ".join("".join(out).split())


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    return []


def _leaks(text: str) -> bool:
    """Whether ``text`` (or, JSON, any string inside it) shows a secret once printed."""
    shown = [text]
    try:
        shown += _strings(json.loads(text))
    except ValueError:
        pass
    return any(secret in _as_printed(s) for s in shown
               for secret in (SECRET, WORD_SECRET))


def _door_record(repo: Path) -> str:
    """A record a person wrote, served to test door-test, the secret split four ways."""
    body = "\n".join(f"Type {s} at the door." for s in SPLIT)
    r = make_record(anchor="el:input:door-code", title="The door code is open\tsesame 42",
                    body=body, anchors=("test:door-test",))
    write_record(repo, r)
    return r.id


def test_a_split_secret_is_masked_in_the_brief_show_search_and_list(repo: Path) -> None:
    _secrets(repo)
    rid = _door_record(repo)
    for args in (["brief", "door-test"], ["brief", "door-test", "--json"],
                 ["brief", "door-test", "--json", "--explain"],
                 ["knowledge", "show", rid], ["knowledge", "show", rid, "--json"],
                 ["knowledge", "show", rid, "--raw"],
                 ["knowledge", "search", "door code"],
                 ["knowledge", "search", "door code", "--json"],
                 ["knowledge", "list"], ["knowledge", "list", "--json"]):
        out = run_cli(repo, *args)
        assert out.returncode == 0, (args, out.stderr)
        assert "door" in out.stdout.lower(), args  # the record is there
        assert not _leaks(out.stdout), (args, out.stdout)
    shown = json.loads(run_cli(repo, "knowledge", "show", rid, "--json").stdout)
    assert "[secret:door]" in json.dumps(shown)


def test_a_split_secret_is_masked_in_the_mcp_brief(repo: Path) -> None:
    _secrets(repo)
    _door_record(repo)
    assert run_cli(repo, "knowledge", "rebuild-index").returncode == 0

    async def session() -> list[str]:
        from mcp import ClientSession, StdioServerParameters, stdio_client

        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
        params = StdioServerParameters(command=sys.executable,
                                       args=["-m", "memidex", "--root", str(repo), "mcp"],
                                       env=env, cwd=str(repo))
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), \
                    ClientSession(read, write) as s:
                await s.initialize()
                res = await s.call_tool("brief", {"test_id": "door-test"})
                assert not res.is_error, res.content
                texts = [c.text for c in res.content]  # type: ignore[union-attr]
                return [*texts, json.dumps(res.structured_content, ensure_ascii=False)]

    shown = anyio.run(session)
    assert all("The door code is" in t for t in shown), shown  # the record is served
    assert not any(_leaks(t) for t in shown), shown


def test_the_frozen_run_and_runs_show_mask_a_split_secret(repo: Path, tmp_path: Path) -> None:
    from learnkit import a_run, a_test, step, write_run

    _secrets(repo)
    steps = [step(i, f"el:field:f{i}", f"typed {s}") for i, s in enumerate(SPLIT)]
    run = a_run("r-door", [a_test("door-test", steps, verdict="fail",
                                  failure={"message": "wrong code open\nsesame 42"})])
    ingested = run_cli(repo, "runs", "ingest", str(write_run(tmp_path / "in", run)))
    assert ingested.returncode == 0, ingested.stderr
    frozen = repo / ".agent-qa/runs/r-door.json"
    assert not _leaks(frozen.read_text(encoding="utf-8"))
    assert "[secret:door]" in frozen.read_text(encoding="utf-8")
    for args in (["runs", "show", "r-door"], ["runs", "show", "r-door", "--json"]):
        out = run_cli(repo, *args)
        assert out.returncode == 0 and not _leaks(out.stdout), (args, out.stdout)
    for path in (repo / "agent-qa-knowledge/memory/records").rglob("*.md"):
        assert not _leaks(path.read_text(encoding="utf-8")), path


def test_the_index_stores_no_hand_typed_secret_and_search_is_no_oracle(repo: Path) -> None:
    _secrets(repo)
    write_record(repo, make_record(anchor="el:input:api-key", title="The API key field",
                                   body=f"Paste {WORD_SECRET} into the API key field; "
                                        f"the door takes {SPLIT[0]}."))
    _door_record(repo)
    for args in (["knowledge", "rebuild-index"], ["knowledge", "search", "api key"]):
        assert run_cli(repo, *args).returncode == 0
    index = repo / "agent-qa-knowledge/memory/index/memidex.sqlite"
    raw = b"".join(p.read_bytes() for p in index.parent.glob("memidex.sqlite*"))
    assert WORD_SECRET.encode() not in raw and b"sesame" not in raw
    for guess in (WORD_SECRET, "sesame", SECRET):
        out = run_cli(repo, "knowledge", "search", guess, "--json")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["results"] == [], (guess, out.stdout)
    found = json.loads(run_cli(repo, "knowledge", "search", "api key", "--json").stdout)
    assert [r["title"] for r in found["results"]] == ["The API key field"]
    # a record edited afterwards is refreshed into the index masked too
    write_record(repo, make_record(anchor="el:input:api-key", title="The API key field",
                                   body=f"Now paste {WORD_SECRET}x there."))
    out = run_cli(repo, "knowledge", "search", WORD_SECRET + "x", "--json")
    assert json.loads(out.stdout)["results"] == []
    raw = b"".join(p.read_bytes() for p in index.parent.glob("memidex.sqlite*"))
    assert WORD_SECRET.encode() not in raw


def test_without_the_index_the_search_is_no_oracle_either(repo: Path) -> None:
    _secrets(repo)
    write_record(repo, make_record(anchor="el:input:api-key", title="The API key field",
                                   body=f"Paste {WORD_SECRET} into the API key field."))
    for guess in (WORD_SECRET, "api key"):
        out = run_cli(repo, "knowledge", "search", guess, "--json")  # no index: bundle-scan
        data = json.loads(out.stdout)
        assert out.returncode == 0 and data["level"] == "bundle-scan", out.stdout
        assert [r["title"] for r in data["results"]] == (
            [] if guess == WORD_SECRET else ["The API key field"]), (guess, data)


def _index_bytes(repo: Path) -> bytes:
    index = repo / "agent-qa-knowledge/memory/index/memidex.sqlite"
    return b"".join(p.read_bytes() for p in index.parent.glob("memidex.sqlite*"))


def _built_at(repo: Path) -> str:
    import sqlite3

    conn = sqlite3.connect(repo / "agent-qa-knowledge/memory/index/memidex.sqlite")
    try:
        return str(conn.execute("SELECT value FROM meta WHERE key = 'built_at'").fetchone()[0])
    finally:
        conn.close()


def _titles(repo: Path, query: str) -> list[str]:
    out = run_cli(repo, "knowledge", "search", query, "--json")
    assert out.returncode == 0, out.stderr
    return [r["title"] for r in json.loads(out.stdout)["results"]]


def test_a_secret_declared_after_the_index_was_built_leaves_the_index_at_the_next_command(
        repo: Path) -> None:
    write_record(repo, make_record(anchor="el:input:api-key", title="The API key field",
                                   body=f"Paste {WORD_SECRET} into the API key field."))
    assert run_cli(repo, "knowledge", "rebuild-index").returncode == 0
    assert _titles(repo, WORD_SECRET) == ["The API key field"]  # not a secret yet
    assert WORD_SECRET.encode() in _index_bytes(repo)
    _secrets(repo)  # now it is: no command may find the record by it, nor keep it
    assert _titles(repo, WORD_SECRET) == []
    assert WORD_SECRET.encode() not in _index_bytes(repo)
    assert _titles(repo, "api key") == ["The API key field"]
    shown = run_cli(repo, "knowledge", "search", "api key", "--json").stdout
    assert WORD_SECRET not in shown and "[secret:" in shown
    # the same secrets written again, or the file touched: nothing to rebuild
    built = _built_at(repo)
    _secrets(repo)
    os.utime(repo / ".agent-qa/secrets.yaml")
    assert _titles(repo, "api key") == ["The API key field"]
    assert _built_at(repo) == built
    # the secret withdrawn: the record is found by its own words again
    (repo / ".agent-qa/secrets.yaml").write_text(f"door: {SECRET}\n", encoding="utf-8")
    assert _titles(repo, WORD_SECRET) == ["The API key field"]
    (repo / ".agent-qa/secrets.yaml").unlink()
    assert _titles(repo, WORD_SECRET) == ["The API key field"]
    _secrets(repo)
    assert _titles(repo, WORD_SECRET) == []


def test_a_secret_declared_while_a_daemon_serves_is_masked_by_it(repo: Path) -> None:
    from test_warm import Daemon, cli

    write_record(repo, make_record(anchor="el:input:api-key", title="The API key field",
                                   body=f"Paste {WORD_SECRET} into the API key field."))
    assert run_cli(repo, "knowledge", "rebuild-index").returncode == 0
    served = Daemon(repo)
    try:
        warm = cli(repo, "knowledge", "search", WORD_SECRET, "--json", warm="require")
        assert [r["title"] for r in json.loads(warm.stdout)["results"]] == \
            ["The API key field"]
        _secrets(repo)
        warm = cli(repo, "knowledge", "search", WORD_SECRET, "--json", warm="require")
        assert warm.returncode == 0, warm.stderr
        assert json.loads(warm.stdout)["results"] == []
        warm = cli(repo, "knowledge", "search", "api key", "--json", warm="require")
        assert WORD_SECRET not in warm.stdout and "[secret:" in warm.stdout
        assert WORD_SECRET.encode() not in _index_bytes(repo)
    finally:
        served.kill()


def test_a_secrets_file_that_is_a_fifo_or_a_device_is_refused_not_waited_on(
        repo: Path) -> None:
    """open() of a FIFO waits for a writer forever; taking it for "no secrets" would
    unmask every one: the command stops at once, exit 4, naming the file."""
    import subprocess

    write_record(repo, make_record(anchor="el:input:api-key", title="The API key field",
                                   body="Paste the key into the API key field."))
    secrets = repo / ".agent-qa/secrets.yaml"
    secrets.parent.mkdir(exist_ok=True)
    os.mkfifo(secrets)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
    for target in (None, "/dev/zero"):
        if target is not None:
            secrets.unlink()
            secrets.symlink_to(target)
        out = subprocess.run([sys.executable, "-m", "memidex", "--root", str(repo),
                              "knowledge", "search", "api key"], capture_output=True,
                             text=True, env=env, timeout=20, check=False)
        assert out.returncode == 4, out.stderr
        assert "secrets.yaml: the secrets file is not a regular file" in out.stderr
        assert "Traceback" not in out.stderr


def test_a_secrets_file_that_cannot_be_read_stops_a_write_rather_than_unmask(
        repo: Path) -> None:
    """A symlink loop, or a link to a vault that is not mounted: the secrets are unknown,
    so nothing is written unmasked — exit 4 naming the file, the record not created."""
    secrets = repo / ".agent-qa/secrets.yaml"
    secrets.parent.mkdir(exist_ok=True)
    for target in ("secrets.yaml", "/nonexistent/vault/secrets.yaml"):
        if secrets.is_symlink():
            secrets.unlink()
        secrets.symlink_to(target)
        out = run_cli(repo, "knowledge", "add", "-k", "fact", "-a", "el:input:key",
                      "-t", f"The key is {WORD_SECRET}")
        assert out.returncode == 4, (target, out.stdout, out.stderr)
        assert "secrets.yaml" in out.stderr and "Traceback" not in out.stderr
        assert not list((repo / "agent-qa-knowledge/memory/records").rglob("*.md"))


def test_a_secrets_link_gone_dangling_stops_a_search_rather_than_unmask(repo: Path) -> None:
    _secrets(repo)
    write_record(repo, make_record(anchor="el:input:api-key", title="The API key field",
                                   body=f"Paste {WORD_SECRET} into the API key field."))
    assert run_cli(repo, "knowledge", "rebuild-index").returncode == 0
    secrets = repo / ".agent-qa/secrets.yaml"
    kept = repo / ".agent-qa/vault.yaml"
    secrets.rename(kept)
    secrets.symlink_to("/nonexistent/vault/secrets.yaml")
    out = run_cli(repo, "knowledge", "search", "api key")
    assert out.returncode == 4 and "symlink to nothing" in out.stderr, out.stderr
    assert WORD_SECRET not in out.stdout


def test_a_secret_spelled_in_fullwidth_letters_is_masked_where_it_is_printed(
        repo: Path) -> None:
    """NFKC reads ｈｕｎｔｅｒ２ｘｙｚｚｙ (and ligatures, ideographic spaces) as the secret, and
    so does anyone — or any model — reading a brief: masked in what is printed and what
    the index stores."""
    _secrets(repo)
    wide = "".join(chr(ord(c) + 0xFEE0) for c in WORD_SECRET)
    door = "open\u3000sesame ４２"
    write_record(repo, make_record(anchor="el:input:api-key", title="The API key field",
                                   body=f"Paste {wide} here; the door takes {door}.",
                                   anchors=("test:door-test",)))
    assert run_cli(repo, "knowledge", "rebuild-index").returncode == 0
    for args in (["knowledge", "search", "api key", "--json"],
                 ["brief", "door-test", "--no-record"],
                 ["knowledge", "list", "--json"]):
        out = run_cli(repo, *args)
        assert out.returncode == 0, out.stderr
        assert wide not in out.stdout and "sesame" not in out.stdout, (args, out.stdout)
    assert wide.encode() not in _index_bytes(repo) and b"sesame" not in _index_bytes(repo)
