"""Charts as SVG, drawn on the server: no script, no library, nothing fetched.

Every function returns :class:`markupsafe.Markup` that a template puts in the page as it
is, so every piece of text in it (a test id, a build tag, a record title in a tooltip) is
escaped here, once, with :func:`markupsafe.escape`. Colours are CSS classes
(``static/dashboard.css``): the Content-Security-Policy allows no inline style.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

__all__ = ["Bar", "Cell", "LinePoint", "TimelineRun", "stacked_bars", "trend", "timeline",
           "trust_line"]


def _num(x: float) -> str:
    """A coordinate, short and locale-free."""
    return f"{x:.1f}".rstrip("0").rstrip(".")


def _svg(width: float, height: float, label: str, body: list[str], cls: str) -> Markup:
    return Markup(
        f'<svg class="chart {cls}" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'width="{_num(width)}" height="{_num(height)}" '
        f'viewBox="0 0 {_num(width)} {_num(height)}" aria-label="{escape(label)}">'
        f'<title>{escape(label)}</title>{"".join(body)}</svg>')


def _css(name: str) -> str:
    """A CSS class name from a vocabulary word (``app-bug`` stays, anything odd is ``x``)."""
    return name if name.replace("-", "").isalnum() else "x"


# --- a test's trend: one square per run ---------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One run in a test's trend: ``outcome`` is a CSS class (pass, flaky, environment,
    app-bug, test-bug, unknown, skip, absent), ``label`` its tooltip."""

    outcome: str
    label: str


def trend(cells: Sequence[Cell], *, label: str, size: int = 10, gap: int = 2) -> Markup:
    """A row of squares, oldest run first (the microsoft/testfx style of a test's last
    runs at a glance)."""
    body = []
    for i, c in enumerate(cells):
        x = i * (size + gap)
        body.append(f'<rect class="o-{_css(c.outcome)}" x="{x}" y="0" width="{size}" '
                    f'height="{size}" rx="2"><title>{escape(c.label)}</title></rect>')
    width = max(1, len(cells) * (size + gap) - gap)
    return _svg(width, size, label, body, "trend")


# --- causes per build: stacked bars ---------------------------------------------------


@dataclass(frozen=True)
class Bar:
    """One build's bar: how many failures of each cause its runs had."""

    label: str
    parts: Mapping[str, int]


def stacked_bars(bars: Sequence[Bar], order: Sequence[str], *, label: str,
                 height: int = 160, bar: int = 28, gap: int = 18) -> Markup:
    """Vertical bars, one per build in build order, each stacked by cause (``order``,
    bottom first), with the total above and the build tag below."""
    top, bottom, left = 16, 34, 30
    tallest = max([sum(b.parts.values()) for b in bars] + [1])
    inner = height - top - bottom
    body = [f'<line class="axis" x1="{left - 4}" y1="{top + inner}" '
            f'x2="{left + len(bars) * (bar + gap)}" y2="{top + inner}"/>',
            f'<text class="tick" x="{left - 8}" y="{top + 4}" text-anchor="end">'
            f'{tallest}</text>',
            f'<text class="tick" x="{left - 8}" y="{top + inner}" text-anchor="end">0</text>']
    for i, b in enumerate(bars):
        x = left + i * (bar + gap)
        y = float(top + inner)
        for cause in order:
            n = b.parts.get(cause, 0)
            if not n:
                continue
            h = inner * n / tallest
            y -= h
            body.append(f'<rect class="o-{_css(cause)}" x="{x}" y="{_num(y)}" width="{bar}" '
                        f'height="{_num(h)}"><title>{escape(b.label)}: {n} {escape(cause)}'
                        f'</title></rect>')
        total = sum(b.parts.values())
        body.append(f'<text class="value" x="{x + bar / 2}" y="{_num(y - 4)}" '
                    f'text-anchor="middle">{total}</text>')
        body.append(f'<text class="tick" x="{x + bar / 2}" y="{height - bottom + 16}" '
                    f'text-anchor="middle">{escape(_short(b.label, 10))}</text>')
    width = left + max(1, len(bars)) * (bar + gap)
    return _svg(width, height, label, body, "bars")


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


# --- a record's trust over run ordinals -----------------------------------------------


@dataclass(frozen=True)
class LinePoint:
    """A trust value at a run ordinal, of version ``version`` (a new version starts a new
    segment)."""

    ordinal: int
    value: float
    version: int
    status: str


def trust_line(points: Sequence[LinePoint], *, label: str, width: int = 640,
               height: int = 180) -> Markup:
    """Trust (0..1) against the run ordinal: one polyline per version, a dot on each
    version's first ordinal, version boundaries as dashed lines."""
    left, right, top, bottom = 36, 12, 10, 26
    inner_w, inner_h = width - left - right, height - top - bottom
    body = [f'<line class="axis" x1="{left}" y1="{top + inner_h}" x2="{width - right}" '
            f'y2="{top + inner_h}"/>',
            f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{top + inner_h}"/>']
    for v in (0.0, 0.5, 1.0):
        gy = top + inner_h * (1 - v)
        body.append(f'<line class="grid" x1="{left}" y1="{_num(gy)}" x2="{width - right}" '
                    f'y2="{_num(gy)}"/><text class="tick" x="{left - 6}" y="{_num(gy + 4)}" '
                    f'text-anchor="end">{v:g}</text>')
    if not points:
        body.append(f'<text class="tick" x="{width / 2}" y="{height / 2}" '
                    'text-anchor="middle">no ordinal in any version\'s window</text>')
        return _svg(width, height, label, body, "line")
    lo, hi = points[0].ordinal, points[-1].ordinal
    span = max(1, hi - lo)

    def x(o: int) -> float:
        return left + inner_w * (o - lo) / span

    def y(v: float) -> float:
        return top + inner_h * (1 - max(0.0, min(1.0, v)))

    segments: list[list[LinePoint]] = []
    for p in points:
        if segments and segments[-1][-1].version == p.version:
            segments[-1].append(p)
        else:
            segments.append([p])
    for seg in segments:
        first = seg[0]
        if first is not points[0]:
            body.append(f'<line class="boundary" x1="{_num(x(first.ordinal))}" y1="{top}" '
                        f'x2="{_num(x(first.ordinal))}" y2="{top + inner_h}"/>')
        coords = " ".join(f"{_num(x(p.ordinal))},{_num(y(p.value))}" for p in seg)
        body.append(f'<polyline class="v v{first.version % 6}" points="{coords}"/>')
        body.append(f'<circle class="v{first.version % 6}" cx="{_num(x(first.ordinal))}" '
                    f'cy="{_num(y(first.value))}" r="3"><title>version {first.version} '
                    f'({escape(first.status)}) from ordinal {first.ordinal}: trust '
                    f'{first.value:.3f}</title></circle>')
    last = points[-1]
    body.append(f'<circle class="now" cx="{_num(x(last.ordinal))}" cy="{_num(y(last.value))}" '
                f'r="3.5"><title>ordinal {last.ordinal}: trust {last.value:.3f}</title>'
                '</circle>')
    for o in sorted({lo, hi}):
        body.append(f'<text class="tick" x="{_num(x(o))}" y="{height - 8}" '
                    f'text-anchor="middle">{o}</text>')
    return _svg(width, height, label, body, "line")


# --- the timeline of builds and runs ----------------------------------------------------


@dataclass(frozen=True)
class TimelineRun:
    """A run on the timeline: its ordinal, build, worst outcome (a CSS class) and tooltip."""

    ordinal: int
    build: str | None
    outcome: str
    label: str
    href: str


def timeline(runs: Sequence[TimelineRun], *, label: str, width: int = 900) -> Markup:
    """Runs as dots along the run ordinals, each build a band with its tag; a dot links to
    its run's page."""
    height, left, right, axis = 84, 14, 14, 54
    if not runs:
        return _svg(width, 30, label, ['<text class="tick" x="10" y="20">no runs yet</text>'],
                    "timeline")
    lo, hi = runs[0].ordinal, runs[-1].ordinal
    span = max(1, hi - lo)
    inner = width - left - right

    def x(o: int) -> float:
        return left + inner * (o - lo) / span if hi > lo else left + inner / 2

    body: list[str] = []
    bands: list[tuple[str | None, int, int]] = []
    for r in runs:
        if bands and bands[-1][0] == r.build:
            bands[-1] = (r.build, bands[-1][1], r.ordinal)
        else:
            bands.append((r.build, r.ordinal, r.ordinal))
    for i, (build, a, b) in enumerate(bands):
        x0, x1 = x(a) - 6, x(b) + 6
        body.append(f'<rect class="band b{i % 2}" x="{_num(x0)}" y="8" '
                    f'width="{_num(max(12.0, x1 - x0))}" height="{axis - 16}" rx="4">'
                    f'<title>build {escape(build or "(none)")}: ordinals {a}..{b}</title>'
                    '</rect>')
        body.append(f'<text class="tick" x="{_num(x0 + 2)}" y="20">'
                    f'{escape(_short(build or "-", 14))}</text>')
    body.append(f'<line class="axis" x1="{left}" y1="{axis}" x2="{width - right}" '
                f'y2="{axis}"/>')
    for r in runs:
        body.append(f'<a href="{escape(r.href)}"><circle class="o-{_css(r.outcome)}" '
                    f'cx="{_num(x(r.ordinal))}" cy="{axis - 14}" r="5"><title>'
                    f'{escape(r.label)}</title></circle></a>')
    for o in sorted({lo, hi}):
        body.append(f'<text class="tick" x="{_num(x(o))}" y="{axis + 16}" '
                    f'text-anchor="middle">{o}</text>')
    return _svg(width, height, label, body, "timeline")
