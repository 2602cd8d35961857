"""Value types without :mod:`dataclasses`, for the modules on the CLI's start-up path.

A one-shot ``knowledge search`` is mostly start-up, and ``dataclasses`` is one of its
largest costs: importing it (it imports ``inspect``, ``ast``, ``dis`` and ``tokenize``)
takes ~5 ms, and defining each class ~0.2-0.4 ms (it compiles an ``__init__``, ``__eq__``,
``__repr__``, ``__hash__`` and, when frozen, ``__setattr__`` from source). The modules a
search imports define their types on these two bases instead. Each such class lists its
fields in ``__slots__`` (in the order a dataclass would have them), writes its own typed
``__init__``, and gets from the base what a dataclass would generate:

:class:`Plain`
    equality with an object of the same class field by field (``_eq_fields``: the
    fields compared, all by default), a ``repr`` naming every field (but ``_repr_hidden``
    ones), unhashable,
    :meth:`Plain.replace` for ``dataclasses.replace``, pickling and copying by field
    values — a ``@dataclass``.
:class:`Frozen`
    the same, plus a hash of the compared fields and assignment refused (``__init__``
    sets its fields with :data:`set_field`) — a ``@dataclass(frozen=True)``.

Anything else (fields(), asdict()) is written out where it is needed.

:class:`NamedTuple` stands for ``typing.NamedTuple`` at run time (importing ``typing``
costs ~2 ms): a class written on it is a ``collections.namedtuple`` of its annotated
fields, their defaults, its docstring and methods. Modules import it as
``typing.NamedTuple`` for mypy and as this one otherwise.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`'s: this module is on every start-up path
if TYPE_CHECKING:
    from typing import Any, Self

__all__ = ["Frozen", "NamedTuple", "Plain", "set_field"]

set_field = object.__setattr__
"""How a :class:`Frozen` type's ``__init__`` sets a field (its own ``__setattr__`` refuses)."""


class Plain:
    """Base of a mutable value type (see the module docstring)."""

    __slots__: tuple[str, ...] = ()
    _eq_fields: tuple[str, ...] | None = None
    """The fields equality (and a frozen type's hash) looks at; None: every field."""
    _repr_hidden: tuple[str, ...] = ()
    """Fields the ``repr`` leaves out (``field(repr=False)``)."""

    def _values(self) -> tuple[Any, ...]:
        names = self.__slots__ if self._eq_fields is None else self._eq_fields
        return tuple(getattr(self, n) for n in names)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Plain)
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # mutable: unhashable, as a dataclass

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__
                           if n not in self._repr_hidden)
        return f"{type(self).__qualname__}({fields})"

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` (``dataclasses.replace``)."""
        values = {n: getattr(self, n) for n in self.__slots__}
        values.update(changes)
        return type(self)(**values)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), tuple(getattr(self, n) for n in self.__slots__))


class Frozen(Plain):
    """Base of an immutable value type (see the module docstring)."""

    __slots__: tuple[str, ...] = ()

    def __hash__(self) -> int:  # type: ignore[override]  # (Plain: unhashable)
        return hash(self._values())

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of {type(self).__name__}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of {type(self).__name__}")



_NOT_COPIED = frozenset({"__annotations__", "__module__", "__qualname__", "__dict__",
                         "__weakref__", "__orig_bases__"})


class _NamedTupleType(type):
    def __new__(mcls, name: str, bases: tuple[type, ...], ns: dict[str, Any]) -> Any:
        if not bases:  # NamedTuple itself
            return super().__new__(mcls, name, bases, ns)
        import collections

        fields = list(ns.get("__annotations__", {}))
        defaults = [ns[f] for f in fields if f in ns]
        make: Any = collections.namedtuple  # (mypy reads only literal arguments)
        made = make(name, fields, defaults=defaults or None, module=ns.get("__module__"))
        made.__qualname__ = ns.get("__qualname__", name)
        for key, value in ns.items():
            if key not in _NOT_COPIED and key not in fields:
                setattr(made, key, value)
        return made


class NamedTuple(metaclass=_NamedTupleType):
    """The run-time stand-in for ``typing.NamedTuple`` (see the module docstring)."""
