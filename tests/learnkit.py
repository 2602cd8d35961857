"""Helpers the learning tests share: runs written in the evidence format, the facade's
ingest as JSON, record loading, the example runs (imported by the test modules; never a
test module itself)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import REPO_ROOT, run_cli
from memidex.app import Memidex
from memidex.records.codec import parse_record_bytes
from memidex.records.ids import record_id
from memidex.records.model import Record

EXAMPLES = REPO_ROOT / "examples/runs"
SCHEMAS = REPO_ROOT / "docs/schemas"
RECORDS = "agent-qa-knowledge/memory/records"
PRODUCT = "shop-web"

# --- helpers (shared) ---------------------------------------------------------------------


def step(index: int, target: str | None, observed: str | None = None, *,
         kind: str | None = "assert-text", passed: bool = True,
         anchors: tuple[str, ...] = ("page:/x",), **extra: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"index": index, "action": "assert", "anchors": list(anchors)}
    if target is not None:
        s["target"] = target
    if observed is not None:
        s["observed"] = observed
    if kind is not None:
        s["check"] = {"kind": kind, "passed": passed}
    s.update(extra)
    return s


def a_test(test_id: str, steps: list[dict[str, Any]], verdict: str = "pass",
           failure: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    t: dict[str, Any] = {"test_id": test_id, "verdict": verdict, "steps": steps}
    if failure is not None:
        t["failure"] = failure
    t.update(extra)
    return t


def a_run(run_id: str, tests: list[dict[str, Any]], build: str | None = "v1",
          ci: bool | None = None, product: str = PRODUCT) -> dict[str, Any]:
    r: dict[str, Any] = {"run_id": run_id, "product": product, "tests": tests}
    if build is not None:
        r["build_tag"] = build
    if ci is not None:
        r["ci"] = ci
    return r


def write_run(where: Path, run: dict[str, Any], name: str | None = None) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    path = where / (name or f"{run['run_id']}.json")
    path.write_text(json.dumps(run, ensure_ascii=False), encoding="utf-8")
    return path


def ingest(root: Path, run: dict[str, Any] | Path, **kw: Any) -> dict[str, Any]:
    """Ingest through the library facade; the --json result as a dict."""
    path = run if isinstance(run, Path) else write_run(root.parent / "runs-in", run)
    with Memidex(root) as m:
        return m.ingest(path, **kw).to_json()


def cli_json(root: Path, *args: str, code: int = 0) -> dict[str, Any]:
    out = run_cli(root, *args, "--json")
    assert out.returncode == code, f"memidex {' '.join(args)} -> {out.returncode}\n{out.stderr}"
    assert "Traceback" not in out.stderr
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def learned_repo(root: Path, run: str = "r-0051") -> Path:
    """A fresh git repository at ``root`` (memidex init, product shop-web) that learned the
    example run ``run``."""
    from conftest import git
    from memidex.store.layout import init_repository

    root.mkdir(parents=True)
    git(root, "init", "-q")
    init_repository(root)
    (root / "memidex.toml").write_text('product = "shop-web"\n', encoding="utf-8")
    ingest(root, example(run))
    return root


def example(name: str) -> Path:
    return EXAMPLES / f"{name}.json"


def records(root: Path) -> dict[str, bytes]:
    """Every record file's bytes, by path under records/."""
    base = root / RECORDS
    return {p.relative_to(base).as_posix(): p.read_bytes() for p in sorted(base.rglob("*.md"))}


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under the repository (but .git), by relative path."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if rel.parts[0] == ".git" or not p.is_file():
            continue
        out[rel.as_posix()] = p.read_bytes()
    return out


def changed(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def load(root: Path, rid: str) -> Record:
    kind = rid.split("-", 1)[0]
    path = root / RECORDS / kind / f"{rid}.md"
    return parse_record_bytes(path.read_bytes(), path.name)


def all_records(root: Path) -> list[Record]:
    return [load(root, Path(rel).stem) for rel in records(root)]


def fact_id(anchor: str, aspect: str, product: str = PRODUCT, **scope: str) -> str:
    return record_id("fact", anchor, product, {"aspect": aspect, **scope})


def ops(result: dict[str, Any]) -> dict[str, str]:
    """record id -> op of an ingest result."""
    return {c["id"]: c["op"] for c in result["changes"]}


def error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("error:")]


def validate(doc: Any, schema: str) -> None:
    import jsonschema

    spec = json.loads((SCHEMAS / f"{schema}.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(doc, spec, cls=jsonschema.Draft202012Validator)


def set_config(root: Path, extra: str) -> None:
    (root / "memidex.toml").write_text(f'product = "{PRODUCT}"\n{extra}', encoding="utf-8")


# Runs used by several tests: a checkout test (a button and a checkbox) and a search test.
def checkout(run_id: str, *, build: str = "v1", place_order: str = "disabled",
             ci: bool | None = None, search: str = "pass") -> dict[str, Any]:
    kind = "assert-disabled" if place_order == "disabled" else "assert-enabled"
    tests = [a_test("checkout", [
        step(0, "el:button:place-order", f"Place order ({place_order})", kind=kind,
             anchors=("page:/checkout",)),
        step(1, "el:checkbox:terms", "I accept the terms", kind="assert-checked",
             anchors=("page:/checkout",)),
    ])]
    if search == "pass":
        tests.append(a_test("search", [step(0, "el:list:suggestions", "8 suggestions after "
                                            "620 ms", kind="assert-visible",
                                            anchors=("page:/search",))]))
    elif search == "flaky":
        tests.append(a_test("search", [
            step(0, "el:input:search", "Search", kind="assert-visible", anchors=("page:/",)),
            step(1, "el:list:suggestions", None, kind="assert-visible", passed=False,
                 anchors=("page:/search",), error="TimeoutError: Timeout 1000ms exceeded")],
            verdict="fail", failure={"message": "TimeoutError: Timeout 1000ms exceeded",
                                     "hint": "flaky", "step": 1}))
    return a_run(run_id, tests, build=build, ci=ci)


PLACE_ORDER = fact_id("el:button:place-order", "enabled")
TERMS = fact_id("el:checkbox:terms", "checked")



def write_secrets(root: Path, secrets: dict[str, str]) -> None:
    (root / ".agent-qa").mkdir(exist_ok=True)
    (root / ".agent-qa/secrets.yaml").write_text(
        "".join(f"{k}: {json.dumps(v)}\n" for k, v in secrets.items()), encoding="utf-8")


def leaks(root: Path, secrets: dict[str, str]) -> list[str]:
    """Every (file, secret) where a secret's bytes occur in a file under the repository,
    the secrets file itself aside."""
    found = []
    for rel, data in snapshot(root).items():
        if rel == ".agent-qa/secrets.yaml":
            continue
        for name, value in secrets.items():
            for form in {value.encode("utf-8"), json.dumps(value).strip('"').encode()}:
                if form in data:
                    found.append(f"{rel}: {name}")
    return sorted(set(found))



def init_repo(root: Path) -> Path:
    import subprocess

    from memidex.store.layout import init_repository

    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    init_repository(root)
    set_config(root, "")
    return root
