"""Print the package-level import graph of ``src/memidex`` as a Mermaid diagram.

Read from the source (``ast``), never by importing it: every ``import`` and ``from …
import`` of a memidex module counts, including those inside functions (lazy imports)
and under ``TYPE_CHECKING``. A node is a package under ``memidex`` (``write``,
``index`` …) or a top-level module (``config``, ``app`` …); ``memidex`` is the package
root (``__init__.py``). A solid arrow means some module imports the other at import
time; a dotted one, only inside a function or for type checking.

The output is deterministic (sorted), so ``docs/architecture.md`` can carry it and
``tests/test_docs.py`` can check that it is current. ``--write`` updates that page.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "memidex"
DOC = ROOT / "docs" / "architecture.md"
FENCE = "```mermaid"


def _unit(path: Path) -> str:
    rel = path.relative_to(SRC)
    if len(rel.parts) > 1:
        return rel.parts[0]
    return "memidex" if rel.stem == "__init__" else rel.stem


def _target_units(node: ast.Import | ast.ImportFrom) -> set[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif node.module is None or node.level:
        return set()  # relative imports: memidex has none
    elif node.module == "memidex":  # `from memidex import errors` names a module
        names = [f"memidex.{a.name}" if _is_module(a.name) else "memidex" for a in node.names]
    else:
        names = [node.module]
    out = set()
    for name in names:
        parts = name.split(".")
        if parts[0] == "memidex":
            out.add(parts[1] if len(parts) > 1 else "memidex")
    return out


def _is_module(name: str) -> bool:
    return (SRC / f"{name}.py").is_file() or (SRC / name / "__init__.py").is_file()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import in the module, and whether it runs when the module is imported."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def visit(node: ast.AST, eager: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append((child, eager))
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                visit(child, False)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    visit(ast.Module(body=[stmt], type_ignores=[]), False)
                for stmt in child.orelse:
                    visit(ast.Module(body=[stmt], type_ignores=[]), eager)
            else:
                visit(child, eager)

    visit(tree, True)
    return found


def graph(src: Path = SRC) -> dict[tuple[str, str], bool]:
    """(importer, imported) → True when some import of it runs at import time."""
    edges: dict[tuple[str, str], bool] = {}
    for path in sorted(src.rglob("*.py")):
        me = _unit(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, eager in _imports(tree):
            for target in _target_units(node):
                if target != me:
                    edges[(me, target)] = edges.get((me, target), False) or eager
    return edges


def render(src: Path = SRC) -> str:
    edges = graph(src)
    nodes = sorted({_unit(p) for p in src.rglob("*.py")})
    lines = [FENCE, "flowchart TD"]
    lines += [f"    {n}[{n}/]" if (src / n).is_dir() else f"    {n}" for n in nodes]
    for (a, b), eager in sorted(edges.items()):
        lines.append(f"    {a} {'-->' if eager else '-.->'} {b}")
    lines.append("```")
    return "\n".join(lines) + "\n"


def replace_block(text: str, block: str) -> str:
    """``text`` with its (single) Mermaid block replaced by ``block``."""
    start = text.index(FENCE)
    end = text.index("```\n", start + len(FENCE)) + 4
    return text[:start] + block + text[end:]


def main(argv: list[str]) -> int:
    block = render()
    if argv[1:] == ["--write"]:
        DOC.write_text(replace_block(DOC.read_text(encoding="utf-8"), block), encoding="utf-8")
    elif argv[1:]:
        sys.stderr.write("usage: import_graph.py [--write]\n")
        return 2
    else:
        sys.stdout.write(block)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
