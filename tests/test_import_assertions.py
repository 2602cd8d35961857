"""The failed-assertion table (docs/import.md, "What a failed assertion says"): one test per
row, on real message text.

Where the text comes from (taken verbatim; ANSI escapes are in the report files and
stripped by the importer as for any report):

- the real reports in tests/data/reports and tests/data/ctrf (read from the files);
- Playwright's own test expectations, microsoft/playwright at
  d4e1023f6c03a8dced50eb3db88c2217e7c1a86a: tests/page/expect-boolean.spec.ts,
  expect-misc.spec.ts, expect-to-have-text.spec.ts, expect-timeout.spec.ts;
- playwright-python at 154f67ced51ada646b0fcf8574897d96c9712aa3:
  playwright/_impl/_assertions.py (the message format ``f"{message} '{expected}'\\nActual
  value: {actual}{error_message} {call_log}"``) and tests/sync/test_assertions.py;
- Playwright's ``error-context.md`` files committed in public repositories:
  jandornig/lordlyfe (test-results/matchmaking-should-allow-user-to-enter-name-and-
  create-room-chromium/error-context.md), fbal98/simple-id-generator (test-results/
  id-generation-ID-Generatio-f5bfa-te-button-during-generation-chromium/error-context.md),
  Samija123/TasteLab (test-results/tests-backend-userProfile--32f9d-and-updates-mocked-
  backend-/error-context.md), promanowicz/tendevx (test-results/vue-visits-the-app-root-
  url-firefox/error-context.md);
- JUnit 4's ``Assert.assertEquals`` (``expected:<X> but was:<Y>``), JUnit 5's
  ``AssertionFailedError`` (``expected: <X> but was: <Y>``) and TestNG's ``expected [X]
  but found [Y]`` message formats.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import REPO_ROOT
from memidex.evidence import validate_run
from memidex.importers import import_report
from memidex.importers.assertions import Assertion, kind_of, parse_assertion
from memidex.importers.common import strip_ansi

REPORTS = REPO_ROOT / "tests/data/reports"
CTRF = REPO_ROOT / "tests/data/ctrf"


def _errors(path: Path) -> list[str]:
    """Every error message of a Playwright JSON or CTRF report, escapes stripped."""
    data = json.loads(path.read_text(encoding="utf-8"))
    out: list[str] = []
    if "results" in data:
        return [strip_ansi(t["message"]) for t in data["results"]["tests"] if t.get("message")]
    stack = list(data["suites"])
    while stack:
        suite = stack.pop()
        stack.extend(suite.get("suites", []))
        for spec in suite.get("specs", []):
            for test in spec["tests"]:
                for result in test["results"]:
                    out.extend(strip_ansi(e["message"]) for e in result.get("errors", []))
    return out


def _real(path: Path, starts: str) -> str:
    return next(e for e in _errors(path) if e.startswith(starts))


BUEROKRATT = REPORTS / "playwright-buerokratt-TDD-Playwright.json"
JAY = REPORTS / "playwright-jay-UT-utis-playwright-framework.json"
RWX = REPORTS / "playwright-rwx-research-captain.json"
PTRCJA = CTRF / "playwright-ptrcja-flaky-test-project-playwright.json"


def _row(text: str, **want: Any) -> None:
    got = parse_assertion(text)
    assert got is not None, text
    for key, value in want.items():
        assert getattr(got, key) == value, (key, getattr(got, key), value)


# -- one test per row of the matcher table ------------------------------------------------


def test_to_be_visible_timed_out_and_not_found_playwright_1_48() -> None:
    text = _real(BUEROKRATT, "Error: Timed out 5000ms waiting for expect(locator).toBeVisible"
                             "()\n\nLocator: locator('label")
    _row(text, kind="assert-visible", expected="visible", observed=None, not_found=True,
         timeout_ms=5000,
         locator="""locator('label:has-text("Widget bubble message seconds") + """
                 """input[type="number"]')""")


def test_not_to_be_visible_is_assert_hidden() -> None:
    text = _real(BUEROKRATT, "Error: expect(locator).not.toBeVisible()")
    _row(text, kind="assert-hidden", expected="hidden", observed="visible", not_found=False,
         timeout_ms=5000)


def test_to_be_visible_not_found_ctrf_playwright() -> None:
    text = _real(PTRCJA, "Error: Timed out 5000ms waiting for expect(locator).toBeVisible()")
    _row(text, kind="assert-visible", not_found=True,
         locator="getByRole('link', { name: 'VIEW ALL COFFEES' })")


def test_not_to_be_hidden_with_element_not_found_today() -> None:
    # expect-boolean.spec.ts:470
    text = ("expect(locator).not.toBeHidden() failed\n\nLocator: locator('button')\n"
            "Expected: not hidden\nTimeout: 1000ms\nError: element(s) not found\n\n"
            "Call log:\n  - Expect \"not toBeHidden\" with timeout 1000ms\n")
    _row(text, kind="assert-visible", not_found=True, observed=None, timeout_ms=1000,
         locator="locator('button')")


def test_to_be_enabled() -> None:
    # jandornig/lordlyfe error-context.md
    text = ("Error: Timed out 5000ms waiting for expect(locator).toBeEnabled()\n\n"
            "Locator: getByTestId('create-room-button')\nExpected: enabled\n"
            "Received: disabled\nCall log:\n  - expect.toBeEnabled with timeout 5000ms\n"
            "  - waiting for getByTestId('create-room-button')\n")
    _row(text, kind="assert-enabled", expected="enabled", observed="disabled",
         timeout_ms=5000, locator="getByTestId('create-room-button')")


def test_to_be_disabled() -> None:
    # fbal98/simple-id-generator error-context.md
    text = ("Error: Timed out 5000ms waiting for expect(locator).toBeDisabled()\n\n"
            "Locator: locator('#generateButton')\nExpected: disabled\nReceived: enabled\n"
            "Call log:\n  - expect.toBeDisabled with timeout 5000ms\n"
            "  - waiting for locator('#generateButton')\n")
    _row(text, kind="assert-disabled", expected="disabled", observed="enabled")


def test_to_be_checked_and_its_options_and_not() -> None:
    # expect-boolean.spec.ts:58, :83, :97
    _row("expect(locator).toBeChecked() failed\n\nLocator:  locator('input')\nExpected: "
         "checked\nReceived: unchecked\nTimeout:  1000ms", kind="assert-checked",
         observed="unchecked", timeout_ms=1000, locator="locator('input')")
    _row("expect(locator).not.toBeChecked() failed\n\nLocator:  locator('input')\nExpected: "
         "not checked\nReceived: checked\nTimeout:  1000ms", kind="assert-unchecked",
         observed="checked")
    _row("expect(locator).toBeChecked({ checked: false }) failed\n\nLocator:  "
         "locator('input')\nExpected: unchecked\nReceived: checked\nTimeout:  1000ms",
         kind="assert-unchecked")


def test_to_have_value() -> None:
    # Samija123/TasteLab error-context.md
    text = ("Error: Timed out 10000ms waiting for expect(locator).toHaveValue(expected)\n\n"
            "Locator: getByLabel('First Name')\nExpected string: \"Samija\"\n"
            "Received: <element(s) not found>\nCall log:\n  - expect.toHaveValue with "
            "timeout 10000ms\n  - waiting for getByLabel('First Name')\n")
    _row(text, kind="assert-value", expected="Samija", observed=None, not_found=True,
         timeout_ms=10000, locator="getByLabel('First Name')")


def test_to_have_url_literal_and_pattern() -> None:
    # expect-misc.spec.ts:353
    _row("expect(page).toHaveURL(expected) failed\n\nExpected: \"wrong\"\nReceived: "
         "\"data:text/html,<div>A</div>\"\nTimeout:  1000ms\n\nCall log:\n",
         kind="assert-url", expected="wrong", observed="data:text/html,<div>A</div>",
         page=True, url="wrong", locator=None)
    text = _real(PTRCJA, "Error: Timed out 5000ms waiting for expect(page).toHaveURL")
    _row(text, kind="assert-url", expected="/\\/products\\//",
         observed="https://friedhats.com/collections/coffees",
         url="https://friedhats.com/collections/coffees")  # a pattern: the page it showed


def test_to_have_count() -> None:
    # expect-misc.spec.ts:70, :83
    _row("expect(locator).toHaveCount(expected) failed\n\nLocator:  locator('span')\n"
         "Expected: 0\nReceived: 1\nTimeout:  1000ms", kind="assert-count", expected="0",
         observed="1")
    _row("expect(locator).not.toHaveCount(expected) failed\n\nLocator:  locator('span')\n"
         "Expected: not 1\nReceived: 1\nTimeout:  1000ms", kind="assert-not-count",
         expected="1", observed="1")


def test_to_have_text() -> None:
    # promanowicz/tendevx error-context.md; expect-to-have-text.spec.ts:38;
    # expect-timeout.spec.ts:23
    _row("Error: Timed out 5000ms waiting for expect(locator).toHaveText(expected)\n\n"
         "Locator: locator('h1')\nExpected string: \"You did it!\"\nReceived string: "
         "\"Login\"\nCall log:\n  - expect.toHaveText with timeout 5000ms\n",
         kind="assert-text", expected="You did it!", observed="Login", timeout_ms=5000)
    _row("expect(locator).toHaveText(expected) failed\n\nLocator: locator('#node')\n"
         "Expected pattern: /Text 2/\nReceived string:  \"Text content\"\nTimeout: 1000ms\n\n"
         "Call log:\n", kind="assert-text", expected="/Text 2/", observed="Text content")
    _row("expect(locator).toHaveText(expected) failed\n\nLocator: locator('no-such-thing')\n"
         "Expected: \"hey\"\nTimeout: 1000ms\nError: element(s) not found\n\nCall log:\n",
         kind="assert-text", expected="hey", not_found=True, observed=None)


def test_to_contain_text_single_line_and_as_a_diff() -> None:
    # expect-to-have-text.spec.ts:80; the 1.58 report's multi-line diff
    _row("expect(locator).toContainText(expected) failed\n\nLocator: locator('#node')\n"
         "Expected substring: \"foo\"\nReceived string:    \"Text content\"\nTimeout: 1000ms",
         kind="assert-contains-text", expected="foo", observed="Text content")
    text = _real(JAY, "Error: expect(locator).toContainText(expected) failed")
    _row(text, kind="assert-contains-text", expected="Please enter valid Username/Password",
         timeout_ms=5000, observed=(
             "The username and/or password entered is incorrect,\nplease re-enter correct "
             "username or password.\nIf you enter incorrect user password three times,\n"
             "then your account will be locked and you will need to\nreset your password "
             "or contact support."))


def test_to_have_attribute_with_its_name_from_the_code_frame() -> None:
    # expect-misc.spec.ts:449, with a code frame line as Playwright prints it
    text = ("expect(locator).toHaveAttribute(expected) failed\n\nLocator: locator('#node')\n"
            "Expected pattern: /.*/\nReceived string:  \"\"\nTimeout: 1000ms\n\nCall log:\n"
            "\n\n> 12 |   await expect(page.locator('#node')).toHaveAttribute('aria-label', "
            "/.*/);\n")
    _row(text, kind="assert-attribute", expected="/.*/", observed="", attribute="aria-label")
    # the same without a code frame: the check, but no attribute name
    _row(text.split("\n\n> 12")[0], kind="assert-attribute", attribute=None)


def test_to_have_title_and_the_1_28_received_form() -> None:
    text = _real(RWX, "Error: expect(received).toHaveTitle(expected)")
    _row(text, kind="assert-title", expected="/asldkhjflkasjhdfkajhsdlfkjh/", page=True,
         observed="Fast and reliable end-to-end testing for modern web apps | Playwright")


def test_value_matchers_are_assert_equals() -> None:
    _row(_real(RWX, "Error: expect(received).toEqual(expected)"), kind="assert-equals",
         expected="2")
    _row(_real(BUEROKRATT, "Error: expect(received).toBe(expected)"), kind="assert-equals",
         expected="true", observed="false")


def test_any_other_matcher_is_named_by_its_words() -> None:
    assert kind_of("toBeFocused", False) == "assert-focused"
    assert kind_of("toBeFocused", True) == "assert-not-focused"
    assert kind_of("toHaveClass", False) == "assert-class"
    assert kind_of("toContainClass", True) == "assert-not-contains-class"
    assert kind_of("toHaveJSProperty", False) == "assert-jsproperty"
    # expect-misc.spec.ts:121
    _row("expect(locator).toHaveJSProperty(expected) failed\n\nLocator:  locator('div')\n"
         "Expected: \"error\"\nReceived: \"string\"\nTimeout:  200ms",
         kind="assert-jsproperty", expected="error", observed="string")


def test_python_messages() -> None:
    # playwright-python: "Locator expected to be visible\nActual value: None\nError: element(s)
    # not found \nCall log: …", as pytest prints it (E prefixes) in a JUnit failure
    text = ("tests/e2e/test_meetings.py:318: in test_meetings_face\n"
            "    expect(facet_area).to_be_visible(timeout=3_000)\n"
            "E   AssertionError: Locator expected to be visible\nE   Actual value: None\n"
            "E   Error: element(s) not found\nE   Call log:\n"
            "E     - Expect \"to_be_visible\" with timeout 3000ms\n"
            "E     - waiting for locator(\"[data-testid='meetings-facets']\")\n")
    _row(text, kind="assert-visible", not_found=True, timeout_ms=3000,
         locator="locator(\"[data-testid='meetings-facets']\")")
    # tests/sync/test_assertions.py: "Locator expected to contain class 'does-not-exist'",
    # "Actual value: foo bar baz"; "Locator expected to be unchecked"; "… to be disabled"
    _row("Locator expected to contain class 'does-not-exist'\nActual value: foo bar baz \n"
         "Call log:\n  - Expect \"to_contain_class\" with timeout 100ms\n",
         kind="assert-contains-class", expected="does-not-exist", observed="foo bar baz",
         timeout_ms=100)
    _row("AssertionError: Locator expected to be unchecked\nActual value: checked \n",
         kind="assert-unchecked", observed="checked")
    _row("Locator expected to be disabled\nActual value: enabled \n", kind="assert-disabled")
    _row("Locator expected not to be visible\nActual value: visible \n", kind="assert-hidden")
    _row("Locator expected to have text 'Place order'\nActual value: Checkout \n",
         kind="assert-text", expected="Place order", observed="Checkout")
    _row("Page URL expected to be 'https://shop.test/orders'\nActual value: "
         "https://shop.test/cart \n", kind="assert-url", url="https://shop.test/orders",
         page=True)
    _row("Locator expected to have Value 'marce'\nActual value:  \n", kind="assert-value",
         expected="marce", observed=None)


def test_java_and_generic_expected_but_was() -> None:
    _row("java.lang.AssertionError: expected:<3> but was:<2>", kind="assert-equals",
         expected="3", observed="2")
    _row("org.junit.ComparisonFailure: expected:<[Place order]> but was:<[Checkout]>",
         kind="assert-equals", expected="Place order", observed="Checkout")
    _row("org.opentest4j.AssertionFailedError: expected: <true> but was: <false>",
         kind="assert-equals", expected="true", observed="false")
    _row("java.lang.AssertionError: expected [5] but found [4]", kind="assert-equals",
         expected="5", observed="4")
    _row("AssertionError: expected 5 but was 3", kind="assert-equals", expected="5",
         observed="3")


@pytest.mark.parametrize("text", [
    "Test timeout of 30000ms exceeded.",
    "locator.click: Timeout 5000ms exceeded.\nCall log:\n  - waiting for getByRole('button')",
    "Error: page.waitForURL: Test timeout of 30000ms exceeded.",
    "java.lang.AssertionError: failed",
    "TypeError: expected a string but got number",  # no assertion words: not a check
    # a strict-mode violation: the matcher never looked (the test's locator is ambiguous)
    "Error: expect.toBeVisible: Error: strict mode violation: getByText('Welcome Message', "
    "{ exact: true }) resolved to 2 elements:",
    # a bad selector (expect-misc.spec.ts:658) and a matcher error (:367)
    "expect(locator).toBeVisible() failed\n\nLocator: ##\nExpected: visible\nError: "
    "Unexpected token \"#\" while parsing css selector \"##\". Did you mean to CSS.escape "
    "it?\n\nCall log:\n",
    "expect(page).toHaveURL(expected) failed\n\nError: expected value must be a string or "
    "regular expression\nExpected has type:  object\nExpected has value: {}\n",
    "Error: expect.toBeVisible: Target closed",
])
def test_what_is_not_a_finished_check(text: str) -> None:
    assert parse_assertion(text) is None


def test_the_timeout_is_kept_and_the_action_is_assert(tmp_path: Path) -> None:
    """An assertion that waited until its timeout: `action: assert` with a failed check,
    the timeout in the step's error and the failure message; a real timeout has no
    check."""
    report = {"suites": [{"title": "a.spec.ts", "specs": [
        {"title": t, "tests": [{"status": "unexpected", "projectName": "c", "results": [
            {"status": status, "errors": [{"message": message}]}]}]}
        for t, status, message in (
            ("waited", "failed", "Error: Timed out 7000ms waiting for expect(locator)."
                                 "toBeEnabled()\n\nLocator: getByRole('button', { name: "
                                 "'Pay' })\nExpected: enabled\nReceived: disabled\n"),
            ("timed-out", "timedOut", "Test timeout of 30000ms exceeded."),
            ("click", "failed", "locator.click: Timeout 5000ms exceeded.\nCall log:\n"
                                "  - waiting for getByRole('button', { name: 'Pay' })\n"))]}]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    ev = import_report(path, product="p", root=tmp_path).evidence
    assert validate_run(ev) == []
    waited, timed_out, click = ev["tests"]
    step = waited["steps"][waited["failure"]["step"]]
    assert (step["action"], step["target"], step["observed"]) == (
        "assert", "el:button:pay", "disabled")
    assert step["check"] == {"kind": "assert-enabled", "passed": False, "expected": "enabled"}
    assert "7000ms" in step["error"] and "7000ms" in waited["failure"]["message"]
    step = timed_out["steps"][timed_out["failure"]["step"]]
    assert step["check"] is None and step["action"] == "step"
    assert timed_out["failure"]["message"] == "Test timeout of 30000ms exceeded."
    step = click["steps"][click["failure"]["step"]]
    assert (step["action"], step["check"], step["target"]) == ("click", None, "el:button:pay")


def test_every_failed_check_keeps_the_test_failing(tmp_path: Path) -> None:
    for name in ("playwright-buerokratt-TDD-Playwright.json",
                 "playwright-jay-UT-utis-playwright-framework.json"):
        ev = import_report(REPORTS / name, product="p", root=tmp_path).evidence
        for t in ev["tests"]:
            for s in t["steps"]:
                if s["check"] is not None and not s["check"]["passed"]:
                    assert t["verdict"] == "fail" or t["flaky"]
                    assert t["failure"]["step"] == s["index"]


def test_a_failed_check_on_an_attribute_scopes_the_step(tmp_path: Path) -> None:
    message = ("Error: expect(locator).toHaveAttribute(expected) failed\n\nLocator:  "
               "getByTestId('desktop-sidebar')\nExpected: \"true\"\nReceived: \"false\"\n"
               "Timeout:  8000ms\n\nCall log:\n  - Expect \"toHaveAttribute\" "
               "getByTestId('desktop-sidebar') with timeout 8000ms\n")
    snippet = ("  28 |   const rail = page.getByTestId('desktop-sidebar');\n> 29 |   await "
               "expect(rail).toHaveAttribute('data-open', 'true');\n")
    report = {"suites": [{"title": "a.spec.ts", "specs": [{"title": "rail", "tests": [
        {"status": "unexpected", "results": [{"status": "failed", "errors": [
            {"message": message, "snippet": snippet}]}]}]}]}]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    (t,) = import_report(path, product="p", root=tmp_path).evidence["tests"]
    step = t["steps"][t["failure"]["step"]]
    assert step["check"] == {"kind": "assert-attribute", "passed": False, "expected": "true"}
    assert step["scope"] == {"attribute": "data-open"}
    assert step["observed"] == "false" and step["target"] == "el:testid:desktop-sidebar"


def test_assertion_values_are_plain(tmp_path: Path) -> None:
    a = parse_assertion("expect(locator).toHaveText(expected) failed\n\nLocator: "
                        "locator('p')\nExpected: \"say \\\"hi\\\"\"\nReceived: \"bye\"\n")
    assert isinstance(a, Assertion) and a.expected == 'say "hi"' and a.observed == "bye"


def test_the_documented_table_is_the_code() -> None:
    """docs/import.md's matcher table and `MATCHERS` are one table."""
    import re

    from memidex.importers.assertions import MATCHERS

    text = (REPO_ROOT / "docs/import.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| ((?:`to\w+`(?:, )?)+)[^|]*\| `(assert-[a-z-]+)` \| "
                      r"`(assert-[a-z-]+)` \|$", text, re.M)
    documented = {}
    for names, kind, negated in rows:
        for name in re.findall(r"`(to\w+)`", names):
            documented[name] = (kind, negated)
    assert documented == MATCHERS


_PIECES = [
    "expect(locator).", "expect(page).", "expect(received).", ".not", "toBeVisible()",
    "toHaveText(expected)", "toHaveAttribute(expected)", "toHaveURL(expected)", " failed",
    "Timed out 5000ms waiting for ", "\n\nLocator: ", "getByRole('button', { name: 'x' })",
    "\nExpected: ", "\nExpected string: ", "\nExpected pattern: /a/i", "\nReceived: ",
    "\nReceived string: ", "\"q\\\"\"", "<element(s) not found>", "\nError: ",
    "element(s) not found", "\nTimeout: 99999999999999999999ms", "\n- Expected  - 1\n",
    "+ Received  + 2\n", "\n- a\n+ b\n  c\n", "Locator expected ", "not ", "to be ",
    "to have ", "visible", "Value", " 'v'", "\nActual value: ", "None", "\nE   ", "Call log:",
    "  - Expect \"toBeChecked\" x with timeout 1ms", "expected:<", "> but was:<", ">",
    "AssertionError: ", "strict mode violation", "'", "\"", "\n", "to_have_attribute('",
]


@given(st.one_of(st.text(max_size=300),
                 st.lists(st.sampled_from(_PIECES), max_size=30).map("".join)))
def test_the_parser_never_raises_and_kinds_are_words(text: str) -> None:
    import re

    found = parse_assertion(text)
    if found is not None:
        assert re.fullmatch(r"assert(?:-[a-z0-9-]+)?", found.kind), found.kind
        assert found.timeout_ms is None or found.timeout_ms >= 0
