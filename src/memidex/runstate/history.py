"""What the run store says about past runs: ``runs list``, ``runs show`` and
``knowledge diff TAG`` (SPEC §7, ``docs/learning.md``). Read-only."""

from __future__ import annotations

from typing import Any

from memidex.config import Config
from memidex.errors import NotFoundError, UsageError
from memidex.runstate.ordinals import read_ordinals
from memidex.runstate.store import RunStore

__all__ = ["DIFF_OPS", "diff", "list_runs", "show_run"]

DIFF_OPS = {"add": "added", "unknown": "added", "confirm": "confirmed",
            "supersede": "superseded", "deprecate": "deprecated"}
"""How a run's change ops read in ``knowledge diff``: a raised unknown is an addition."""


def list_runs(config: Config, product: str | None) -> list[dict[str, Any]]:
    """One row per ingested run (of ``product``), in ordinal order."""
    out = []
    for r in RunStore(config).results(product):
        ops: dict[str, int] = {}
        for op, _rid in r.changes:
            ops[op] = ops.get(op, 0) + 1
        out.append({"run_id": r.run_id, "product": r.product, "ordinal": r.ordinal,
                    "build_tag": r.build_tag, "ci": r.ci, "verdicts": dict(r.verdicts),
                    "changes": dict(sorted(ops.items())), "proposals": len(r.proposals),
                    "done": r.done, "rolled_back": r.rolled_back})
    return out


def show_run(config: Config, run_id: str) -> dict[str, Any]:
    """The frozen run, its analysis and what its curation did."""
    runs = RunStore(config)
    raw = runs.raw(run_id)
    if raw is None:
        raise NotFoundError(f"no run {run_id} has been ingested",
                            hint="`memidex runs list` lists them")
    result = runs.result(run_id)
    run = raw.get("run") or {}
    analysis = raw.get("analysis") or {}
    tests = []
    for t in run.get("tests") or ():
        failure = t.get("failure") or {}
        served = sorted({rid for s in t.get("steps") or () for rid in
                         s.get("served_records") or ()})
        tests.append({"test_id": t.get("test_id"), "verdict": t.get("verdict"),
                      "cause": analysis.get(t.get("test_id")),
                      "failure": (failure.get("message") or "").split("\n", 1)[0] or None,
                      "steps": len(t.get("steps") or ()), "served_records": served})
    return {"run_id": run_id, "product": raw.get("product"), "ordinal": raw.get("ordinal"),
            "build_tag": raw.get("build_tag"), "ci": bool(raw.get("ci")),
            "digest": raw.get("digest"), "path": _rel(config, runs.path(run_id)),
            "tests": tests,
            "changes": [{"op": op, "id": rid} for op, rid in (result.changes if result
                                                               else ())],
            "proposals": list(result.proposals) if result else [],
            "done": bool(result and result.done),
            "rolled_back": bool(result and result.rolled_back),
            "notes": list(result.notes) if result else []}


def _rel(config: Config, path: Any) -> str:
    try:
        return str(path.relative_to(config.root).as_posix())
    except ValueError:
        return str(path)


def diff(config: Config, tag: str, product: str) -> dict[str, Any]:
    """What runs added, confirmed, superseded and deprecated since build ``tag``'s first
    ordinal (runs rolled back left out); each a sorted list of record ids."""
    builds = (read_ordinals(config).get(product) or {}).get("builds") or {}
    if tag not in builds:
        known = ", ".join(sorted(builds, key=lambda t: builds[t])) or "none yet"
        raise UsageError(f"no run of {product} used build tag {tag!r}",
                         hint=f"build tags of {product}: {known}")
    since = int(builds[tag])
    out: dict[str, set[str]] = {v: set() for v in DIFF_OPS.values()}
    runs = []
    for r in RunStore(config).results(product):
        if r.ordinal < since or not r.done or r.rolled_back:
            continue
        runs.append(r.run_id)
        for op, rid in r.changes:
            key = DIFF_OPS.get(op)
            if key is not None:
                out[key].add(rid)
    return {"tag": tag, "product": product, "since_ordinal": since, "runs": runs,
            **{k: sorted(v) for k, v in out.items()}}
