"""The warm path: a long-lived memidex process answers the CLI's commands over a local
socket, with the bytes a one-shot run prints (``docs/warm.md``).

``memidex daemon`` (and any process that calls :func:`memidex.cli.warmserve.serving`)
keeps the index open and current — a watcher of the record and policy folders
(:mod:`memidex.warm.watch`) instead of a ``git diff-files`` per command — and serves
``knowledge search|show|list``, ``brief``, ``doctor`` and ``runs ingest`` on
``<state_dir>/warm.sock`` (:mod:`memidex.warm.server`). The CLI connects first
(:mod:`memidex.warm.client`) and runs the command itself when nothing answers.

The protocol (version 2), one request and one answer per connection:

* the socket is a Unix stream socket, mode 0600, in the state folder; the server answers
  only a peer of its own user id (``SO_PEERCRED``);
* the client sends one JSON object on one line (UTF-8, at most 1 MiB) and shuts down its
  writing side: ``{"memidex_warm": 1, "version", "package", "argv", "cwd", "root", "env",
  "stdout_tty", "stderr_tty", "encoding"}`` — the memidex version and package folder it
  runs, the command line, the folder it runs in, the repository root it resolved, the
  environment variables output can depend on (``MEMIDEX_*``, ``GIT_*``, colour, ``CI``,
  ``HOME``, ``TZ``, ``XDG_*``; ``null`` for an unset one) and what its stdout and stderr
  are;
* the server, once it has read the request, says so at once — the ASCII line
  ``memidex-warm 2 accepted`` — before it runs anything: a client that hears nothing
  within :data:`ACCEPT_SECONDS` (a server paused, say by SIGSTOP, or busy with another
  command) runs the command itself;
* the server answers and closes: one ASCII line ``memidex-warm 2 served EXIT OUT ERR
  PID`` — the command's exit code, the byte lengths of what it printed on stdout and on
  stderr, the server's pid — then those two texts (UTF-8), for the client to write to its
  own streams; or ``memidex-warm 2 declined``, a line break and the reason (another
  version, another root, another environment, a configuration with problems, any failure
  of its own): the client then runs the command itself. (The answer is not JSON so the
  client, which runs on every command, never imports ``json`` and ``re``.)

A stale socket (its server killed) costs the client one failed ``connect``.
"""

from __future__ import annotations

__all__ = ["ACCEPT_SECONDS", "ACCEPTED", "PROTOCOL", "SOCKET_NAME", "LOCK_NAME"]

PROTOCOL = 2
ACCEPTED = b"memidex-warm 2 accepted\n"
"""What the server says as soon as it has read a request."""
ACCEPT_SECONDS = 3.0
"""How long a client waits for :data:`ACCEPTED` before it runs the command itself."""
SOCKET_NAME = "warm.sock"
LOCK_NAME = "warm.lock"
