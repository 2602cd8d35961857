"""``knowledge search --near ANCHOR`` (issue 12, item 5): anchor overlap ranks with BM25,
and each result says why — from the index and from the bundle scan alike."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import make_record, run_cli, write_record
from memidex.cli.fast import SearchArgs, parse_fast


def _seed(repo: Path) -> tuple[str, str]:
    far = make_record(anchor="el:banner:cookie", title="Cookie banner cookie cookie",
                      body="The cookie banner covers the footer.")
    near = make_record(anchor="el:banner:cookie-consent", title="Cookie consent",
                       anchors=("page:/checkout",), body="A banner on checkout.")
    write_record(repo, far)
    write_record(repo, near)
    return far.id, near.id


def _ids(out: str) -> list[dict[str, object]]:
    return list(json.loads(out)["results"])


def test_near_ranks_by_overlap_and_bm25(repo: Path) -> None:
    far, near = _seed(repo)
    run_cli(repo, "knowledge", "rebuild-index", check=True)
    plain = _ids(run_cli(repo, "knowledge", "search", "cookie", "--json", check=True).stdout)
    assert [h["id"] for h in plain] == [far, near] and "reasons" not in plain[0]
    hits = _ids(run_cli(repo, "knowledge", "search", "cookie", "--near", "page:/checkout",
                        "--json", check=True).stdout)
    assert [h["id"] for h in hits] == [near, far]
    top = hits[0]["reasons"]
    assert isinstance(top, dict)
    assert top["shared"] == ["page:/checkout"] and top["overlap"] == 1 and top["rank"] == 1
    assert top["score"] == round(float(top["bm25"]) * 2, 6)
    prefix = _ids(run_cli(repo, "knowledge", "search", "cookie", "--near", "page:/che*",
                          "--json", check=True).stdout)
    assert [h["id"] for h in prefix] == [near, far]
    # the bundle scan (no index) ranks the same way
    (repo / "agent-qa-knowledge/memory/index/memidex.sqlite").unlink()
    scan = json.loads(run_cli(repo, "knowledge", "search", "cookie", "--near",
                              "page:/checkout", "--json", check=True).stdout)
    assert scan["level"] == "bundle-scan"
    assert [h["id"] for h in scan["results"]] == [near, far]


def test_near_takes_the_fast_path_and_refuses_a_malformed_anchor(repo: Path) -> None:
    args = parse_fast(["knowledge", "search", "x", "--near", "page:/a", "--near=el:b"])
    assert isinstance(args, SearchArgs) and args.near == ["page:/a", "el:b"]
    out = run_cli(repo, "knowledge", "search", "x", "--near", "NoType")
    assert out.returncode == 2 and "malformed --near anchor" in out.stderr
