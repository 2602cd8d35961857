"""Roombook: the small meeting-room booking app of memidex's real loop (docs/realloop.md).

    python bench/realloop/app.py --build 3 [--port 0] [--seed 7] [--outage]

Plain HTML, a little JavaScript and JSON APIs on the standard library's ``http.server``,
bound to 127.0.0.1. ``--build N`` (1–5) selects what the app does; each build is the
one before it plus the changes ``BUILDS`` lists (``bench/realloop/truth.yaml`` says what
is true of each). The only randomness is declared: the two slow elements (the home
page's notice and the rooms page's "most booked" line) answer after a delay drawn from a
generator seeded with ``--seed`` (now and then longer than the suite's assertion
timeout), and ``--outage`` makes ``/api/availability`` answer 503 for the whole run.
The first line printed is ``listening on http://127.0.0.1:PORT``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

RATES = {"atlas": 10, "borealis": 18, "cobalt": 25, "delta": 14, "ember": 6, "fjord": 40}


@dataclass(frozen=True)
class Build:
    """What one build of the app does."""

    n: int
    sign_in: str = "Sign in"  # build 2: "Log in" (the nav link and the login button)
    remember_default: bool = False  # build 2: "Remember me" ticked by default
    duration_default: int = 60  # build 2: 30 minutes
    rooms_path: str = "/rooms"  # build 4: "/spaces", and "/rooms" is gone
    bug_total: bool = False  # build 3: every started hour is charged in full
    bug_filter: bool = False  # build 3: "8+ seats" leaves out the rooms of exactly 8
    bug_book: bool = False  # build 3: Book stays disabled with the first free time chosen
    rates: dict[str, int] = field(default_factory=lambda: dict(RATES))  # build 5: Atlas 12


ROOMS = [("atlas", "Atlas", 4), ("borealis", "Borealis", 8), ("cobalt", "Cobalt", 12),
         ("delta", "Delta", 6), ("ember", "Ember", 2), ("fjord", "Fjord", 20)]
FREE_TIMES = ["09:00", "10:00", "13:00", "15:00"]
USERS = {"ana": "harbour-42"}
NOTICE = "Fjord is closed for maintenance on Friday."
POPULAR = "Most booked this week: Cobalt"

_B2: dict[str, Any] = {"sign_in": "Log in", "remember_default": True, "duration_default": 30}
_B3: dict[str, Any] = {**_B2, "bug_total": True, "bug_filter": True, "bug_book": True}
_B4: dict[str, Any] = {**_B2, "rooms_path": "/spaces"}
BUILDS: dict[int, Build] = {
    1: Build(1),
    2: Build(2, **_B2),
    3: Build(3, **_B3),
    4: Build(4, **_B4),
    5: Build(5, **_B4, rates={**RATES, "atlas": 12}),
}

SLOW_SHARE = 0.3
"""The share of slow answers of a slow element: 3.2–4.0 s, beyond the suite's 2.5 s
assertion timeout; the others take 0.1–0.8 s."""

CSS = """body{font-family:sans-serif;margin:0}header{background:#234;padding:.6em 1em}
header a{color:#fff;margin-right:1em}main{padding:1em 2em}
.card{border:1px solid #ccc;padding:.5em;margin:.4em 0;list-style:none}
[data-testid=notice],[data-testid=popular]{background:#ffd;padding:.4em}
[role=alert]{color:#a00}label{display:block;margin:.5em 0}"""


def page(build: Build, title: str, body: str, script: str = "") -> str:
    nav = (f'<a href="/">Home</a><a href="{build.rooms_path}">Rooms</a>'
           f'<a href="/bookings">My bookings</a><a href="/login">{build.sign_in}</a>')
    config = json.dumps({"build": build.n, "bugTotal": build.bug_total,
                         "bugBook": build.bug_book})
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f"<title>{title} · Roombook</title><style>{CSS}</style></head><body>"
            f"<header><nav>{nav}</nav></header><main>{body}</main>"
            f"<script>const CFG = {config};\n{script}</script></body></html>")


HOME_JS = """fetch('/api/notice').then(r => r.json()).then(d => {
  const n = document.querySelector('[data-testid=notice]');
  n.textContent = d.text; n.hidden = false; });"""

LOGIN_JS = """document.querySelector('form').addEventListener('submit', async ev => {
  ev.preventDefault();
  const f = ev.target, err = document.querySelector('[role=alert]');
  const r = await fetch('/api/login', {method: 'POST', body: JSON.stringify(
    {username: f.username.value, password: f.password.value})});
  if (!r.ok) { err.textContent = 'Wrong username or password'; err.hidden = false; return; }
  sessionStorage.setItem('user', (await r.json()).user);
  location.href = '/bookings';
});"""

ROOMS_JS = """const sel = document.querySelector('select[name=capacity]');
async function load() {
  const q = sel.value === 'any' ? '' : '?min=' + sel.value;
  const rooms = await (await fetch('/api/rooms' + q)).json();
  document.querySelector('[data-testid=room-list]').innerHTML = rooms.map(r =>
    `<li class="card" data-testid="room-card"><h2>${r.name}</h2> <span>${r.seats} seats</span> ` +
    `<span data-testid="price-${r.id}">€${r.rate} / hour</span> ` +
    `<a href="/book?room=${r.id}">Book ${r.name}</a></li>`).join('');
  document.querySelector('[data-testid=room-count]').textContent = rooms.length + ' rooms';
  const s = document.querySelector('[data-testid=filter-summary]');
  s.hidden = sel.value === 'any';
  s.textContent = sel.value === 'any' ? '' : `${rooms.length} rooms with ${sel.value}+ seats`;
}
sel.addEventListener('change', load); load();
fetch('/api/popular').then(r => r.json()).then(d => {
  const p = document.querySelector('[data-testid=popular]');
  p.textContent = d.text; p.hidden = false; });"""

BOOK_JS = """const f = document.querySelector('form'), book = f.querySelector('button');
const avail = document.querySelector('[data-testid=availability]');
function update() {
  const minutes = Number(f.duration.value);
  const hours = CFG.bugTotal ? Math.ceil(minutes / 60) : minutes / 60;
  document.querySelector('[data-testid=total]').textContent =
    'Total: €' + (hours * Number(f.dataset.rate)).toFixed(2);
  // build 3's bug: the first free time no longer counts as a choice
  const chosen = CFG.bugBook ? f.start.selectedIndex > 0 : f.start.value !== '';
  book.disabled = !(f.rules.checked && chosen);
}
for (const el of [f.duration, f.start, f.rules]) el.addEventListener('change', update);
update();
fetch('/api/availability?room=' + f.dataset.room).then(async r => {
  if (!r.ok) { avail.textContent = 'Could not load free times. Try again later.'; return; }
  const d = await r.json();
  f.start.innerHTML = d.free.map(t => `<option>${t}</option>`).join('');
  f.start.disabled = false;
  avail.textContent = d.free.length + ' free times';
  update();
});
f.addEventListener('submit', async ev => {
  ev.preventDefault();
  const r = await fetch('/api/bookings', {method: 'POST', body: JSON.stringify(
    {room: f.dataset.room, start: f.start.value, minutes: Number(f.duration.value)})});
  const d = await r.json();
  location.href = '/bookings?booked=' + encodeURIComponent(d.name + ' at ' + d.start);
});"""

BOOKINGS_JS = """const who = sessionStorage.getItem('user');
document.querySelector('[data-testid=signed-in-as]').textContent =
  who ? 'Signed in as ' + who : 'Not signed in';
const booked = new URLSearchParams(location.search).get('booked');
if (booked) { const t = document.querySelector('[role=status]');
  t.textContent = 'Booked ' + booked; t.hidden = false; }
fetch('/api/bookings').then(r => r.json()).then(list => {
  document.querySelector('[data-testid=bookings]').innerHTML = list.map(b =>
    `<li class="card" data-testid="booking-row">${b.name} at ${b.start}, ${b.minutes} min</li>`
  ).join('') || '<li>No bookings yet</li>'; });"""


class App:
    """The state of one server: its build, seeded slow answers, bookings, the outage."""

    def __init__(self, build: Build, seed: int, outage: bool) -> None:
        self.build, self.seed, self.outage = build, seed, outage
        self.lock = threading.Lock()
        self.rngs = {name: random.Random(f"{seed}:{name}") for name in ("notice", "popular")}
        self.bookings: list[dict[str, Any]] = []

    def delay(self, name: str) -> float:
        with self.lock:
            rng = self.rngs[name]
            slow = rng.random() < SLOW_SHARE
            return rng.uniform(3.2, 4.0) if slow else rng.uniform(0.1, 0.8)

    def rooms(self, minimum: int | None) -> list[dict[str, Any]]:
        out = []
        for rid, name, seats in ROOMS:
            if minimum is not None and (seats <= minimum if self.build.bug_filter
                                        else seats < minimum):
                continue
            out.append({"id": rid, "name": name, "seats": seats,
                        "rate": self.build.rates[rid]})
        return out

    def html(self, path: str, query: dict[str, list[str]]) -> str | None:
        b = self.build
        if path == "/":
            return page(b, "Home", '<h1>Roombook</h1><p>Book a meeting room at the Harbour '
                        'office.</p><p data-testid="notice" hidden></p>', HOME_JS)
        if path == "/login":
            checked = " checked" if b.remember_default else ""
            return page(b, b.sign_in, f"<h1>{b.sign_in}</h1><form>"
                        '<label>Username <input name="username"></label>'
                        '<label>Password <input name="password" type="password"></label>'
                        f'<label><input type="checkbox" name="remember"{checked}> '
                        f'Remember me</label><button type="submit">{b.sign_in}</button>'
                        '<p role="alert" hidden></p></form>', LOGIN_JS)
        if path == b.rooms_path:
            options = "".join(f'<option value="{v}">{t}</option>' for v, t in (
                ("any", "Any size"), ("4", "4+ seats"), ("8", "8+ seats"),
                ("12", "12+ seats")))
            return page(b, "Meeting rooms", '<h1>Meeting rooms</h1><label>Capacity '
                        f'<select name="capacity">{options}</select></label>'
                        '<p data-testid="room-count"></p>'
                        '<p data-testid="filter-summary" hidden></p>'
                        '<p data-testid="popular" hidden></p><ul data-testid="room-list">'
                        "</ul>", ROOMS_JS)
        if path == "/book":
            room = next((r for r in ROOMS if r[0] == query.get("room", [""])[0]), None)
            if room is None:
                return None
            durations = "".join(
                f'<option value="{m}"{" selected" if m == b.duration_default else ""}>'
                f"{t}</option>" for m, t in ((30, "30 min"), (60, "1 hour"),
                                             (120, "2 hours")))
            return page(b, f"Book {room[1]}", f"<h1>Book {room[1]}</h1>"
                        f'<form data-room="{room[0]}" data-rate="{b.rates[room[0]]}">'
                        f'<p data-testid="rate">€{b.rates[room[0]]} per hour</p>'
                        f'<label>Duration <select name="duration">{durations}</select>'
                        '</label><label>Start time <select name="start" disabled>'
                        '</select></label><p data-testid="availability">Loading free '
                        'times…</p><label><input type="checkbox" name="rules"> I accept '
                        'the house rules</label><p data-testid="total"></p>'
                        '<button type="submit" disabled>Book</button></form>', BOOK_JS)
        if path == "/bookings":
            return page(b, "My bookings", '<h1>My bookings</h1><p data-testid="signed-in-as">'
                        '</p><p role="status" hidden></p><ul data-testid="bookings"></ul>',
                        BOOKINGS_JS)
        return None

    def api(self, method: str, path: str, query: dict[str, list[str]],
            body: dict[str, Any]) -> tuple[int, Any] | None:
        if method == "GET" and path == "/api/health":
            return 200, {"build": self.build.n, "seed": self.seed, "outage": self.outage}
        if method == "GET" and path in ("/api/notice", "/api/popular"):
            name = path.rsplit("/", 1)[1]
            time.sleep(self.delay(name))
            return 200, {"text": NOTICE if name == "notice" else POPULAR}
        if method == "GET" and path == "/api/rooms":
            raw = query.get("min", [""])[0]
            return 200, self.rooms(int(raw) if raw.isdigit() else None)
        if method == "GET" and path == "/api/availability":
            if self.outage:
                return 503, {"error": "the availability service is down"}
            return 200, {"room": query.get("room", [""])[0], "free": FREE_TIMES}
        if method == "POST" and path == "/api/login":
            user = body.get("username")
            if isinstance(user, str) and USERS.get(user) == body.get("password"):
                return 200, {"user": user}
            return 401, {"error": "wrong username or password"}
        if method == "GET" and path == "/api/bookings":
            return 200, self.bookings
        if method == "POST" and path == "/api/bookings":
            room = next((r for r in ROOMS if r[0] == body.get("room")), None)
            if room is None or body.get("start") not in FREE_TIMES:
                return 400, {"error": "no such room or time"}
            booking = {"room": room[0], "name": room[1], "start": body["start"],
                       "minutes": body.get("minutes")}
            with self.lock:
                self.bookings.append(booking)
            return 201, booking
        return None


def handler(app: App) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's
            pass

        def _send(self, status: int, kind: str, text: str) -> None:
            data = text.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", f"{kind}; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # a slow answer the browser stopped waiting for (its test ended)

        def _serve(self, method: str) -> None:
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            if url.path.startswith("/api/"):
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                answer = app.api(method, url.path, query, body if isinstance(body, dict)
                                 else {})
                status, value = answer or (404, {"error": "not found"})
                self._send(status, "application/json", json.dumps(value))
                return
            html = app.html(url.path, query) if method == "GET" else None
            if html is None:
                self._send(404, "text/html", page(app.build, "Not found",
                                                  "<h1>Not found</h1>"))
            else:
                self._send(200, "text/html", html)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self._serve("GET")

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self._serve("POST")

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=int, choices=sorted(BUILDS), required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--outage", action="store_true",
                        help="/api/availability answers 503 for the whole run")
    args = parser.parse_args(argv)
    app = App(BUILDS[args.build], args.seed, args.outage)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(app))
    server.daemon_threads = True
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
