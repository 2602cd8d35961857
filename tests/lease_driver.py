"""A small writer the lease tests run as real subprocesses.

    python tests/lease_driver.py ROOT COMMAND [options]

Commands: ``write`` (records PREFIX-0..N-1, ``--per-session`` writes per lease grant),
``apply`` (the fixed change set of the crash tests; ``--run-id``, ``--ordinal``),
``cli`` (the ``memidex`` command itself, on the arguments after ``--``: with ``--pause-at``
or ``--pause-at-state GLOB``, which stops it just before the fence of the first state
file whose name matches — a tests file, a run's result),
``pairs`` (``--count`` change sets of two records, PREFIX-a and PREFIX-b, both titled
with the same generation), ``hold`` (hold the lease for a
while), ``recover`` (acquire and release: replays the journal), ``curate`` (model steps
with saved answers; every model call appends a line to ``--calls``).

Prints one JSON object per line on stdout (``granted``, ``wrote``, ``paused``, ``done``,
``error``). Exit codes: 0 done, 3 lease held/fenced/conflict, 4 other memidex error,
5 OSError (an injected fault), 137 a crash injected with ``--crash-at``.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memidex._testing import at_step, crash_at, inject_io_fault, set_step_hook
from memidex.config import load_config
from memidex.errors import MemidexError
from memidex.records.ids import record_id
from memidex.records.model import Record
from memidex.store.files import Store
from memidex.write.authority import AUTHORITY_FILE
from memidex.write.writer import Remove, Write, WriterSession, writer_session

PRODUCT = "shop-web"


def make_record(name: str, version: int = 1, body: str | None = None) -> Record:
    anchor = f"page:/{name}"
    return Record(
        id=record_id("fact", anchor, PRODUCT, {}), kind="fact", status="active",
        product=PRODUCT, anchor=anchor, title=f"{name} v{version}",
        body=body if body is not None else f"What we know about {name}, version {version}.",
    )


def initial_records() -> list[Record]:
    """The state the crash tests start from."""
    return [make_record("keep"), make_record("update"), make_record("gone")]


def change_set(store: Store) -> list[Write | Remove]:
    """The change set the crash tests interrupt: two adds, an update and a removal."""
    gone = make_record("gone")
    return [
        Write(make_record("new")),
        Write(make_record("update", 2)),
        Remove(store.rel(store.record_path(gone.kind, gone.id))),
        Write(make_record("other")),
    ]


# --- helpers the tests import ---------------------------------------------------------

DRIVER = Path(__file__).resolve()


def scratch_dir() -> Iterator[Path]:
    """A temp folder on tmpfs when there is one (/dev/shm), else under /tmp.

    These tests kill and pause processes; they do not simulate power loss, so fsync
    durability is not what they check, and on a busy disk each fsync costs milliseconds.
    """
    base = Path("/dev/shm")
    parent = str(base) if base.is_dir() and os.access(base, os.W_OK) else None
    folder = Path(tempfile.mkdtemp(prefix="memidex-lease-", dir=parent))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ != "__main__":  # imported by the tests; the driver starts without pytest
    import pytest

    scratch = pytest.fixture(name="scratch")(scratch_dir)


def make_root(path: Path, ttl: float | None = None) -> Path:
    """A repository root with a ``memidex.toml``."""
    path.mkdir(parents=True, exist_ok=True)
    text = f'product = "{PRODUCT}"\n'
    if ttl is not None:
        text += f"lease_ttl_seconds = {ttl}\n"
    (path / "memidex.toml").write_text(text, encoding="utf-8")
    return path


def knowledge(root: Path) -> Path:
    return root / "agent-qa-knowledge" / "memory"


def store_for(root: Path) -> Store:
    return Store(load_config(root))


@contextlib.contextmanager
def authority(root: Path) -> Iterator[sqlite3.Connection]:
    """A plain connection to the authority DB, for tests to read (and damage) it."""
    conn = sqlite3.connect(knowledge(root) / AUTHORITY_FILE)
    try:
        yield conn
    finally:
        conn.close()


def driver_cmd(root: Path, *args: str) -> list[str]:
    return [sys.executable, str(DRIVER), str(root), *args]


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def drive(root: Path, *args: str, timeout: float = 60) -> tuple[int, list[dict[str, Any]]]:
    """Run the driver to its end: (exit code, its events); a traceback fails the test."""
    proc = subprocess.run(driver_cmd(root, *args), capture_output=True, text=True,
                          timeout=timeout)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, events(proc.stdout)


def copy_of(base: Path, name: str) -> Path:
    """A copy of the repository ``base`` beside it, named ``name``."""
    target = base.parent / name
    shutil.copytree(base, target)
    return target


def snapshot(root: Path) -> dict[str, bytes]:
    """Every record file under the knowledge folder: relative path -> bytes."""
    base = knowledge(root) / "records"
    if not base.exists():
        return {}
    return {p.relative_to(base).as_posix(): p.read_bytes()
            for p in sorted(base.rglob("*.md")) if p.is_file()}


def expected_files(records: list[Record]) -> dict[str, bytes]:
    from memidex.records.codec import dump_record

    return {f"{r.kind}/{r.id}.md": dump_record(r).encode() for r in records}


def wait_stopped(pid: int, timeout: float = 10.0) -> None:
    """Wait until ``pid`` is in the stopped state (after a SIGSTOP)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        data = Path(f"/proc/{pid}/stat").read_bytes()
        if data[data.rindex(b")") + 2:][:1] in (b"T", b"t"):
            return
        time.sleep(0.005)
    raise TimeoutError(f"pid {pid} did not stop")


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, "pid": os.getpid(), **fields}) + "\n")
    sys.stdout.flush()


def pause_at(spec: str) -> None:
    """SIGSTOP this process the N-th time it reaches a step (after saying so)."""

    def pause(name: str) -> None:
        emit("paused", step=name)
        os.kill(os.getpid(), signal.SIGSTOP)
        emit("resumed", step=name)

    at_step(spec, pause)


def pause_at_state(pattern: str) -> None:
    """SIGSTOP this process once, when it has staged the new bytes of the first state file
    whose name matches ``pattern`` and is about to fence them into place."""
    import fnmatch

    from memidex.write import writer

    original = writer.WriterSession.put_state
    current: list[Path] = []
    fired = False

    def put_state(self: WriterSession, path: Path, data: bytes) -> None:
        current[:] = [path]
        original(self, path, data)

    def hook(name: str) -> None:
        nonlocal fired
        if name == "state.staged" and not fired and current and fnmatch.fnmatch(
                current[0].name, pattern):
            fired = True
            emit("paused", step=name, path=str(current[0]))
            os.kill(os.getpid(), signal.SIGSTOP)
            emit("resumed", step=name)

    writer.WriterSession.put_state = put_state  # type: ignore[method-assign]
    set_step_hook(hook)


def model_call(calls: Path, step: str, i: int) -> dict[str, str]:
    """A stand-in for the model: deterministic answer, every call logged (fsynced)."""
    fd = os.open(calls, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (step + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    time.sleep(0.01)
    return {"title": f"curated {i}", "body": f"The curated belief number {i}."}


def run(args: argparse.Namespace) -> None:
    config = load_config(Path(args.root))
    store = Store(config)
    ttl = args.ttl if args.ttl is not None else config.lease_ttl_seconds
    offset = args.clock_offset

    def clock() -> float:
        return time.time() + offset

    def session() -> Any:
        return writer_session(store, wait=args.wait, ttl=ttl, maintenance=args.maintenance,
                              clock=clock, busy_timeout=args.busy_timeout)

    def granted(w: WriterSession) -> None:
        rec = w.recovery
        emit("granted", epoch=w.epoch, took_over=w.lease.took_over,
             staging_removed=len(rec.staging_removed), replayed=len(rec.replayed),
             skipped_live=len(rec.skipped_live), abandoned=len(rec.abandoned))

    if args.command == "write":
        names = [f"{args.prefix}-{i}" for i in range(args.count)]
        for start in range(0, len(names), args.per_session):
            with session() as w:
                granted(w)
                for name in names[start:start + args.per_session]:
                    wrote = w.write(make_record(name, args.version))
                    emit("wrote", name=name, epoch=w.epoch, changed=wrote)
    elif args.command == "setup":
        with session() as w:
            granted(w)
            for record in initial_records():
                w.write(record)
    elif args.command == "apply":
        with session() as w:
            granted(w)
            results = w.apply(change_set(store), command="crash-test", run_id=args.run_id,
                              ordinal=args.ordinal)
            emit("wrote", results=results, epoch=w.epoch)
    elif args.command == "pairs":
        # Change sets of two records whose titles carry the same generation: a reader
        # that sees the two disagree saw half a change set.
        with session() as w:
            granted(w)
            for gen in range(args.version, args.version + args.count):
                w.apply([Write(make_record(f"{args.prefix}-a", gen)),
                         Write(make_record(f"{args.prefix}-b", gen))], command="pairs")
                emit("wrote", generation=gen)
    elif args.command == "hold":
        with session() as w:
            granted(w)
            time.sleep(args.seconds)
            emit("released", epoch=w.epoch, lost=w.lease.lost)
    elif args.command == "recover":
        with session() as w:
            granted(w)
    elif args.command == "curate":
        calls = Path(args.calls)
        with session() as w:
            granted(w)
            for i in range(args.count):
                step = f"curate/{i}"
                if w.journal.step_done(step):
                    continue
                answer = w.load_answer(step)
                if answer is None:
                    w.journal.begin_step(step, {"candidate": i})
                    answer = model_call(calls, step, i)
                    w.save_answer(step, answer)
                record = make_record(f"curated-{i}", body=answer["body"])
                w.apply([Write(record)], command="curate", step_id=step)
                emit("wrote", name=record.id, epoch=w.epoch)
    emit("done")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lease_driver")
    parser.add_argument("root")
    parser.add_argument("command", choices=["write", "setup", "apply", "hold", "recover",
                                            "curate", "pairs", "cli"])
    parser.add_argument("--prefix", default="rec")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--per-session", type=int, default=1)
    parser.add_argument("--version", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--calls", default="calls.log")
    parser.add_argument("--run-id", default=None)
    parser.add_argument("--ordinal", type=int, default=None)
    parser.add_argument("--ttl", type=float, default=None)
    parser.add_argument("--wait", type=float, default=30.0)
    parser.add_argument("--busy-timeout", type=float, default=5.0)
    parser.add_argument("--clock-offset", type=float, default=0.0)
    parser.add_argument("--maintenance", action="store_true")
    parser.add_argument("--crash-at", default=None, help="STEP[:N], name or number")
    parser.add_argument("--pause-at", default=None, help="STEP[:N]: SIGSTOP there")
    parser.add_argument("--fault", default=None, help="write|fsync|replace:N:ENOSPC|EIO")
    parser.add_argument("--pause-at-state", default=None,
                        help="GLOB: SIGSTOP before the fence of that state file")
    parser.add_argument("--trace", action="store_true", help="print every protocol step")
    argv = sys.argv[1:] if argv is None else argv
    rest = argv[argv.index("--") + 1:] if "--" in argv else []  # cli: memidex's arguments
    args = parser.parse_args(argv[:len(argv) - len(rest) - (1 if rest else 0)])
    args.rest = rest
    if args.trace:
        set_step_hook(lambda name: emit("step", step=name))
    if args.crash_at:
        crash_at(args.crash_at)
    if args.pause_at:
        pause_at(args.pause_at)
    if args.pause_at_state:
        pause_at_state(args.pause_at_state)
    if args.command == "cli":
        from memidex.cli.main import main as memidex_main

        code = memidex_main(["--root", args.root, *args.rest])
        emit("exit", code=code)
        return code
    undo = None
    if args.fault:
        op, nth, name = args.fault.split(":")
        undo = inject_io_fault(op, int(nth), getattr(errno, name))
    try:
        run(args)
    except MemidexError as exc:
        emit("error", type=type(exc).__name__, message=exc.message)
        return exc.exit_code
    except OSError as exc:
        emit("error", type="OSError", errno=exc.errno, message=str(exc))
        return 5
    finally:
        if undo is not None:
            emit("fault", fired=undo())
    return 0


if __name__ == "__main__":
    sys.exit(main())
