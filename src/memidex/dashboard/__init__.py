"""``memidex dashboard``: a local web application over the library API (docs/dashboard.md).

Starlette routes (:mod:`.app`) over pages (:mod:`.pages`) that call
:class:`memidex.app.Memidex` — the same methods, and so the same numbers, as the CLI's
``--json`` — rendered by autoescaped Jinja2 templates, with SVG charts drawn on the server
(:mod:`.charts`) and every asset shipped in ``static/``; served by uvicorn (:mod:`.server`)
on 127.0.0.1 unless a token guards it (:mod:`.security`). Only ``memidex dashboard``
imports this package: no other command pays for starlette, uvicorn or jinja2.
"""
