"""Knowledge that stays true when the app moves on (docs/learning.md, "What a failed check
teaches"): each rule on run evidence, through the library facade and a real repository.

- a failed check that says what the app shows closes the fact it contradicts; a failure
  never promotes what it observed (a bug is never learned as a fact);
- an element no longer found retires its fact after ``retire_after_failures`` failures;
- failures are correlated within a run: an outage is ``environment``, never ``flaky``;
- an unknown is resolved once its test passed ``resolve_after_runs`` runs in a row;
- a procedure is not served while its test fails for an app's or the test's cause, and a
  fact its test no longer reaches is not served;
- a caution from the runner's own retries is served at once;
- build order, not ingest order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from learnkit import PRODUCT, a_run, a_test, fact_id, ingest, load, ops, step
from memidex.app import Memidex
from memidex.records.ids import record_id


def total(run_id: str, shows: str, *, expected: str | None = None, build: str = "v1",
          extra: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A cart test that checks the total (passing when ``expected`` is None)."""
    if expected is None:
        tests = [a_test("cart", [step(0, "el:testid:total", shows, anchors=("page:/cart",))])]
    else:
        failed = step(0, "el:testid:total", shows, passed=False, anchors=("page:/cart",))
        failed["check"]["expected"] = expected
        tests = [a_test("cart", [failed], verdict="fail", failure={
            "message": f"expect(locator).toHaveText(expected) failed | Expected: {expected}"
                       f" | Received: {shows} | Timeout: 3000ms", "step": 0})]
    return a_run(run_id, tests + (extra or []), build=build)


TOTAL = fact_id("el:testid:total", "text")


def brief_ids(root: Path, test: str = "cart") -> list[str]:
    with Memidex(root) as m:
        return [r.id for r in m.brief(test, record=False, anchors=["page:/cart"]).records]


def test_a_failed_check_closes_the_fact_and_a_bug_is_never_learned(repo: Path) -> None:
    for n in (1, 2):
        ingest(repo, total(f"r-{n}", "Total: €37.00"))
    assert load(repo, TOTAL).status == "active" and TOTAL in brief_ids(repo)
    # the app shows another total: an app bug; the old claim is no longer served at once
    out = ingest(repo, total("r-3", "Total: €12.00", expected="Total: €37.00", build="v2"))
    assert out["analysis"] == {"cart": "app-bug"}
    assert ops(out)[TOTAL] == "supersede"
    fact = load(repo, TOTAL)
    assert (fact.status, fact.trust.confirmations, fact.valid.from_) == ("candidate", 0, 3)
    assert fact.history[-1].valid.until == 3
    assert TOTAL not in brief_ids(repo)
    unknown = next(c for c in out["changes"] if c["op"] == "unknown")
    assert unknown["contradicts"] == [TOTAL]
    # the same failure again and again: still never confirmed, never served
    for n in (4, 5, 6):
        again = ingest(repo, total(f"r-{n}", "Total: €12.00", expected="Total: €37.00",
                                   build="v2"))
        assert ops(again).get(TOTAL, "noop") == "noop"
    assert load(repo, TOTAL).trust.confirmations == 0 and TOTAL not in brief_ids(repo)
    # fixed: the passing check brings the true claim back, confirmed by passing runs only
    fixed = ingest(repo, total("r-7", "Total: €37.00", build="v3"))
    assert ops(fixed)[TOTAL] == "supersede"
    ingest(repo, total("r-8", "Total: €37.00", build="v3"))
    back = load(repo, TOTAL)
    assert back.status == "active" and "37.00" in back.title


def test_an_observing_test_and_a_failing_check_on_one_element_teach_no_bug(
        repo: Path) -> None:
    observer = a_test("inventory", [step(0, "el:testid:total", "Total: €37.00",
                                         anchors=("page:/cart",))])
    for n in (1, 2):
        ingest(repo, total(f"r-{n}", "Total: €37.00", extra=[observer]))
    buggy = a_test("inventory", [step(0, "el:testid:total", "Total: €12.00",
                                      anchors=("page:/cart",))])
    for n in (3, 4, 5):
        ingest(repo, total(f"r-{n}", "Total: €12.00", expected="Total: €37.00", build="v2",
                           extra=[buggy]))
    fact = load(repo, TOTAL)
    assert fact.status == "candidate" and fact.trust.confirmations == 0
    assert TOTAL not in brief_ids(repo) and TOTAL not in brief_ids(repo, "inventory")


def test_an_element_that_is_gone_retires_its_fact(repo: Path) -> None:
    badge = fact_id("el:testid:badge", "visible")
    ok = a_run("r-1", [a_test("home", [step(0, "el:testid:badge", "New",
                                            kind="assert-visible")])])
    ingest(repo, ok)
    ingest(repo, {**ok, "run_id": "r-2"})
    assert load(repo, badge).status == "active"

    def gone(run_id: str) -> dict[str, Any]:
        s = step(0, "el:testid:badge", None, kind="assert-visible", passed=False)
        s["check"]["not_found"] = True
        return a_run(run_id, [a_test("home", [s], verdict="fail", failure={
            "message": "expect(locator).toBeVisible() failed | Received: <element(s) not "
                       "found>", "step": 0})], build="v2")

    first = ingest(repo, gone("r-3"))
    assert first["analysis"] == {"home": "unknown"}  # a slow page and a gone element look alike
    assert load(repo, badge).status == "active"
    second = ingest(repo, gone("r-4"))
    assert ops(second)[badge] == "deprecate" and load(repo, badge).status == "deprecated"


def test_an_outage_is_environment_never_flaky(repo: Path) -> None:
    api = a_test("api-rates", [step(0, "api:/api/shipping-rates", "200",
                                    kind="assert-status")])
    ui = a_test("checkout", [step(0, "el:field:shipping-method", "Standard",
                                  kind="assert-value", anchors=("api:/api/shipping-rates",
                                                                "page:/checkout"))])
    for n in (1, 2):
        ingest(repo, a_run(f"r-{n}", [api, ui]))  # both passed on v1 before
    down_api = a_test("api-rates", [step(0, None, None, kind="assert-ok", passed=False)],
                      verdict="fail", failure={"message": "expect(response).toBeOK() failed"
                                               " | ← 503 Service Unavailable", "step": 0})
    down_ui = a_test("checkout", [step(0, "el:field:shipping-method", "", kind="assert-value",
                                       passed=False, anchors=("page:/checkout",))],
                     verdict="fail", failure={"message": "expect(locator).toHaveValue() "
                                              "failed | Timeout: 3000ms", "step": 0})
    out = ingest(repo, a_run("r-3", [down_api, down_ui]))
    assert out["analysis"] == {"api-rates": "environment", "checkout": "environment"}
    shipping = fact_id("el:field:shipping-method", "value")
    assert load(repo, shipping).status == "active"  # an outage changes no belief
    cautions = [load(repo, rid) for rid in ops(out) if rid.startswith("caution-")]
    assert cautions and not any("flaky" in c.title for c in cautions)
    with Memidex(repo) as m:
        run = m.run(out["run_id"])
    assert {t.test_id: t.cause for t in run.tests if t.cause} == out["analysis"]


def test_a_correlated_failure_is_cautioned_about_the_outage_not_its_own_element(
        repo: Path) -> None:
    """A UI test failing only because an API is down gets the outage's caution (about
    what the API test's error names, with the UI test among its anchors), never a
    caution about its own element or page: those work, the API did not."""
    api = a_test("api-rates", [step(0, "api:/api/shipping-rates", "200",
                                    kind="assert-status")])
    ui = a_test("checkout", [step(0, "el:field:shipping-method", "Standard",
                                  kind="assert-value", anchors=("page:/checkout",))])
    for n in (1, 2):
        ingest(repo, a_run(f"r-{n}", [api, ui]))
    down_api = a_test("api-rates", [step(0, "api:/api/shipping-rates", None,
                                         kind="assert-status", passed=False)],
                      verdict="fail", failure={"message": "expect(response).toBeOK() failed"
                                               " | ← 503 Service Unavailable", "step": 0})
    empty = step(0, "el:field:shipping-method", "", kind="assert-value", passed=False,
                 anchors=("page:/checkout",))
    down_ui = a_test("checkout", [empty], verdict="fail", failure={
        "message": "expect(locator).toHaveValue() failed | Timeout: 3000ms", "step": 0})
    out = ingest(repo, a_run("r-3", [down_api, down_ui]))
    assert out["analysis"] == {"api-rates": "environment", "checkout": "environment"}
    cautions = [load(repo, rid) for rid in ops(out) if rid.startswith("caution-")]
    assert [c.anchor for c in cautions] == ["api:/api/shipping-rates"], cautions
    assert "test:checkout" in cautions[0].anchors
    assert not any(c.anchor in ("el:field:shipping-method", "page:/checkout")
                   for c in cautions)


def test_an_unknown_is_resolved_after_two_passing_runs(repo: Path) -> None:
    for n in (1, 2):
        ingest(repo, total(f"r-{n}", "Total: €37.00"))
    out = ingest(repo, total("r-3", "Total: €12.00", expected="Total: €37.00", build="v2"))
    (unknown,) = [c["id"] for c in out["changes"] if c["op"] == "unknown"]
    ingest(repo, total("r-3b", "Total: €12.00", expected="Total: €37.00", build="v2"))
    assert load(repo, unknown).status == "active" and unknown in brief_ids(repo)
    ingest(repo, total("r-4", "Total: €37.00", build="v3"))
    assert load(repo, unknown).status in ("candidate", "active")
    resolved = ingest(repo, total("r-5", "Total: €37.00", build="v3"))
    assert ops(resolved)[unknown] == "resolve"
    assert load(repo, unknown).status == "deprecated" and unknown not in brief_ids(repo)
    with Memidex(repo) as m:
        assert unknown in m.diff("v3").resolved


def test_a_procedure_is_withheld_while_its_test_fails(repo: Path) -> None:
    steps = [step(0, "el:button:pay", "Pay", kind="assert-enabled", title="pay the order"),
             step(1, "page:/done", "/done", kind="assert-url", title="see the receipt")]
    passing = a_run("r-1", [a_test("pay", steps)])
    ingest(repo, passing)
    ingest(repo, {**passing, "run_id": "r-2"})
    proc = record_id("procedure", "test:pay", PRODUCT, {})
    assert load(repo, proc).status == "active"
    assert "1. pay the order" in load(repo, proc).body  # the test.step titles, not "1. step"
    with Memidex(repo) as m:
        assert proc in [r.id for r in m.brief("pay", record=False).records]
    failing = a_run("r-3", [a_test("pay", [steps[0], step(
        1, "page:/done", "/error", kind="assert-url", passed=False)], verdict="fail",
        failure={"message": "expect(page).toHaveURL(expected) failed", "step": 1})], build="v2")
    ingest(repo, failing)
    with Memidex(repo) as m:
        b = m.brief("pay", record=False)
    assert proc not in [r.id for r in b.records] and proc in b.withheld["test_failing"]
    ingest(repo, {**passing, "run_id": "r-4", "build_tag": "v3"})
    with Memidex(repo) as m:
        assert proc in [r.id for r in m.brief("pay", record=False).records]


def test_a_fact_its_test_no_longer_reaches_is_not_served(repo: Path) -> None:
    old = a_run("r-1", [a_test("login", [step(0, "el:button:sign-in", "Sign in",
                                              kind="assert-enabled", anchors=("page:/login",))])])
    ingest(repo, old)
    ingest(repo, {**old, "run_id": "r-2"})
    sign_in = fact_id("el:button:sign-in", "enabled")
    assert sign_in in brief_ids(repo, "login")
    renamed = a_run("r-3", [a_test("login", [step(0, "el:button:log-in", "Log in",
                                                  kind="assert-enabled",
                                                  anchors=("page:/login",))])], build="v2")
    ingest(repo, renamed)
    with Memidex(repo) as m:
        b = m.brief("login", record=False, anchors=["page:/login"])
    assert sign_in not in [r.id for r in b.records] and sign_in in b.withheld["not_reached"]


def test_a_caution_from_the_runners_retries_is_served_at_once(repo: Path) -> None:
    slow = step(0, "el:testid:popular", "", passed=False)
    flaky = a_run("r-1", [a_test("popular", [slow], verdict="pass", flaky=True,
                                 failure={"message": "Timed out 5000ms waiting for expect("
                                          "locator).toHaveText(expected)", "step": 0})])
    out = ingest(repo, flaky)
    (caution,) = [rid for rid in ops(out) if rid.startswith("caution-")]
    assert load(repo, caution).status == "active"
    assert caution in brief_ids(repo, "popular")


def test_a_run_of_an_older_build_never_rewrites_what_a_newer_build_confirmed(
        repo: Path) -> None:
    for n, build in ((1, "v1"), (2, "v1")):
        ingest(repo, total(f"r-{n}", "Total: €37.00", build=build))
    for n in (3, 4):
        ingest(repo, total(f"r-{n}", "Total: €39.00", build="v2"))  # v2 changed the price
    newer = load(repo, TOTAL)
    assert "39.00" in newer.title and newer.status == "active"
    # a release branch's CI runs v1 again, after v2: it shows the old price
    late = ingest(repo, total("r-5", "Total: €37.00", build="v1"))
    assert ops(late).get(TOTAL, "noop") == "noop"
    assert load(repo, TOTAL) == newer
    assert any("an older build does not rewrite it" in n for n in late["notes"])
