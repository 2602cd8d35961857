"""Generate docs/api.md from the library API itself (``make docs``): every public method of
:class:`memidex.Memidex`, its parameters, what it returns, and every result type with the
keys its ``to_json()`` gives.

``tests/test_docs.py`` fails when docs/api.md differs from what this prints, and
``tests/test_api.py`` that a method returns ``Any`` or a dictionary, so the reference
cannot drift from the code.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import typing
from pathlib import Path

HEADER = """\
# Library API

Generated from the code by `scripts/gen_api_docs.py` (`make docs`); a test fails when this
page and the code disagree.

```python
from memidex import Memidex

with Memidex("path/to/repo") as m:          # the repository (memidex.toml or .git)
    hits = m.search("place order disabled", strategy="hybrid")
    print(hits.to_json())                     # what `knowledge search --json` prints
```

`Memidex` is the composition root: it builds the configuration, the store, the masker,
the index access and the write route, and each method delegates to one service
([architecture.md](architecture.md)). Every method returns a frozen value whose
`to_json()` is the object the matching command prints with `--json` (schemas in
[schemas/](schemas/)); errors are `memidex.MemidexError` subclasses with the exit code of
[exit-codes.md](exit-codes.md). A `Memidex` is a context manager: leaving it closes the
index.
"""


def _plain() -> type:
    from memidex.plain import Plain

    return Plain


def _facade() -> type:
    from memidex.app import Memidex

    return Memidex


def _namespace(module: object) -> dict[str, object]:
    """The module's names and those it imports only for type checking."""
    import ast

    ns = dict(vars(module))
    source = inspect.getsource(module)  # type: ignore[arg-type]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            exec(compile(ast.Module(node.body, []), "<type-checking>", "exec"), ns)
    return ns


def methods() -> list[tuple[str, inspect.Signature, object, str]]:
    """(name, signature, return type, first docstring paragraph) of each public method."""
    cls = _facade()
    hints_ns = _namespace(sys.modules[cls.__module__])
    out = []
    for name, fn in sorted(vars(cls).items()):
        if name.startswith("_") or not callable(fn) or isinstance(fn, type):
            continue
        hints = typing.get_type_hints(fn, globalns=hints_ns)
        doc = inspect.getdoc(fn) or ""
        out.append((name, inspect.signature(fn), hints.get("return"),
                    doc.split("\n\n")[0].replace("\n", " ")))
    return out


def _type_name(t: object) -> str:
    if t is type(None):
        return "None"
    if isinstance(t, type):
        return t.__name__
    return str(t).replace("typing.", "").replace("collections.abc.", "")


def result_types() -> list[type]:
    """The classes the methods return (and those they hold), each once, by name."""
    seen: dict[str, type] = {}
    for _n, _s, ret, _d in methods():
        for t in (ret, *typing.get_args(ret)):
            if isinstance(t, type) and hasattr(t, "to_json") or \
                    isinstance(t, type) and hasattr(t, "as_dict"):
                seen.setdefault(t.__name__, t)
    return [seen[k] for k in sorted(seen)]


def _params(sig: inspect.Signature) -> str:
    parts = []
    for p in list(sig.parameters.values())[1:]:
        text = p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
        if p.kind is inspect.Parameter.KEYWORD_ONLY and "*" not in parts:
            parts.append("*")
        parts.append(text)
    return ", ".join(parts)


def render() -> str:
    lines = [HEADER, "## Methods", ""]
    for name, sig, ret, doc in methods():
        lines.append(f"### `{name}({_params(sig)})` → `{_type_name(ret)}`")
        lines.append("")
        if doc:
            lines.append(doc)
            lines.append("")
    lines += ["## Result types", ""]
    for t in result_types():
        lines.append(f"### `{t.__module__}.{t.__name__}`")
        lines.append("")
        doc = (inspect.getdoc(t) or "").split("\n\n")[0].replace("\n", " ")
        if doc and not doc.startswith(f"{t.__name__}("):
            lines.append(doc)
            lines.append("")
        fields: list[str] = []
        if dataclasses.is_dataclass(t):
            fields = [f.name for f in dataclasses.fields(t)]
        elif issubclass(t, _plain()):  # memidex.plain's value types: their __slots__
            fields = [n for n in t.__slots__ if not n.startswith("_")]
        if fields:
            lines.append(f"Fields: {', '.join(f'`{n}`' for n in fields)}.")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    (root / "docs/api.md").write_text(render(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
