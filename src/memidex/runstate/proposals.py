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
from memidex.store.files import Store
from memidex.store.fsio import dump_json
from memidex.store.state import StateWriter, load_state

__all__ = ["Listing", "Proposals"]

_set = object.__setattr__  # a frozen value's fields, set once in __init__


class Listing:
    """The queue: the proposals that load (by ordinal, then id), and the files that
    do not."""

    proposals: tuple[Proposal, ...]
    damaged: tuple[Problem, ...]

    __slots__ = ("proposals", "damaged")

    def __init__(self, proposals: tuple[Proposal, ...] = (),
                 damaged: tuple[Problem, ...] | None = None) -> None:
        _set(self, "proposals", proposals)
        _set(self, "damaged", damaged if damaged is not None else tuple())

    def __repr__(self) -> str:
        return (f"Listing(proposals={self.proposals!r}, damaged={self.damaged!r})")

    def _key(self) -> tuple[object, ...]:
        return (self.proposals, self.damaged)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Listing) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")


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
