"""The CLI as a new user drives it: real subprocesses in real git repositories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import make_record, run_cli, write_record
from memidex.cli.main import main

HAND_WRITTEN = """\
---
id: fact-el-button-place-order-97c05f92322716e0
kind: fact                  # written by hand, with comments
status: active
product: shop-web
scope:
  page: /checkout
anchor: el:button:place-order
anchors:
  - page:/checkout
  - test:checkout-happy-path
title: Place order stays disabled until the terms box is ticked
trust: {source: human, confirmations: 3, contradictions: 0, last_confirmed: 41}
---
The **Place order** button on /checkout is disabled until "I accept the terms" is ticked.
"""

OTHER_PRODUCT = """\
---
id: fact-el-button-place-order-{hash}
kind: fact
status: active
product: shop-admin
anchor: el:button:place-order
title: Admin place order button places the order for the customer
---
Place order in the admin console places the order immediately, no terms box.
"""


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts}


def _hand_written_repo(repo: Path) -> Path:
    from memidex.records.ids import record_id

    facts = repo / "agent-qa-knowledge/memory/records/fact"
    (facts / "fact-el-button-place-order-97c05f92322716e0.md").write_text(HAND_WRITTEN)
    admin_id = record_id("fact", "el:button:place-order", "shop-admin", {})
    (facts / f"{admin_id}.md").write_text(
        OTHER_PRODUCT.format(hash=admin_id.rsplit("-", 1)[1]))
    for i, (anchor, title) in enumerate([
        ("el:input:card-number", "Card number field accepts only the test card"),
        ("el:list:suggestions", "Search suggestions appear after 300 ms"),
        ("page:/login", "Login locks the account after five failures"),
    ]):
        write_record(repo, make_record(anchor=anchor, title=title,
                                       body=f"Observation number {i} about {title.lower()}."))
    return repo


def test_init_twice_changes_nothing(tmp_path: Path) -> None:
    import subprocess

    root = tmp_path / "new"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    first = run_cli(root, "init", "--json", check=True)
    assert json.loads(first.stdout)["changed"] is True
    before = _snapshot(root)
    second = run_cli(root, "init", "--json", check=True)
    assert json.loads(second.stdout) == {"root": str(root.resolve()), "created": [],
                                         "changed": False, "product": "new",
                                         "warnings": []}
    assert _snapshot(root) == before
    ignore = (root / ".gitignore").read_text()
    assert "agent-qa-knowledge/memory/index/" in ignore and ".agent-qa/" in ignore
    for kind in ("fact", "caution", "procedure", "unknown"):
        assert (root / f"agent-qa-knowledge/memory/records/{kind}").is_dir()


def test_search_is_product_scoped_and_ranks_the_obvious_record_first(repo: Path) -> None:
    _hand_written_repo(repo)
    run_cli(repo, "knowledge", "rebuild-index", check=True)
    out = run_cli(repo, "knowledge", "search", "place order disabled", "--json", check=True)
    data = json.loads(out.stdout)
    assert set(data) >= {"query", "product", "level", "results"}
    assert data["product"] == "shop-web" and data["level"] == "lexical-only"
    first = data["results"][0]
    assert first["id"] == "fact-el-button-place-order-97c05f92322716e0"
    assert set(first) >= {"id", "kind", "status", "title", "score", "confidence", "snippet",
                          "path", "anchors"}
    assert first["confidence"] == "reliable"
    assert "«" in first["snippet"]
    assert all(r["product"] == "shop-web" for r in data["results"])
    admin = json.loads(run_cli(repo, "knowledge", "search", "place order", "--product",
                               "shop-admin", "--json", check=True).stdout)
    assert [r["product"] for r in admin["results"]] == ["shop-admin"]
    every = json.loads(run_cli(repo, "knowledge", "search", "place order", "--all-products",
                               "--json", check=True).stdout)
    assert {r["product"] for r in every["results"]} == {"shop-web", "shop-admin"}
    assert every["product"] is None


def test_search_without_a_product_is_a_usage_error(repo: Path) -> None:
    (repo / "memidex.toml").write_text("")
    write_record(repo, make_record())
    out = run_cli(repo, "knowledge", "search", "place")
    assert out.returncode == 2
    assert out.stderr.startswith("error: no product")
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("query", ['"place', "place -order", "anchor:place", "plac*", "(place",
                                   "place)", "NEAR(place order)", "AND", "a OR", "'", "--",
                                   "el:button:place-order", "^place", "\u00e9t\u00e9 \u2014 ok"])
def test_fts_syntax_in_queries_never_crashes(repo: Path, query: str) -> None:
    write_record(repo, make_record())
    assert main(["--root", str(repo), "knowledge", "rebuild-index", "--json"]) == 0
    assert main(["--root", str(repo), "knowledge", "search", query, "--json"]) == 0


def test_nothing_matches_is_an_answer_not_an_error(repo: Path) -> None:
    write_record(repo, make_record())
    run_cli(repo, "knowledge", "rebuild-index", check=True)
    out = run_cli(repo, "knowledge", "search", "xylophone")
    assert out.returncode == 0
    assert "no records match" in out.stdout
    data = json.loads(run_cli(repo, "knowledge", "search", "xylophone", "--json").stdout)
    assert data["results"] == []


def test_edit_on_disk_is_visible_without_a_rebuild(repo: Path) -> None:
    _hand_written_repo(repo)
    run_cli(repo, "knowledge", "rebuild-index", check=True)
    path = repo / "agent-qa-knowledge/memory/records/fact/" \
                  "fact-el-button-place-order-97c05f92322716e0.md"
    path.write_text(path.read_text().replace("is ticked.", "is ticked. Marmalade."))
    data = json.loads(run_cli(repo, "knowledge", "search", "marmalade", "--json").stdout)
    assert [r["id"] for r in data["results"]] == ["fact-el-button-place-order-97c05f92322716e0"]


def test_deleted_index_means_bundle_scan_and_search_still_answers(repo: Path) -> None:
    _hand_written_repo(repo)
    run_cli(repo, "knowledge", "rebuild-index", check=True)
    (repo / "agent-qa-knowledge/memory/index/memidex.sqlite").unlink()
    doc = run_cli(repo, "doctor", "--json")
    assert doc.returncode == 1
    report = json.loads(doc.stdout)
    assert report["level"] == "bundle-scan" and report["healthy"] is False
    assert set(report) >= {"healthy", "level", "index", "records", "lease"}
    data = json.loads(run_cli(repo, "knowledge", "search", "place order disabled", "--json",
                              check=True).stdout)
    assert data["level"] == "bundle-scan"
    assert data["results"][0]["id"] == "fact-el-button-place-order-97c05f92322716e0"


def test_malformed_record_is_named_others_served_file_untouched(repo: Path) -> None:
    _hand_written_repo(repo)
    bad = repo / "agent-qa-knowledge/memory/records/fact/fact-broken.md"
    content = b"---\nid: fact-broken\nkind: fact\nstatus: [active\n---\nbody\n"
    bad.write_bytes(content)
    out = run_cli(repo, "knowledge", "check")
    assert out.returncode == 1
    assert "agent-qa-knowledge/memory/records/fact/fact-broken.md:" in out.stdout
    assert out.stderr.startswith("error: ")
    run_cli(repo, "knowledge", "rebuild-index", check=True)
    data = json.loads(run_cli(repo, "knowledge", "search", "place order", "--json",
                              check=True).stdout)
    assert data["results"]
    doc = json.loads(run_cli(repo, "doctor", "--json").stdout)
    assert [e["path"] for e in doc["records"]["errors"]] == [
        "agent-qa-knowledge/memory/records/fact/fact-broken.md"]
    assert bad.read_bytes() == content


def test_check_rejects_an_id_that_does_not_match_content(repo: Path) -> None:
    text = HAND_WRITTEN.replace("product: shop-web", "product: shop-mobile")
    path = repo / "agent-qa-knowledge/memory/records/fact/" \
                  "fact-el-button-place-order-97c05f92322716e0.md"
    path.write_text(text)
    out = run_cli(repo, "knowledge", "check", "--format", "json")
    assert out.returncode == 1
    problems = json.loads(out.stdout)["errors"]
    assert problems[0]["line"] == 2
    assert "id does not match its content" in problems[0]["reason"]
    gh = run_cli(repo, "knowledge", "check", "--format", "github")
    assert gh.stdout.startswith("::error file=agent-qa-knowledge/memory/records/fact/")


def test_check_finds_duplicates_missing_relations_and_misplaced_files(repo: Path) -> None:
    from dataclasses import replace

    from memidex.records.codec import dump_record
    from memidex.records.model import Relations

    rec = replace(make_record(), relations=Relations(cites=("fact-gone-0000000000000000",)))
    write_record(repo, rec)
    (repo / "agent-qa-knowledge/memory/records/caution" / f"{rec.id}.md").write_text(
        dump_record(rec))
    report = json.loads(run_cli(repo, "knowledge", "check", "--format", "json").stdout)
    reasons = " | ".join(p["reason"] for p in report["errors"])
    assert "duplicate id" in reasons
    assert "fact-gone-0000000000000000" in reasons
    assert "belongs at" in reasons


def test_two_rebuilds_answer_identically(repo: Path) -> None:
    _hand_written_repo(repo)
    run_cli(repo, "knowledge", "rebuild-index", check=True)
    a = run_cli(repo, "knowledge", "search", "place order", "--all-products", "--json").stdout
    run_cli(repo, "knowledge", "rebuild-index", check=True)
    b = run_cli(repo, "knowledge", "search", "place order", "--all-products", "--json").stdout
    assert a == b


def test_show_by_prefix_list_and_add(repo: Path) -> None:
    _hand_written_repo(repo)
    shown = json.loads(run_cli(repo, "knowledge", "show", "fact-el-button-place-order-97",
                               "--json", check=True).stdout)
    assert shown["id"] == "fact-el-button-place-order-97c05f92322716e0"
    raw = run_cli(repo, "knowledge", "show", "fact-el-button-place-order-97c", "--raw").stdout
    assert raw == HAND_WRITTEN
    ambiguous = run_cli(repo, "knowledge", "show", "fact-")
    assert ambiguous.returncode == 2 and "matches" in ambiguous.stderr
    listed = json.loads(run_cli(repo, "knowledge", "list", "--json", check=True).stdout)
    assert listed["count"] == 4  # shop-web only
    added = run_cli(repo, "knowledge", "add", "--kind", "caution", "--anchor",
                    "el:list:suggestions", "--anchor", "test:search-suggestions", "--title",
                    "Suggestions are flaky on staging", "--body", "Wait for the list.", "--json",
                    check=True)
    result = json.loads(added.stdout)
    assert result["status"] == "active" and result["change"] == "added"
    again = json.loads(run_cli(repo, "knowledge", "add", "--kind", "caution", "--anchor",
                               "el:list:suggestions", "--title",
                               "Suggestions are flaky on staging", "--body",
                               "Wait for the list.", "--json", check=True).stdout)
    assert again["id"] == result["id"] and again["change"] == "unchanged"
    text = (repo / result["path"]).read_text()
    assert "source: human" in text and "test:search-suggestions" in text
    found = json.loads(run_cli(repo, "knowledge", "search", "flaky staging", "--json").stdout)
    assert found["results"][0]["id"] == result["id"]
    assert json.loads(run_cli(repo, "knowledge", "check", "--format", "json").stdout)["ok"]


def test_add_masks_secrets_and_rejects_bad_anchor(repo: Path) -> None:
    import os

    home = os.environ["HOME"]  # the isolated HOME the autouse fixture sets
    (repo / ".agent-qa/secrets.yaml").write_text("shop_password: hunter2-secret\n")
    out = run_cli(repo, "knowledge", "add", "--kind", "fact", "--anchor", "page:/login",
                  "--title", "Login with hunter2-secret works", "--body",
                  f"Typed hunter2-secret from {home}/creds.txt", "--json", check=True)
    text = (repo / json.loads(out.stdout)["path"]).read_text()
    assert "hunter2-secret" not in text and "[secret:shop_password]" in text
    assert home not in text and "~/creds.txt" in text
    bad = run_cli(repo, "knowledge", "add", "--kind", "fact", "--anchor", "../../etc",
                  "--title", "x")
    assert bad.returncode == 4 and bad.stderr.startswith("error: anchor")


def test_bad_config_is_a_one_line_error(repo: Path) -> None:
    (repo / "memidex.toml").write_text("product = [\n")
    out = run_cli(repo, "doctor")
    assert out.returncode == 4
    assert out.stderr.startswith("error: ") and "Traceback" not in out.stderr


def test_doctor_json_reports_health_and_c_loader(repo: Path) -> None:
    _hand_written_repo(repo)
    run_cli(repo, "knowledge", "rebuild-index", check=True)
    report = json.loads(run_cli(repo, "doctor", "--json", check=True).stdout)
    assert report["healthy"] is True and report["level"] == "lexical-only"
    assert report["index"]["quick_check"] == "skipped"  # O(N): only with --deep
    assert report["serving"] == {"path": "one-shot", "reason": report["serving"]["reason"]}
    deep = json.loads(run_cli(repo, "doctor", "--deep", "--json", check=True).stdout)
    assert deep["index"]["quick_check"] == "ok" and deep["healthy"] is True
    from memidex.index.schema import SCHEMA_VERSION

    assert report["index"]["schema_version"] == SCHEMA_VERSION
    assert report["records"] == {"count": 5, "errors": []}
    assert report["yaml"]["c_loader"] is True
    assert report["levels"]["memidex"].startswith("no full model (ONNX) in the model cache")


def test_bundled_examples_pass_check() -> None:
    from conftest import REPO_ROOT

    out = run_cli(REPO_ROOT, "knowledge", "check", "--format", "json")
    assert out.returncode == 0, out.stdout
    report = json.loads(out.stdout)
    assert report["records"] >= 40 and report["policies"] == 3
