"""The evaluation set: queries an agent would ask about the example shop
(agent-qa-knowledge/memory/records/), each with the records that answer it, and
restatements of records under another anchor for the near-duplicate check.

Records are named by a unique prefix of their id (resolved, and checked unique, by
:func:`resolve`). Kinds: ``paraphrase`` (other words for the same thing: what an agent
that never saw the record types), ``typo``, ``reorder`` (the record's words in another
order) and ``keyword`` (close to the record's own words).
"""

from __future__ import annotations

from collections.abc import Iterable

R = {
    "S1": "caution-api-get-api-search", "S2": "caution-el-banner-cookie-consent",
    "S3": "caution-el-button-place-order", "S4": "caution-el-input-card-number",
    "S5": "caution-el-list-suggestions", "S6": "caution-el-toast-added-to-cart",
    "S7": "caution-host-payments-sandbox", "S8": "caution-host-staging",
    "S9": "caution-page-checkout-payment", "S10": "caution-page-login",
    "S11": "caution-test-login-lockout", "S12": "caution-test-promo-code-expired",
    "F1": "fact-api-get-api-search", "F2": "fact-api-post-api-orders",
    "F3": "fact-el-alert-login-locked", "F4": "fact-el-banner-cookie-consent",
    "F5": "fact-el-button-add-to-cart", "F6": "fact-el-button-apply-promo",
    "F7": "fact-el-button-pay-now", "F8": "fact-el-button-place-order-72fe",
    "F9": "fact-el-button-place-order-b9ec", "F10": "fact-el-button-proceed-to-checkout",
    "F11": "fact-el-button-sign-in", "F12": "fact-el-checkbox-accept-terms",
    "F13": "fact-el-input-card-number", "F14": "fact-el-input-promo-code",
    "F15": "fact-el-link-continue-as-guest", "F16": "fact-el-list-suggestions",
    "F17": "fact-el-select-shipping-method", "F18": "fact-el-toast-added-to-cart",
    "F19": "fact-flow-checkout", "F20": "fact-page-6fea", "F21": "fact-page-account-e980",
    "F22": "fact-page-account-orders", "F23": "fact-page-cart",
    "F24": "fact-page-checkout-payment", "F25": "fact-page-login",
    "F26": "fact-page-order-confirmation", "F27": "fact-page-orders",
    "F28": "fact-page-product-slug", "F29": "fact-page-search",
    "F30": "fact-test-guest-checkout", "F31": "fact-test-login-lockout",
    "F32": "fact-test-promo-code-expired",
    "P1": "procedure-el-banner-cookie-consent", "P2": "procedure-el-input-card-number",
    "P3": "procedure-el-input-promo-code", "P4": "procedure-flow-checkout",
    "P5": "procedure-page-login-1fb7", "P6": "procedure-page-login-7cc2",
    "P7": "procedure-test-checkout-happy-path", "P8": "procedure-test-guest-checkout",
    "P9": "procedure-test-login-lockout", "P10": "procedure-test-promo-code-expired",
    "P11": "procedure-test-search-suggestions",
    "U1": "unknown-api-post-api-orders", "U2": "unknown-el-button-place-order",
    "U3": "unknown-el-input-promo-code", "U4": "unknown-el-list-suggestions",
    "U5": "unknown-el-select-shipping-method", "U6": "unknown-page-account-orders",
}

# (kind, query, relevant records)
QUERIES: list[tuple[str, str, tuple[str, ...]]] = [
    # --- paraphrases: other words than the records use
    ("paraphrase", "staging search endpoint down overnight", ("S1", "S8")),
    ("paraphrase", "search tests fail early in the morning with server errors", ("S1", "S8")),
    ("paraphrase", "consent popup blocks the submit order button on desktop", ("S2", "S3")),
    ("paraphrase", "element not clickable because an overlay intercepts the click at checkout",
     ("S2", "S3", "P1")),
    ("paraphrase", "phone layout: the privacy notice hides the footer with the buy button",
     ("S3",)),
    ("paraphrase", "digits missing when entering the credit card too quickly", ("S4", "P2")),
    ("paraphrase", "payment form frame is slow to appear", ("S4", "P2")),
    ("paraphrase", "autocomplete dropdown sometimes times out, is it a real bug", ("S5",)),
    ("paraphrase", "notification after adding an item hides the basket icon", ("S6",)),
    ("paraphrase", "payment provider hostname cannot be resolved", ("S7",)),
    ("paraphrase", "too many payment requests rejected when running in parallel", ("S9",)),
    ("paraphrase", "HTTP 429 from the card processor", ("S9",)),
    ("paraphrase", "admin gets logged out after being inactive", ("S10",)),
    ("paraphrase", "back office single sign-on session timeout", ("S10", "P6")),
    ("paraphrase", "concurrent test workers lock the same user out", ("S11",)),
    ("paraphrase", "how many wrong passwords before the account gets blocked", ("F31", "F3")),
    ("paraphrase", "outdated voucher still works in the middle of the night", ("S12",)),
    ("paraphrase", "which endpoint fills the typeahead list", ("F1",)),
    ("paraphrase", "what does the backend return when a purchase is created", ("F2",)),
    ("paraphrase", "order creation response code and identifier", ("F2",)),
    ("paraphrase", "message shown when the account is temporarily locked", ("F3", "F31")),
    ("paraphrase", "privacy notice shows up only on the first visit", ("F4",)),
    ("paraphrase", "how to get rid of the consent popup before the test starts", ("P1", "F4")),
    ("paraphrase", "confirmation popup after putting a product in the basket", ("F5", "F18")),
    ("paraphrase", "error text for an outdated voucher in the basket", ("F6", "F32")),
    ("paraphrase", "what appears after paying successfully", ("F7", "F26")),
    ("paraphrase", "where does submitting the purchase take you", ("F8", "F2")),
    ("paraphrase", "can the buy button be clicked on the checkout page", ("F9", "U2")),
    ("paraphrase", "button that goes from the basket to paying", ("F10",)),
    ("paraphrase", "wrong credentials error when logging in", ("F11",)),
    ("paraphrase", "terms and conditions box is ticked", ("F12",)),
    ("paraphrase", "masked credit card value in the payment field", ("F13",)),
    ("paraphrase", "ten percent discount voucher", ("F14",)),
    ("paraphrase", "buy without creating a user account", ("F30", "F15", "P8")),
    ("paraphrase", "link to check out without logging in", ("F15",)),
    ("paraphrase", "autocomplete shows results for mug", ("F16",)),
    ("paraphrase", "delivery options and the price of regular delivery", ("F17",)),
    ("paraphrase", "how long the added to basket message stays on screen", ("F18", "S6")),
    ("paraphrase", "order of pages in the purchase funnel", ("F19", "P4")),
    ("paraphrase", "does going back keep the shipping address during checkout", ("F19",)),
    ("paraphrase", "home page loads", ("F20",)),
    ("paraphrase", "greeting with the customer's name on the profile page", ("F21",)),
    ("paraphrase", "past purchases list pagination and sorting", ("F22",)),
    ("paraphrase", "how the reference number looks on the thank you page", ("F26",)),
    ("paraphrase", "when do new purchases show up in the back office", ("F27",)),
    ("paraphrase", "delay before the admin dashboard lists a purchase", ("F27",)),
    ("paraphrase", "what happens when a search finds nothing", ("F29",)),
    ("paraphrase", "zero results page recommendations", ("F29",)),
    ("paraphrase", "a guest purchase does not register a user", ("F30",)),
    ("paraphrase", "how long is the lock after repeated failed logins", ("F31", "F3")),
    ("paraphrase", "error under the coupon field for an old code", ("F32", "F6")),
    ("paraphrase", "avoid the privacy popup by setting a cookie up front", ("P1",)),
    ("paraphrase", "type the credit card inside the embedded frame", ("P2",)),
    ("paraphrase", "wait for the price to refresh after entering a voucher", ("P3",)),
    ("paraphrase", "full purchase steps with the demo customer and test card", ("P4", "P7")),
    ("paraphrase", "log in with the seeded customer account", ("P5",)),
    ("paraphrase", "admin login through the identity provider", ("P6",)),
    ("paraphrase", "steps of the happy path purchase test", ("P7", "P4")),
    ("paraphrase", "steps to buy as a visitor without an account", ("P8", "F30")),
    ("paraphrase", "steps of the account lock test", ("P9",)),
    ("paraphrase", "steps for the outdated coupon test", ("P10",)),
    ("paraphrase", "steps of the typeahead test", ("P11",)),
    ("paraphrase", "can a double submit create duplicate purchases", ("U1",)),
    ("paraphrase", "submit order button no longer greyed out on the new build", ("U2", "F9")),
    ("paraphrase", "stacking two discount vouchers", ("U3",)),
    ("paraphrase", "sold out items in the autocomplete", ("U4",)),
    ("paraphrase", "express delivery missing in the evening", ("U5",)),
    ("paraphrase", "are visitor purchases linked after signing up", ("U6",)),
    ("paraphrase", "card number that triggers the 3DS challenge", ("F24",)),
    ("paraphrase", "does the amount on the payment step include delivery", ("F24",)),
    ("paraphrase", "sandbox card details for paying in tests", ("P2", "P4", "F13")),
    ("paraphrase", "payment step fails with a name resolution error", ("S7",)),
    ("paraphrase", "staging server answers service unavailable", ("S8", "S1")),
    ("paraphrase", "which secret holds the customer's password", ("P5",)),
    ("paraphrase", "which secret holds the back office password", ("P6",)),
    ("paraphrase", "should the agent retry a typeahead failure instead of filing a bug",
     ("S5",)),
    ("paraphrase", "limit the number of workers for payment tests", ("S9",)),
    ("paraphrase", "give each worker its own user for the account lock test", ("S11",)),
    ("paraphrase", "how many autocomplete entries are requested", ("F1",)),
    ("paraphrase", "page size of the full search results", ("F1",)),
    ("paraphrase", "a locked account also refuses the right password", ("F31",)),
    ("paraphrase", "when does the nightly job recreate the vouchers", ("S12",)),
    ("paraphrase", "basket page shows one item", ("F23",)),
    ("paraphrase", "sign in page renders", ("F25",)),
    ("paraphrase", "product detail page shows the mug and its price", ("F28",)),
    # --- typos
    ("typo", "cookie baner covers place ordr", ("S2", "S3")),
    ("typo", "paymnet sandbox rate limt", ("S9",)),
    ("typo", "suggestons list flakey timeout", ("S5",)),
    ("typo", "promo cod expird SPRING24", ("F32", "S12", "F6")),
    ("typo", "guest chekout email", ("F30",)),
    ("typo", "lokout after five failed sign ins", ("F31",)),
    ("typo", "admin sesion expires idle", ("S10",)),
    ("typo", "card ifrme loads late", ("S4",)),
    ("typo", "add to cart tost covers header", ("S6",)),
    ("typo", "order confirmaton number format", ("F26",)),
    ("typo", "shiping method standard price", ("F17",)),
    ("typo", "acount order history newest first", ("F22",)),
    ("typo", "serch returns 503 nightly", ("S1",)),
    ("typo", "empty serch result popular products", ("F29",)),
    ("typo", "pre-set the consnet cookie", ("P1",)),
    ("typo", "sign in as seded shopper", ("P5",)),
    ("typo", "double clik place order two orders", ("U1",)),
    ("typo", "two promo cods combined", ("U3",)),
    ("typo", "out of stok products in suggestions", ("U4",)),
    ("typo", "next day shiping cutoff", ("U5",)),
    # --- the records' words, in another order
    ("reorder", "order place button enabled", ("F9",)),
    ("reorder", "1280x720 banner cookie covers", ("S2",)),
    ("reorder", "digits dropped typing card early", ("S4",)),
    ("reorder", "minutes 15 locked account five sign-ins", ("F31",)),
    ("reorder", "seconds 30 admin table orders appear", ("F27",)),
    ("reorder", "orders api post 201", ("F2",)),
    ("reorder", "cart added toast 4 seconds", ("F18", "S6")),
    ("reorder", "off subtotal percent 10 SAVE10", ("F14",)),
    ("reorder", "guest as continue link", ("F15",)),
    ("reorder", "frame card fill editable", ("P2",)),
    ("reorder", "workers lockout counter shared parallel", ("S11",)),
    ("reorder", "idle minutes admin sessions staging expire", ("S10",)),
    ("reorder", "limit 8 api search suggestions", ("F1",)),
    ("reorder", "products match no empty search", ("F29",)),
    ("reorder", "okta admin sign in", ("P6",)),
    # --- close to the records' own words
    ("keyword", "place order button enabled", ("F9",)),
    ("keyword", "cookie banner", ("S2", "S3", "F4", "P1")),
    ("keyword", "payment sandbox rate limit", ("S9",)),
    ("keyword", "SPRING24 expired", ("F32", "S12", "F6")),
    ("keyword", "login lockout", ("F31", "S11", "P9", "F3")),
    ("keyword", "search suggestions flaky", ("S5",)),
    ("keyword", "card iframe", ("S4", "P2")),
    ("keyword", "checkout flow", ("F19", "P4")),
    ("keyword", "order confirmation page", ("F26",)),
    ("keyword", "admin orders table", ("F27",)),
    ("keyword", "guest checkout", ("F30", "P8")),
    ("keyword", "promo code", ("F14", "P3", "U3", "F32")),
    ("keyword", "add to cart toast", ("F5", "F18", "S6")),
    ("keyword", "3-D Secure", ("F24",)),
    ("keyword", "accept terms checkbox", ("F12",)),
]

# A candidate restating an existing record under another main anchor (a renamed
# element, another naming): (existing record, candidate's main anchor, title, body).
DUPLICATES: list[tuple[str, str, str, str]] = [
    ("F9", "el:button:submit-order", "The submit order button can be clicked on /checkout",
     "assert-enabled held for el:button:submit-order on /checkout; the app showed "
     "“Submit order (enabled)”."),
    ("S2", "el:banner:consent", "The consent banner overlaps Place order at 1280x720",
     "At a 1280x720 viewport the consent banner covers the bottom of the page including "
     "Place order; the click is intercepted by the banner. Close it first."),
    ("F31", "api:POST:/api/login", "Five wrong passwords in a row lock the account for 15 "
     "minutes", "After the fifth failed sign-in the session API answers 423 and the page "
     "says to try again in 15 minutes; even the right password is refused meanwhile."),
    ("S9", "host:payments.sandbox.shop-web.test", "The payments sandbox answers 429 above "
     "about 20 payments a minute", "Many parallel workers paying at once get 429 Too Many "
     "Requests from the sandbox; retry after a minute or use at most 4 workers."),
    ("F14", "el:input:coupon", "Coupon SAVE10 gives 10% off the subtotal",
     "Typing SAVE10 in the coupon field and pressing Apply shows Code applied: -10% and "
     "lowers the subtotal before shipping."),
    ("F26", "page:/order/thank-you", "The thank-you page shows an ORD- number with six "
     "digits", "The page says Thank you for your order and shows an order number like "
     "ORD-104233, as returned by the orders API."),
    ("S4", "el:iframe:card-frame", "The card frame loads slowly and digits typed too early "
     "are lost", "The payment iframe can take several seconds on staging; typing before "
     "the card field is editable drops the first digits."),
    ("F29", "el:text:search-empty", "A search with no match shows No products match and "
     "popular products", "When nothing matches, the results page says No products match "
     "and lists four popular products."),
    ("F30", "flow:guest-checkout", "Checking out as a guest needs an email and creates no "
     "account", "A visitor can continue as guest with an email address; the order works "
     "but no account exists afterwards."),
    ("S10", "page:/admin", "Admin sessions on staging time out after ten idle minutes",
     "The admin SSO session ends after 10 minutes without a request and the next click "
     "goes back to the login page."),
    ("P1", "el:cookie:consent", "Set the consent cookie before the first page so the "
     "banner never shows", "Add consent=all for the shop domain before navigating; the "
     "banner is then never rendered."),
    ("F18", "el:toast:cart-added", "The cart toast reads Added to cart for 4 seconds with "
     "a View cart link", "After adding a product a toast Added to cart appears with a View "
     "cart link and goes away after 4 seconds."),
    ("F1", "el:list:autocomplete", "Autocomplete suggestions come from GET /api/search with "
     "limit 8", "The autocomplete list calls GET /api/search?q=<query>&limit=8; the "
     "results page uses limit=24."),
    ("S5", "el:list:autocomplete", "The autocomplete list times out now and then: retry "
     "before reporting", "A timeout waiting for the autocomplete list on the same build "
     "is flaky, not an app bug; retry first."),
    ("F2", "el:button:submit-order", "Submitting an order posts to /api/orders and returns "
     "201 with the order id", "Clicking Submit order sends POST /api/orders; success is "
     "201 with an orderId and the browser goes to the confirmation page."),
    ("F27", "page:/admin/orders", "New orders show up in the admin order table after "
     "about 30 seconds", "The admin orders table is fed by the admin orders API and a new "
     "shop order appears within about 30 seconds with the same ORD- number."),
    ("F22", "page:/account/orders", "Order history shows the newest orders first, ten per "
     "page", "The account's orders page lists order rows newest first, 10 a page, with "
     "number, date and total."),
    ("S11", "el:input:email", "Workers using the same seeded user share one lockout "
     "counter", "Two workers running the lockout test with the same user lock each other "
     "out after 2-3 attempts; give each worker its own user."),
    ("F17", "el:select:delivery", "Standard delivery (3–5 days) costs 4.90 EUR at "
     "checkout", "assert-value held for el:select:delivery on /checkout; the app showed "
     "“Standard (3–5 days) — 4.90 EUR”."),
    ("P5", "flow:sign-in", "Log in as the seeded shopper", "Open /login, enter "
     "qa.shopper@example.test and the SHOP_QA_PASSWORD secret, press Sign in and wait "
     "for /account."),
    ("F24", "el:text:order-total", "The order total on the payment page already includes "
     "shipping", "The order total shown on /checkout/payment includes shipping; the test "
     "card 4000 0027 6000 3184 opens a 3-D Secure challenge."),
    ("U1", "el:button:submit-order", "Can double clicking Submit order create two orders?",
     "The button stays clickable while POST /api/orders runs; nobody knows whether the "
     "API deduplicates by cart."),
    ("F32", "el:text:promo-error", "SPRING24 is expired and shows This code has expired "
     "below the field", "Applying SPRING24 keeps the total and shows This code has "
     "expired under the promo field."),
    ("S1", "host:staging.shop-web.test", "Staging search answers 503 during the nightly "
     "index rebuild", "Around 02:00 UTC the staging search index is rebuilt for about 20 "
     "minutes and GET /api/search answers 503; search failures then are environmental."),
    ("F4", "el:banner:consent", "The consent banner shows once per new browser context",
     "A fresh browser context shows the consent banner with Accept all and Only "
     "necessary; either choice sets the consent cookie."),
]


def resolve(ids: Iterable[str]) -> dict[str, str]:
    """Each alias of :data:`R` → the one record id its prefix names."""
    ids = sorted(set(ids))
    out: dict[str, str] = {}
    for alias, prefix in R.items():
        hits = [i for i in ids if i.startswith(prefix)]
        if len(hits) != 1:
            raise SystemExit(f"queries.py: {alias} = {prefix!r} names {len(hits)} records")
        out[alias] = hits[0]
    return out
