"""The curation queue: ``queue/proposals/<id>.json``, one proposal per file
(``knowledge proposals``, docs/learning.md).

:class:`Proposals` is its one owner. One file that cannot be read back never blocks the
queue: :meth:`Proposals.all` lists every proposal that loads and names the others in
:attr:`Listing.damaged`; :meth:`Proposals.get` of a damaged one is a
:class:`memidex.errors.StateDamagedError` naming its file (``reject`` still drops it).
"""

from __future__ import annotations

from pathlib import Path

from memidex.errors import NotFoundError, Problem, StateDamagedError, UsageError
from memidex.learning.plan import Proposal
from memidex.plain import Frozen, set_field
from memidex.store.files import Store
from memidex.store.fsio import dump_json
from memidex.store.state import StateWriter, load_state

__all__ = ["Listing", "Proposals"]


class Listing(Frozen):
    """The queue: the proposals that load (by ordinal, then id), and the files that
    do not."""

    proposals: tuple[Proposal, ...]
    damaged: tuple[Problem, ...]

    __slots__ = ("proposals", "damaged")

    def __init__(self, proposals: tuple[Proposal, ...] = (),
                 damaged: tuple[Problem, ...] | None = None) -> None:
        set_field(self, "proposals", proposals)
        set_field(self, "damaged", damaged if damaged is not None else tuple())


class Proposals:
    """The curation queue of one knowledge folder."""

    def __init__(self, store: Store) -> None:
        self.dir = store.queue_dir / "proposals"

    def path(self, pid: str) -> Path:
        if not pid.startswith("p-") or not pid[2:].isalnum() or len(pid) > 40:
            raise UsageError(f"{pid[:60]!r} is not a proposal id",
                             hint="`memidex knowledge proposals` lists them")
        return self.dir / f"{pid}.json"

    def save(self, p: Proposal, writer: StateWriter) -> None:
        writer.put(self.path(p.id), dump_json(p.to_json(), indent=1))

    def get(self, pid: str) -> Proposal:
        path = self.path(pid)
        data = load_state(path, what="proposal")
        if data is None:
            raise NotFoundError(f"no proposal {pid}",
                                hint="`memidex knowledge proposals` lists them")
        return _decode(data, path)

    def exists(self, pid: str) -> bool:
        return self.path(pid).exists()

    def all(self) -> Listing:
        try:
            names = sorted(self.dir.glob("p-*.json"))
        except FileNotFoundError:
            return Listing()
        out: list[Proposal] = []
        damaged: list[Problem] = []
        for path in names:
            try:
                data = load_state(path, what="proposal")
                if data is not None:
                    out.append(_decode(data, path))
            except StateDamagedError as exc:
                damaged.append(Problem(str(path), 1, exc.message.removeprefix(f"{path}: ")))
        return Listing(tuple(sorted(out, key=lambda p: (p.ordinal, p.id))), tuple(damaged))

    def remove(self, pid: str, writer: StateWriter) -> None:
        writer.remove(self.path(pid))


def _decode(data: dict[str, object], path: Path) -> Proposal:
    try:
        proposal = Proposal.from_json(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise StateDamagedError(f"{path}: the proposal is damaged (missing or bad "
                                f"{exc})") from None
    if path.stem != proposal.id:
        raise StateDamagedError(f"{path}: the proposal is damaged (it names {proposal.id})")
    return proposal
