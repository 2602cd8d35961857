"""Serving: the brief a test is given before it runs (SPEC §5, docs/brief.md).

:mod:`memidex.serve.brief` assembles it — policies, then learned records ranked by trust
and anchor overlap (:mod:`~memidex.serve.rank`), fenced as untrusted data
(:mod:`~memidex.fence`), fitted to a token budget (:mod:`~memidex.serve.budget`),
rendered (:mod:`~memidex.serve.render`) — and :mod:`memidex.runstate.served` records what
was served. Every SQL statement it needs is in :mod:`memidex.index.briefing`.
"""

from __future__ import annotations

__all__: list[str] = []
