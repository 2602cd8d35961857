"""A throw-away PostgreSQL cluster for the team-index tests and bench (docs/team-index.md).

``PgServer.create()`` runs ``initdb`` into a fresh temp folder and ``start()`` serves it
on a Unix socket in that folder only (no TCP), with the ``vector`` extension created in
the ``memidex`` database. As root, the server cannot run as root: the folder is given to
the ``postgres`` user and ``initdb`` / ``pg_ctl`` run through ``runuser -u postgres``.

Nothing here skips: a machine without PostgreSQL or pgvector gets :class:`PgMissing`
naming ``scripts/install_pg.sh``, which installs both.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

INSTALL_HINT = "run `sudo bash scripts/install_pg.sh` (PostgreSQL 15 and pgvector)"
DATABASE = "memidex"
PASSWORD_ROLE = "memidex_pw"
PASSWORD = "s3cret-team-index"


class PgMissing(RuntimeError):
    """PostgreSQL (or pgvector) is not installed where the tests look."""


def find_bindir() -> Path:
    """The folder holding initdb, pg_ctl and postgres (Debian's layout first)."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    which = shutil.which("pg_ctl")
    if which:
        candidates.append(str(Path(os.path.realpath(which)).parent))
    for c in candidates:
        if all(os.access(os.path.join(c, b), os.X_OK) for b in ("initdb", "pg_ctl", "postgres")):
            return Path(c)
    raise PgMissing(f"PostgreSQL's initdb/pg_ctl/postgres were not found; {INSTALL_HINT}")


def _has_vector(bindir: Path) -> bool:
    config = bindir / "pg_config"
    if not config.exists():
        return False
    share = subprocess.run([str(config), "--sharedir"], capture_output=True, text=True,
                           check=False).stdout.strip()
    return bool(share) and Path(share, "extension", "vector.control").is_file()


@dataclass
class PgServer:
    """One cluster in ``folder`` (data in ``folder/data``, the socket in ``folder``)."""

    folder: Path
    bindir: Path
    port: int = 5432
    settings: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def create(cls, settings: Mapping[str, str] | None = None) -> PgServer:
        bindir = find_bindir()
        if not _has_vector(bindir):
            raise PgMissing(f"pgvector is not installed for {bindir}; {INSTALL_HINT}")
        folder = Path(tempfile.mkdtemp(prefix="memidex-pg-"))
        server = cls(folder, bindir, settings=dict(settings or {}))
        if os.geteuid() == 0:
            os.chmod(folder, 0o755)
            shutil.chown(folder, "postgres", "postgres")
        server._run("initdb", "-D", str(server.data), "-U", "postgres", "--auth-local=trust",
                    "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync")
        (server.data / "pg_hba.conf").write_text(
            f"local all {PASSWORD_ROLE} scram-sha-256\nlocal all all trust\n",
            encoding="utf-8")
        return server

    @property
    def data(self) -> Path:
        return self.folder / "data"

    def _as_server_user(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv

    def _run(self, tool: str, *args: str) -> str:
        out = subprocess.run(self._as_server_user([str(self.bindir / tool), *args]),
                             capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)} failed ({out.returncode}): "
                               f"{out.stderr.strip() or out.stdout.strip()}")
        return out.stdout

    def start(self) -> None:
        opts = {"listen_addresses": "''", "unix_socket_directories": f"'{self.folder}'",
                "port": str(self.port), "fsync": "off", "max_connections": "60",
                "log_min_messages": "warning", **self.settings}
        options = " ".join(f"-c {k}={v}" for k, v in opts.items())
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "-l",
                  str(self.folder / "server.log"), "-o", options, "start")

    def stop(self, mode: str = "fast") -> None:
        with contextlib.suppress(RuntimeError):
            self._run("pg_ctl", "-D", str(self.data), "-w", "-t", "30", "-m", mode, "stop")

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def kill(self, timeout: float = 10.0) -> None:
        """SIGKILL the postmaster, as a crash would; then wait until every server
        process of the cluster is gone (each notices its postmaster died and exits;
        what is still running at ``timeout`` is killed too), so it can start again."""
        pid = self.postmaster_pid()
        if pid is None:
            return
        children = _children(pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + timeout
        alive = [pid, *children]
        while alive and time.monotonic() < deadline:
            alive = [p for p in alive if _alive(p)]
            time.sleep(0.02)
        for p in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        # a zombie still counts for the server's lock-file check (kill(pid, 0) succeeds):
        # wait until init has reaped them all
        deadline = time.monotonic() + timeout
        while any(os.path.exists(f"/proc/{p}") for p in (pid, *children)) and \
                time.monotonic() < deadline:
            time.sleep(0.02)

    def url(self, user: str = "postgres", password: str | None = None,
            database: str = DATABASE) -> str:
        auth = user if password is None else f"{user}:{password}"
        return f"postgresql://{auth}@/{database}?host={self.folder}&port={self.port}"

    def psql(self, sql: str, database: str = DATABASE) -> str:
        out = subprocess.run(
            [str(self.bindir.parent / "bin" / "psql") if (self.bindir / "psql").exists()
             else "psql", "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-h",
             str(self.folder), "-p", str(self.port), "-U", "postgres", "-d", database,
             "-c", sql], capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise RuntimeError(f"psql: {out.stderr.strip()}")
        return out.stdout.strip()

    def prepare(self) -> None:
        """The ``memidex`` database with ``vector``, and a role that needs a password."""
        self.psql(f"CREATE DATABASE {DATABASE}", database="postgres")
        self.psql("CREATE EXTENSION IF NOT EXISTS vector")
        self.psql(f"CREATE ROLE {PASSWORD_ROLE} LOGIN PASSWORD '{PASSWORD}'")
        self.psql(f"GRANT ALL ON DATABASE {DATABASE} TO {PASSWORD_ROLE}")

    def remove(self) -> None:
        self.stop("immediate")  # its files are deleted next: no checkpoint to wait for
        shutil.rmtree(self.folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for path in glob.glob(f"/proc/{pid}/task/*/children"):
        with contextlib.suppress(OSError):
            out += [int(x) for x in Path(path).read_text().split()]
    return out


def started(settings: Mapping[str, str] | None = None) -> PgServer:
    """A created, started and prepared cluster (call :meth:`PgServer.remove` after)."""
    server = PgServer.create(settings)
    try:
        server.start()
        server.prepare()
    except BaseException:
        server.remove()
        raise
    return server
