"""The locator → anchor table (docs/import.md), machine-path redaction and test ids."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memidex.evidence import TEST_ID_PATTERN, parse_run, validate_run
from memidex.importers.common import TestIds, strip_ansi
from memidex.importers.locators import find_locators, find_pages, page_anchor
from memidex.importers.paths import MachinePaths
from memidex.records.ids import ANCHOR_RE

# the table in docs/import.md, row by row
TABLE = [
    ("getByRole('button', { name: 'Place order' })", "el:button:place-order"),
    ('get_by_role("button", name="Place order")', "el:button:place-order"),
    ("getByRole('link', { name: /get started/i })", "el:link:get-started"),
    ("getByTestId('cart-total')", "el:testid:cart-total"),
    ('get_by_test_id("cart-total")', "el:testid:cart-total"),
    ("getByLabel('E-mail address')", "el:field:e-mail-address"),
    ("getByPlaceholder('Search products')", "el:field:search-products"),
    ("getByText('Welcome Message', { exact: true })", "el:text:welcome-message"),
    ("getByTitle('Close dialog')", "el:title:close-dialog"),
    ("getByAltText('Shop logo')", "el:alt:shop-logo"),
    ("locator('#cart .total')", "el:css:#cart .total"),
    ('locator("[data-testid=\\"create\\"]")', "el:testid:create"),
    ("locator('//div[@data-test-id=\\'login.unknownKey1\\']')",
     "el:xpath://div[@data-test-id='login.unknownKey1']"),
    ("locator('xpath=//button')", "el:xpath://button"),
    ("locator('text=Sign in')", "el:text:sign-in"),
    ("locator('internal:role=button[name=\"Place order\"i]')", "el:button:place-order"),
    ("getByRole('row', { name: 'Ann' }).getByRole('button', { name: 'Delete' })",
     "el:button:delete"),
    ("getByTestId('x').first()", "el:testid:x"),
    ("getByRole('listitem', { name: 'Milk' }).nth(2)", "el:listitem:milk"),
    ("locator('li.item').filter({ hasText: 'Milk' })", "el:css:li.item"),
    ("getByLabel('Shipping method').locator('option')", "el:field:shipping-method"),
    ("locator('header').locator('button.btn.btn--text').first()",
     "el:css:button.btn.btn--text"),
    ("locator('text=/Game Code:/i')", "el:text:game-code"),
    ("getByText(/Game Code:/i)", "el:text:game-code"),
    ("locator('internal:text=/Game Code/i')", "el:text:game-code"),
    ("locator('#sbox-iframe').contentFrame().getByText('Rich text')", "el:text:rich-text"),
    ("locator('[data-testid^=\"checkbox-cell-\"]:nth-of-type(1)')",
     'el:css:[data-testid^="checkbox-cell-"]:nth-of-type(1)'),
    ("locator('label:has-text(\"Saturday\")').locator('..')",
     'el:css:label:has-text("Saturday")'),
    ('locator("[data-testid=\\"create\\"]").first', "el:testid:create"),
    ("getByRole('button', { name: 'Tööaeg  Salvesta' })", "el:button:tööaeg-salvesta"),
]


@pytest.mark.parametrize(("text", "anchor"), TABLE)
def test_the_locator_table(text: str, anchor: str) -> None:
    assert [f.anchor for f in find_locators(f"Locator: {text}\n")] == [anchor]


@pytest.mark.parametrize("text", [
    "getByRole('button', { name: translation.save })",  # a name the text does not spell
    "locator(`label:has-text(\"${translation.x}\")`)",    # a template
    "getByRole(role)", "getByTestId(id)", "locator(':root')", "getByRole(",
    "page.getByRole('button', { name: '   ' }).click(", "locator('')",
    "selector \"text=Sign in\"",                           # not in the table: stays text
])
def test_what_the_table_does_not_know_gives_no_anchor(text: str) -> None:
    assert find_locators(text) == []


# the rules of "anchors worth matching" (docs/import.md), one test each


@pytest.mark.parametrize("text", [
    "locator('option')", "locator('div')", "locator('label')", "locator('button')",
    "locator('span')", "locator('li')", "locator('input')", "locator('a')",
    "locator('tr')", "locator('td')", "locator('li:nth-child(2)')", "locator('div > span')",
    "locator('tr:nth-of-type(3) td:first-child')", "locator('input:checked')",
    "locator('css=div')", "locator('*')",
])
def test_a_bare_tag_or_generic_css_gives_no_anchor(text: str) -> None:
    assert find_locators(text) == []


@pytest.mark.parametrize("text", [
    "getByRole('checkbox')", "get_by_role(\"checkbox\")", "getByRole('listitem').nth(2)",
    "locator('internal:role=button')", "getByRole(AriaRole.BUTTON)",
])
def test_a_role_without_a_name_gives_no_anchor(text: str) -> None:
    assert find_locators(text) == []


@pytest.mark.parametrize("text", [
    "get_by_test_id(\"checkbox-cell-6874bcb4437beded879c3ab8\")",
    "getByTestId('row-3f2a1b4c')", "locator('#order-1759936346')",
    "getByText('Invoice 20240115093011')",
])
def test_a_generated_id_gives_no_anchor(text: str) -> None:
    assert find_locators(text) == []


@pytest.mark.parametrize(("text", "anchor"), [
    ("getByTestId('step-2024')", "el:testid:step-2024"),       # four digits: a word
    ("getByTestId('zip-12345')", "el:testid:zip-12345"),
    ("getByTestId('deadbeefcafe')", "el:testid:deadbeefcafe"),  # hex letters, no digit
])
def test_short_numbers_are_not_generated_ids(text: str, anchor: str) -> None:
    assert [f.anchor for f in find_locators(text)] == [anchor]


def test_a_regexs_flags_are_not_part_of_the_anchor() -> None:
    assert [f.anchor for f in find_locators("locator('text=/Game Code:/i')")] == [
        "el:text:game-code"]
    assert [f.anchor for f in find_locators("getByRole('link', { name: /Sign in/i })")] == [
        "el:link:sign-in"]


@pytest.mark.parametrize(("text", "anchor"), [
    ("getByLabel('Shipping method').locator('option')", "el:field:shipping-method"),
    ("locator('div').getByRole('button', { name: 'Save' })", "el:button:save"),
    ("getByRole('row', { name: 'Ann' }).getByRole('checkbox')", "el:row:ann"),
    ("getByTestId('cart').locator('li').first()", "el:testid:cart"),
])
def test_in_a_chain_the_meaningful_locator_wins(text: str, anchor: str) -> None:
    assert [f.anchor for f in find_locators(text)] == [anchor]


def test_a_secret_only_nfkc_spells_is_masked() -> None:
    from memidex.masking import Masker

    mask = Masker(secrets=(("pw", "Hunter2"),)).mask
    fullwidth = "".join(chr(ord(c) + 0xFEE0) for c in "Hunter2")
    found = find_locators(f"getByRole('button', {{ name: '{fullwidth}' }})", mask)
    assert [f.anchor for f in found] == ["el:button:secret-pw"]


def test_strict_mode_violations_name_the_locator_and_its_suggestions() -> None:
    text = ("Error: strict mode violation: getByText('Welcome Message') resolved to 2 "
            "elements:\n 1) <h1>Welcome Message</h1> aka getByRole('heading', { name: "
            "'Welcome Message' })\n 2) <label>…</label> aka locator('label').filter({ "
            "hasText: 'Welcome Message' })")
    assert [(f.anchor, f.role) for f in find_locators(text)] == [
        ("el:text:welcome-message", "strict"), ("el:heading:welcome-message", "aka")]
    # the ambiguous locator is the target and each suggestion a further anchor
    pytest_text = ('Locator.wait_for: Error: strict mode violation: locator("[data-testid='
                   '\\"create\\"]") resolved to 2 elements:\n    1) <button> aka '
                   'get_by_role("button", name="Add")\n    2) <button> aka '
                   'get_by_test_id("create-2")')
    assert [(f.anchor, f.role) for f in find_locators(pytest_text)] == [
        ("el:testid:create", "strict"), ("el:button:add", "aka"),
        ("el:testid:create-2", "aka")]


@pytest.mark.parametrize(("text", "pages"), [
    ("await page.goto('https://shop.test/checkout?step=2#top');", ["page:/checkout"]),
    ("page.waitForURL('**/login')", ["page:/login"]),
    ('page.wait_for_url("https://shop.test/")', ["page:/"]),
    ('waiting for navigation to "https://a.test/chat/active/" until "load"',
     ["page:/chat/active"]),
    ("expect(page).toHaveURL('/orders/42')", ["page:/orders/42"]),
    ("page.goto(`${base}/x`) page.goto('chrome://settings') page.goto('**/*.png')", []),
])
def test_pages_from_urls(text: str, pages: list[str]) -> None:
    assert find_pages(text) == pages


def test_page_anchor_drops_the_origin_and_query() -> None:
    assert page_anchor("http://localhost:3000/a/b/?q=1") == "page:/a/b"
    assert page_anchor("not a url") is None


_FRAGMENTS = st.sampled_from([
    "getByRole(", "getByTestId(", "get_by_role(", "locator(", "getByLabel(", ")", "(",
    "'", '"', "`", "\\", "{ name: ", "name=", ", ", ".first()", ".nth(2)", ".filter(",
    ".locator(", "}", "button", "Place order", "//div", "internal:role=", "[name=\"",
    "\n", " aka ", "strict mode violation: ", "${x}", "/", "xpath=", "text=", "Ö", "\x00",
    " ", "page.goto(", "https://", "waitForURL(", "**", "?q", "#", "navigating to \"",
])


@given(st.one_of(st.text(max_size=300), st.lists(_FRAGMENTS, max_size=40).map("".join)))
def test_the_parsers_never_raise_and_give_valid_anchors(text: str) -> None:
    for found in find_locators(text):
        assert ANCHOR_RE.fullmatch(found.anchor) and len(found.anchor) <= 500
        assert found.anchor.startswith("el:")
    for anchor in find_pages(text):
        assert ANCHOR_RE.fullmatch(anchor) and anchor.startswith("page:/")


# -- machine paths ------------------------------------------------------------------------

PATHS = MachinePaths(Path("/srv/repo"), ["/home/ci/work/shop", "D:\\shop"])


@pytest.mark.parametrize(("text", "expected"), [
    ("at /home/ci/work/shop/tests/a.spec.ts:3:5", "at tests/a.spec.ts:3:5"),
    ("at D:\\shop\\tests\\a.spec.ts:3:5", "at tests/a.spec.ts:3:5"),
    ("at d:/shop/tests/a.spec.ts", "at tests/a.spec.ts"),
    ("/srv/repo/artifacts/x.png", "artifacts/x.png"),
    ("/home/kim/src/a.py:1: skip", "~/src/a.py:1: skip"),
    ("/Users/kim/src/a.py", "~/src/a.py"),
    ("C:\\Users\\peter\\.m2\\repo", "~\\.m2\\repo"),
    ("C:\\dev\\Java\\bin;C:\\WINDOWS", "[path]/bin;[path]/WINDOWS"),
    ("open /home/dashboard and https://shop.test/home/kim/x", "open /home/dashboard and "
                                                              "https://shop.test/home/kim/x"),
])
def test_machine_paths_are_relative_or_redacted(text: str, expected: str) -> None:
    assert PATHS.redact(text) == expected


def test_only_attachments_inside_artifacts_are_kept() -> None:
    assert PATHS.artifact("/home/ci/work/shop/artifacts/r/a.png") == "artifacts/r/a.png"
    assert PATHS.artifact("D:\\shop\\artifacts\\v.webm") == "artifacts/v.webm"
    assert PATHS.artifact("/srv/repo/artifacts/t.zip") == "artifacts/t.zip"
    assert PATHS.artifact("artifacts/rel.png") == "artifacts/rel.png"
    for outside in ("/home/ci/work/shop/test-results/a.png", "/tmp/artifacts/a.png",
                    "artifacts/../secrets.yaml", "/home/ci/work/shop/artifacts",
                    "../artifacts/a.png", "artifacts/a b.png"):
        assert PATHS.artifact(outside) is None, outside


@given(st.text(alphabet="abc/\\:CDU sehrmoUsers.-", max_size=80))
def test_redaction_never_leaves_a_home_folder(text: str) -> None:
    out = PATHS.redact(text)
    assert not re.search(r"(?<![\w.%-])/home/ci/work/shop/", out)
    assert not re.search(r"(?<![A-Za-z0-9])[A-Za-z]:[\\/]", out)


# -- text and ids ---------------------------------------------------------------------------


def test_ansi_escapes_are_stripped() -> None:
    assert strip_ansi("\x1b[31mError\x1b[39m: \x1b[2mx\x1b[22m\r\x1b]8;;http://a\x07") == (
        "Error: x")


@given(st.lists(st.lists(st.text(max_size=120), min_size=1, max_size=4), min_size=1,
                max_size=12), st.one_of(st.none(), st.text(max_size=80)))
def test_test_ids_are_valid_and_unique(parts: list[list[str]], project: str | None) -> None:
    ids = TestIds()
    made = [ids.make(p, project) for p in parts]
    assert len(set(made)) == len(made)
    for test_id in made:
        assert re.fullmatch(TEST_ID_PATTERN[1:-1], test_id), test_id


def test_attempts_flaky_and_step_titles_round_trip() -> None:
    data = {"run_id": "r-1", "product": "p", "tests": [
        {"test_id": "t", "verdict": "pass", "flaky": True, "retries": 1,
         "attempts": [{"status": "timeout", "error": "Timed out", "duration_ms": 5},
                      {"status": "pass"}],
         "steps": [{"index": 0, "action": "step", "title": "open the cart"}]}]}
    import json

    run = parse_run(json.dumps(data).encode(), source="r.json")
    (test,) = run.tests
    assert test.flaky and [a.status for a in test.attempts] == ["timeout", "pass"]
    assert test.steps[0].title == "open the cart"
    assert parse_run(json.dumps(run.as_dict()).encode(), source="again") == run
    data["tests"][0]["attempts"] = [{"status": "maybe"}]
    assert [v.path for v in validate_run(data)] == ["tests[0].attempts[0].status"]
