"""Issue 9, item 1: secrets and home paths never reach what memidex stores, and a secret
typed by hand into a record is masked in every output (show, search, list)."""

from __future__ import annotations

import json
import os
import pwd
import time
from pathlib import Path

from conftest import make_record, run_cli, write_record
from memidex.app import Memidex
from memidex.masking import Masker

SECRET = "hunter2xyzzy"


def _secrets(repo: Path) -> None:
    (repo / ".agent-qa").mkdir(exist_ok=True)
    (repo / ".agent-qa/secrets.yaml").write_text(f"API_TOKEN: {SECRET}\n", encoding="utf-8")


def _files_holding(root: Path, needle: bytes) -> list[str]:
    hits = []
    for folder, dirs, files in os.walk(root):
        if ".git" in dirs:
            dirs.remove(".git")
        for name in files + dirs:
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            if rel == ".agent-qa/secrets.yaml":
                continue
            if needle in name.encode():
                hits.append(rel)
            elif path.is_file() and needle in path.read_bytes():
                hits.append(rel)
    return hits


def test_a_secret_in_anchors_scope_and_title_is_masked_before_the_id(repo: Path) -> None:
    _secrets(repo)
    out = run_cli(repo, "knowledge", "add", "--kind", "fact", "--anchor", f"el:input:{SECRET}",
                  "--anchor", f"page:/login?token={SECRET}", "--scope", f"env={SECRET}",
                  "--title", f"token {SECRET}", "--body", f"uses {SECRET}", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert SECRET not in out.stdout and "secret-api-token" in data["id"]
    text = (repo / data["path"]).read_text(encoding="utf-8")
    lines = dict(line.split(": ", 1) for line in text.split("---")[1].strip().splitlines()
                 if ": " in line)
    assert "el:input:[secret:API_TOKEN]" in lines["anchor"]
    assert "[secret:API_TOKEN]" in lines["scope"] and "[secret:API_TOKEN]" in lines["anchors"]
    run_cli(repo, "knowledge", "rebuild-index", check=True)
    run_cli(repo, "knowledge", "search", "token", check=True)
    assert _files_holding(repo, SECRET.encode()) == []


def test_a_secret_in_the_product_is_refused(repo: Path) -> None:
    _secrets(repo)
    out = run_cli(repo, "knowledge", "add", "--kind", "fact", "--product", f"p-{SECRET}",
                  "--anchor", "el:x", "--title", "t")
    assert out.returncode == 4 and out.stderr.startswith("error:"), out.stderr
    assert SECRET not in out.stderr and "Traceback" not in out.stderr
    assert _files_holding(repo, SECRET.encode()) == []


def test_the_home_rule_redacts_real_homes_and_keeps_app_routes(tmp_path: Path) -> None:
    m = Masker()
    assert m.mask("Open /home/dashboard") == "Open /home/dashboard"
    assert m.mask("GET /home/dashboard/settings") == "GET /home/dashboard/settings"
    home = os.environ["HOME"]
    assert m.mask(f"saved to {home}/shots/a.png") == "saved to ~/shots/a.png"
    assert m.mask(f"cwd {home}") == "cwd ~"
    me = pwd.getpwuid(os.getuid()).pw_dir
    if me.startswith(("/home/", "/root", "/Users/")):
        assert m.mask(f"at {me}/x") == "at ~/x"
    assert m.mask(r"C:\Users\alice\shot.png") == r"~\shot.png"


def test_a_hand_typed_secret_is_masked_in_show_search_and_list(repo: Path) -> None:
    _secrets(repo)
    r = make_record(title=f"login uses {SECRET}", body=f"The token {SECRET} opens it.")
    write_record(repo, r)
    for args in (("knowledge", "show", r.id, "--json"), ("knowledge", "show", r.id),
                 ("knowledge", "search", "token", "--json"), ("knowledge", "search", "login"),
                 ("knowledge", "list", "--json"), ("knowledge", "list")):
        out = run_cli(repo, *args)
        assert out.returncode == 0, (args, out.stderr)
        assert SECRET not in out.stdout, args
    shown = json.loads(run_cli(repo, "knowledge", "show", r.id, "--json").stdout)
    assert shown["title"] == "login uses [secret:API_TOKEN]"


def test_the_output_mask_costs_little_on_search(repo: Path, capsys: object) -> None:
    """Not a timed assertion: prints what the output mask costs on an indexed search."""
    for i in range(200):
        write_record(repo, make_record(anchor=f"el:button:b{i}", title=f"button {i} works"))
    with Memidex(repo) as m:
        m.search("button")

        def per_search() -> float:
            t = time.perf_counter()
            for _ in range(50):
                m.search("button")
            return (time.perf_counter() - t) / 50

        without = per_search()
        _secrets(repo)
        with_secrets = per_search()
    print(f"search without a secrets file {without * 1e3:.2f} ms, "
          f"with one {with_secrets * 1e3:.2f} ms")
