"""Where a reading command's answer comes from: the team index, or the local index.

With ``[index] url`` (or ``MEMIDEX_INDEX_URL``) set, ``search``, ``show``, ``list`` and
``brief`` — of the CLI, the library and the MCP tools, which all go through the facade —
read from PostgreSQL (:mod:`memidex.teamindex.read`), each in one ``REPEATABLE READ``
session, so an answer is one whole snapshot; the same ranking code runs on either source.
:class:`TeamReading` is the one owner of that choice for one facade: it connects once
(and again after the connection broke), keeps the snapshot of the last answer, decides
team or local, and closes the connection with the facade.

The local index answers instead, with one warning (``warning`` on the result: the CLI
prints it on stderr, the JSON's ``note``/``notes`` carry it), when

* the server cannot be reached within ``[index] timeout`` seconds, refuses the
  credentials, or holds nothing for the branch (after a failure a long-lived facade — an
  MCP server — tries again after :data:`RETRY_SECONDS`);
* its snapshot is **behind** this clone: the commit it serves is an ancestor of this
  clone's head of the same branch (``refs/heads/BRANCH``, else ``origin/BRANCH``), so
  this clone has commits of the branch the team index lacks. A snapshot this clone does
  not have (CI pushed a newer commit, not fetched yet) or that has diverged still answers;
* a search asks for a strategy the team index does not serve (``vector``, ``hybrid``:
  it holds no vectors);
* ``show`` names a record the snapshot does not have, or whose file at the snapshot's
  commit this clone has not fetched.

Every answer says where it came from: ``source`` (``team`` or ``local``) and ``commit``
(the snapshot's commit, or this clone's HEAD; None outside git). Without a URL nothing
here connects or imports the team index, and every answer is ``local``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from memidex.app.arguments import anchors_of, check_limit, kinds_of, statuses_of
from memidex.app.reading import LEXICAL, Reading
from memidex.config import Config
from memidex.errors import (
    AmbiguousIdError,
    ConfigError,
    IndexUnavailableError,
    MemidexError,
    NotFoundError,
    StorageError,
    UsageError,
)

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from typing import TypeVar

    from memidex.app.answers import RecordList, SearchResult, ShownRecord
    from memidex.index.db import IndexDB
    from memidex.serve.values import Brief
    from memidex.teamindex.read import Session, Snapshot, TeamIndex

__all__ = ["LOCAL", "RETRY_SECONDS", "TEAM", "TEAM_STRATEGIES", "TeamReading"]

if TYPE_CHECKING:
    T = TypeVar("T")
    R = TypeVar("R", "SearchResult", "ShownRecord", "RecordList", "Brief")
TEAM, LOCAL = "team", "local"
RETRY_SECONDS = 5.0
"""After the team index failed, a long-lived facade answers locally this long before it
tries the server again (each CLI command is a new process and always tries)."""
TEAM_STRATEGIES = ("lexical",)
"""The search strategies the team index serves (it holds no vectors yet: ``vector`` and
``hybrid`` are the local index's, :mod:`memidex.app.semantic`)."""


class _Declined(Exception):
    """The team index does not answer this question: the local index does (the reason)."""


class TeamReading:
    """The reading commands of one facade, answered by the team index when one is
    configured and fit to answer, else by :class:`Reading` (see the module doc)."""

    def __init__(self, config: Config, reading: Reading) -> None:
        self.config = config
        self.reading = reading
        self.url = config.index.url
        self._ti: TeamIndex | None = None
        self._failed: tuple[float, str] | None = None  # (when, why) the server failed
        self.retry_seconds = RETRY_SECONDS
        self._heads: dict[str, tuple[float, str | None]] = {}
        self._behind: dict[tuple[str, str], bool] = {}
        self._masked: dict[tuple[str | None, tuple[tuple[str, str], ...]], bool] = {}
        self.snapshot: Snapshot | None = None
        """The snapshot of the last answer the team index gave."""
        self.last_warning = ""
        self.on_change: Callable[[str], None] | None = None
        """Told one line when the source changes (a server logs it): why the local index
        answers now, or that the team index answers again."""

    # --- the connection ------------------------------------------------------------

    def close(self) -> None:
        if self._ti is not None:
            self._ti.close()
            self._ti = None

    def _where(self) -> str:
        from memidex.config.tables import redact_url

        return f"the team index at {redact_url(self.url or '')}"

    def _connected(self) -> TeamIndex:
        """The team index (connected on first use); a failure within
        :data:`RETRY_SECONDS` of the last one is :class:`_Declined` at once."""
        if self._failed is not None and \
                time.monotonic() - self._failed[0] < self.retry_seconds:
            raise _Declined(self._failed[1])
        if self._ti is None:
            from typing import cast

            from memidex.teamindex.read import TeamIndex

            try:
                self._ti = TeamIndex.connect(cast(str, self.url),
                                             branch=self.config.index.branch,
                                             timeout=self.config.index.timeout)
            except MemidexError as exc:
                raise self._failure(exc) from None
        return self._ti

    def _failure(self, exc: MemidexError) -> _Declined:
        """Forget the connection after ``exc``; the reason the local index answers."""
        self.close()
        why = exc.message if exc.message.startswith("the team index") else \
            f"{self._where()}: {exc.message}"
        why = " ".join(why.split()).replace("( ", "(")  # libpq's lines and tabs: one line
        self._failed = (time.monotonic(), why)
        return _Declined(why)

    # --- the choice ------------------------------------------------------------------

    def _team(self, question: Callable[[Session], T]) -> tuple[T, Snapshot] | str:
        """``question`` answered in one session of the team index, with its snapshot;
        or why the local index answers ("" when no team index is configured)."""
        if not self.url:
            return ""
        entered = False
        try:
            ti = self._connected()
            try:
                with ti.session() as s:
                    entered = True
                    self._check_current(s.snapshot)
                    self._check_masked(s)
                    value = question(s)
            except (IndexUnavailableError, StorageError, ConfigError) as exc:
                raise self._failure(exc) from None
            except UsageError as exc:
                if entered:
                    raise  # the question's own error (an unknown product, a bad --at)
                raise self._failure(exc) from None  # several branches, none configured
        except _Declined as declined:
            return self._fell_back(str(declined))
        self._failed = None
        self.snapshot = s.snapshot
        if self.last_warning and self.on_change is not None:
            self.on_change(f"{self._where()} answers again (commit {s.snapshot.commit[:12]})")
        self.last_warning = ""
        return value, s.snapshot

    def _fell_back(self, why: str) -> str:
        line = f"{why}: answered from the local index"
        if not self.last_warning and self.on_change is not None:
            self.on_change(line)  # the team index answered last (or nothing did yet)
        self.last_warning = line
        return line

    def _check_current(self, snap: Snapshot) -> None:
        """:class:`_Declined` when this clone's head of the branch has commits the
        snapshot lacks (the snapshot's commit is a strict ancestor of it)."""
        from memidex.teamindex.gitread import is_ancestor

        head = self._branch_head(snap.branch)
        if head is None or head == snap.commit:
            return
        key = (snap.commit, head)
        if key not in self._behind:
            self._behind[key] = is_ancestor(self.config.root, snap.commit, head) is True
        if self._behind[key]:
            raise _Declined(f"{self._where()} serves {snap.branch} at {snap.commit[:12]}, "
                            f"behind this clone's {snap.branch} ({head[:12]})")

    def _check_masked(self, s: Session) -> None:
        """:class:`_Declined` when this machine's secrets file holds secrets and the push
        masked the branch with other ones: the team index may hold them, so this clone's
        own index answers — whatever the question, so which one answers tells nothing of
        a guess. (One digest a snapshot and secrets file: ~65 ms, only with secrets.)"""
        masker = self.reading.masker()
        if not masker.secrets:
            return  # nothing to hide from this reader
        mark = s.secrets_mark()
        key = (mark, masker.secrets)
        if key not in self._masked:
            from memidex.index.maskmark import same_secrets

            self._masked = {key: same_secrets(masker, mark)}
        if not self._masked[key]:
            raise _Declined(f"{self._where()} was pushed masked with other secrets than "
                            f"{self.config.secrets_file}")

    def _branch_head(self, branch: str) -> str | None:
        """This clone's head of ``branch``, looked up at most once a
        ``reading.recheck_seconds`` (a CLI command looks once)."""
        from memidex.teamindex.gitread import branch_head

        seen = self._heads.get(branch)
        now = time.monotonic()
        if seen is None or now - seen[0] >= self.reading.recheck_seconds:
            seen = (now, branch_head(self.config.root, branch))
            self._heads[branch] = seen
        return seen[1]

    def declines(self, strategy: str) -> str:
        """Why the team index does not serve a search by ``strategy`` ("" when it does)."""
        if strategy in TEAM_STRATEGIES:
            return ""
        return (f"{self._where()} holds no vectors and serves the lexical strategy only "
                f"(strategy {strategy})")

    def local_commit(self) -> str | None:
        """This clone's HEAD: the one the local index last looked at through git (no git
        call; None there: no commit yet), else asked of git (the records read directly);
        None outside git."""
        from memidex.index.staleness import Snapshot as Look

        db = self.reading.open(refresh=False)
        if db is not None:
            try:
                look = Look.from_json(db.meta().get("snapshot"))
            except IndexUnavailableError:
                look = None
            if look is not None and (look.head or look.method == "git"):
                return look.head
        from memidex.teamindex.gitread import resolve

        try:
            return resolve(self.config.root, "HEAD")[0]
        except MemidexError:
            return None

    def _local(self, result: R, warning: str) -> R:
        """``result`` of the local index, saying so (and why, when a team index is
        configured)."""
        return result.replace(source=LOCAL, commit=self.local_commit(), warning=warning)

    # --- the reading commands --------------------------------------------------------

    def search(self, text: str, *, product: str | None = None, all_products: bool = False,
               kinds: Sequence[str] = (), statuses: Sequence[str] | None = None,
               anchors: Sequence[str] = (), limit: int = 10, near: Sequence[str] = (),
               strategy: str = "lexical", fusion: str = "append") -> SearchResult:
        """``knowledge search`` (:meth:`Reading.search`) from the team index, else the
        local one. Only the ``lexical`` strategy is served by the team index; ``vector``
        and ``hybrid`` are the local index's (with the warning saying so)."""
        from memidex.app.answers import SearchResult
        from memidex.app.arguments import FUSIONS, STRATEGIES
        from memidex.search.ranking import SearchQuery

        def local(warning: str) -> SearchResult:
            return self._local(self.reading.search(
                text, product=product, all_products=all_products, kinds=kinds,
                statuses=statuses, anchors=anchors, limit=limit, near=near,
                strategy=strategy, fusion=fusion), warning)

        if not self.url or strategy not in STRATEGIES or fusion not in FUSIONS or \
                (near and strategy != "lexical"):
            return local("")  # (a bad combination: the local search's usage error)
        check_limit(limit)
        q = SearchQuery(text=text, product=self.reading.product(product, all_products),
                        kinds=kinds_of(kinds), statuses=statuses_of(statuses),
                        anchors=anchors_of(anchors, flag="--anchor"), limit=limit,
                        near=anchors_of(near, flag="--near"))
        why = self.declines(strategy)
        got = self._fell_back(why) if why else self._team(lambda s: s.search(q))
        if isinstance(got, str):
            return local(got)
        hits, snap = got
        return SearchResult(text, q.product, LEXICAL, self.reading.masker().mask_hits(hits),
                            source=TEAM, commit=snap.commit)

    def show(self, id_or_prefix: str) -> ShownRecord:
        """``knowledge show`` (:meth:`Reading.show`): the record's file as the snapshot's
        commit has it (read from this clone's git objects), else the local one."""
        from memidex.app.answers import ShownRecord
        from memidex.records.codec import parse_record_bytes
        from memidex.teamindex.gitread import blob_at

        prefix = id_or_prefix.strip()
        if not self.url or not prefix:
            return self._local(self.reading.show(id_or_prefix), "")
        got = self._team(lambda s: [(r.id, r.path) for r in s.find_ids(prefix)])
        if isinstance(got, str):
            return self._local(self.reading.show(id_or_prefix), got)
        candidates, snap = got
        ids = sorted({c[0] for c in candidates})
        if len(ids) > 1:
            shown = ", ".join(ids[:5]) + (" …" if len(ids) > 5 else "")
            raise AmbiguousIdError(f"{prefix!r} matches {len(ids)} records: {shown}")
        at = f"{self._where()} (commit {snap.commit[:12]})"
        if not ids:
            return self._local(self.reading.show(id_or_prefix), self._fell_back(
                f"no record with id or prefix {prefix[:200]!r} in {at}"))
        paths = [c[1] for c in candidates if c[0] == ids[0]]
        data = blob_at(self.config.root, snap.commit, paths[0])
        if data is None:
            why = self._fell_back(f"{at}: this clone does not have that commit's {paths[0]}")
            try:
                return self._local(self.reading.show(id_or_prefix), why)
            except NotFoundError:
                raise NotFoundError(f"{ids[0]} is in {at}, which this clone has not fetched",
                                    hint=f"git fetch origin {snap.branch}") from None
        shown_record = ShownRecord(parse_record_bytes(data, paths[0]), paths[0],
                                   data.decode("utf-8"), tuple(paths[1:]))
        return self.reading.masker().mask_shown(shown_record).replace(source=TEAM,
                                                                      commit=snap.commit)

    def list_records(self, *, product: str | None = None, all_products: bool = False,
                     kinds: Sequence[str] = (), statuses: Sequence[str] | None = None,
                     anchors: Sequence[str] = (), limit: int | None = None) -> RecordList:
        """``knowledge list`` (:meth:`Reading.list_records`) from the team index, else
        the local one."""
        from memidex.app.answers import RecordList

        def local(warning: str) -> RecordList:
            return self._local(self.reading.list_records(
                product=product, all_products=all_products, kinds=kinds, statuses=statuses,
                anchors=anchors, limit=limit), warning)

        if not self.url:
            return local("")
        chosen = self.reading.product(product, all_products)
        k, s = kinds_of(kinds), (() if statuses is None else statuses_of(statuses))
        a = anchors_of(anchors, flag="--anchor")
        if limit is not None:
            check_limit(limit)
        got = self._team(lambda session: session.list_records(
            product=chosen, kinds=k, statuses=s, anchors=a, limit=limit))
        if isinstance(got, str):
            return local(got)
        rows, snap = got
        return RecordList(tuple(self.reading.masker().mask_summaries(rows)), source=TEAM,
                          commit=snap.commit)

    def brief(self, test_id: str, *, product: str | None = None,
              anchors: Sequence[str] = (), at: int | None = None,
              budget: int | None = None, limit: int | None = None,
              explain: bool = False, record: bool = True) -> Brief:
        """``memidex brief`` (:meth:`Reading.brief`) ranked from the team index — its
        candidates, policies and the run stores every pushing machine merged (the test's
        anchors, the product's run counter) beside this clone's — else the local one."""
        from memidex.serve.brief import BriefRequest, build_brief

        def local(warning: str) -> Brief:
            return self._local(self.reading.brief(
                test_id, product=product, anchors=anchors, at=at, budget=budget,
                limit=limit, explain=explain, record=record), warning)

        if not self.url:
            return local("")
        chosen = self.reading.one_product(product)
        masker = self.reading.masker()

        from typing import cast  # (a team index is configured: its connection costs more)

        def question(s: Session) -> Brief:
            req = BriefRequest(test_id, chosen, (*anchors, *s.test_anchors(chosen, test_id)),
                               at, budget, limit, explain)
            return build_brief(self.config, self.reading.store, cast("IndexDB", s), req,
                               masker=masker, record=record,
                               floor=max(0, s.next_ordinal(chosen) - 1))

        got = self._team(question)
        if isinstance(got, str):
            return local(got)
        brief, snap = got
        return brief.replace(source=TEAM, commit=snap.commit)

