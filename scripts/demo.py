"""`make demo`: a short story of what memidex does, told on the bundled example shop.

What the index holds, a search, a brief, the records passing the CI check, and then what
each example run taught when the example knowledge is learned again from the runs in a
scratch copy (scripts/learn_examples.py). Each step runs the real `memidex` command and
says, in a line, what it shows; the command is printed so you can run it yourself.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))


def memidex(*args: str, root: Path = ROOT, show: bool = False) -> str:
    out = subprocess.run([sys.executable, "-m", "memidex", "--root", str(root), *args],
                         capture_output=True, text=True, check=False)
    if out.returncode not in (0, 1):
        raise SystemExit(f"memidex {' '.join(args)} failed:\n{out.stderr}")
    if show:
        print(f"  $ memidex {' '.join(_quote(a) for a in args)}")
        print("".join(f"    {line}\n" for line in out.stdout.rstrip("\n").splitlines()))
    return out.stdout


def _quote(arg: str) -> str:
    return f'"{arg}"' if " " in arg else arg


def heading(n: int, text: str) -> None:
    print(f"\n{n}. {text}\n")


def main() -> int:
    print("memidex on the example shop (agent-qa-knowledge/, policies/): what an agent "
          "testing a small web shop has learned.")

    heading(1, "What the index holds")
    memidex("knowledge", "rebuild-index")
    doctor = json.loads(memidex("doctor", "--json"))
    listing = json.loads(memidex("knowledge", "list", "--all-products", "--json"))
    by_product = Counter(r["product"] for r in listing["records"])
    kinds = Counter(r["kind"] for r in listing["records"])
    statuses = Counter(r["status"] for r in listing["records"])
    print(f"  {listing['count']} records — "
          + ", ".join(f"{n} of {p}" for p, n in by_product.most_common())
          + f" — and {doctor['index'].get('policies', 0)} policies, in a SQLite index derived "
          "from the Markdown files (safe to delete).")
    print("  kinds: " + ", ".join(f"{n} {k}" for k, n in kinds.most_common()))
    print("  statuses: " + ", ".join(f"{n} {s}" for s, n in statuses.most_common()))
    print(f"  search level: {doctor['level']}; doctor says "
          f"{'healthy' if doctor['healthy'] else 'unhealthy'}.")

    heading(2, "A search, scoped to the product in memidex.toml (shop-web), best first")
    memidex("knowledge", "search", "place order disabled", "--limit", "3", show=True)

    heading(3, "A brief: what test checkout-happy-path should know before it runs "
               "(policies first, app text fenced as untrusted data)")
    memidex("brief", "checkout-happy-path", "--anchor", "page:/checkout", "--no-record",
            "--limit", "3", "--budget", "900", show=True)

    heading(4, "The check CI runs on every pull request")
    memidex("knowledge", "check", show=True)

    heading(5, "What each example run taught (learned again in a scratch copy)")
    from learn_examples import learn

    with tempfile.TemporaryDirectory(prefix="memidex-demo-") as d:
        shop = learn(Path(d), quiet=True)
        titles = {r["id"]: r["title"] for r in json.loads(memidex(
            "knowledge", "list", "--all-products", "--json", root=shop))["records"]}
        for row in json.loads(memidex("runs", "list", "--json", root=shop))["runs"]:
            detail = json.loads(memidex("runs", "show", row["run_id"], "--json", root=shop))
            verdicts = ", ".join(f"{n} {v}" for v, n in sorted(row["verdicts"].items()))
            causes = Counter(t["cause"] for t in detail["tests"] if t["cause"])
            why = (" (" + ", ".join(f"{n} {c}" for c, n in causes.most_common()) + ")"
                   if causes else "")
            changes = ", ".join(f"{n} {op}" for op, n in row["changes"].items()) or \
                "nothing new"
            held = f"; {row['proposals']} held back for a person" if row["proposals"] else ""
            print(f"  {row['run_id']} (run {row['ordinal']}, build {row['build_tag'] or '-'}"
                  f"): {verdicts}{why} → {changes}{held}")
            shown = [c for c in detail["changes"] if c["op"] in ("add", "supersede",
                                                               "deprecate", "unknown")]
            for c in shown[:2]:
                print(f"      {c['op']}: {titles.get(c['id'], c['id'])}")
            if len(shown) > 2:
                print(f"      … and {len(shown) - 2} more")
    print("\nNext: the tour in README.md, `memidex help topics` for the documentation, "
          "`memidex mcp` for agents.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
