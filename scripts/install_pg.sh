#!/usr/bin/env bash
# What the team-index tests need (docs/team-index.md): Debian's PostgreSQL 15 server and its
# development files from apt, and pgvector built from upstream's source for that server.
#
#   bash scripts/install_pg.sh          # idempotent; ~0.01 s when everything is there
#
# pgvector: this Debian (bookworm) has no pgvector package for PostgreSQL 15, and GitHub is
# not reachable here. Debian's *source* package `pgvector` (in trixie) is: `apt-get source`
# fetches it from Debian's archive, checked against the archive's signed Sources index. Its
# `.orig.tar.gz` is upstream's release tarball unchanged (Debian keeps orig tarballs
# byte for byte): its SHA-256 below is the one of
# github.com/pgvector/pgvector/archive/refs/tags/v0.8.0.tar.gz that other packagers pin
# (Homebrew, Termux), and this script refuses any other bytes. Only that upstream tarball
# is built (Debian's packaging is not used): `make && make install` with PGXS, as
# upstream's README says. The apt lists for the source lookup live in a private folder, so
# the machine's apt configuration is left alone.
#
# Needs root (apt-get, make install); run as a user, it says what is missing and stops.
set -euo pipefail

PG_MAJOR=15
PGVECTOR_VERSION=0.8.0
PGVECTOR_DEB=0.8.0-1
PGVECTOR_SHA256=867a2c328d4928a5a9d6f052cd3bc78c7d60228a9b914ad32aa3db88e9de27b0
PG_BIN=/usr/lib/postgresql/$PG_MAJOR/bin
PG_CONFIG=$PG_BIN/pg_config
CACHE=${MEMIDEX_PG_CACHE:-/var/cache/memidex-pg}

say() { printf 'install_pg: %s\n' "$*" >&2; }

have_server() { [ -x "$PG_BIN/initdb" ] && [ -x "$PG_BIN/pg_ctl" ] && [ -x "$PG_BIN/postgres" ]; }
have_dev() { [ -x "$PG_CONFIG" ] && [ -f "$($PG_CONFIG --includedir-server 2>/dev/null)/postgres.h" ]; }
have_vector() {
    [ -x "$PG_CONFIG" ] || return 1
    local control lib
    control="$($PG_CONFIG --sharedir)/extension/vector.control"
    lib="$($PG_CONFIG --pkglibdir)/vector.so"
    [ -f "$lib" ] && [ -f "$control" ] &&
        grep -q "^default_version = '$PGVECTOR_VERSION'" "$control"
}

if have_server && have_dev && have_vector; then
    exit 0  # the fast path: the lead's .ci/run calls this before every `make test`
fi

if [ "$(id -u)" != 0 ]; then
    say "PostgreSQL $PG_MAJOR, its dev files or pgvector $PGVECTOR_VERSION are missing;" \
        "run this script as root (it uses apt-get and make install)"
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt_install() {
    if ! apt-get install -y -qq --no-install-recommends "$@" >/dev/null; then
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "$@" >/dev/null
    fi
}

if ! have_server || ! have_dev; then
    say "installing postgresql-$PG_MAJOR and postgresql-server-dev-$PG_MAJOR from apt"
    apt_install "postgresql-$PG_MAJOR" "postgresql-server-dev-$PG_MAJOR" make gcc
fi

if ! have_vector; then
    command -v dpkg-source >/dev/null || apt_install dpkg-dev
    say "building pgvector $PGVECTOR_VERSION from Debian's source package (upstream's tarball)"
    mkdir -p "$CACHE/parts" "$CACHE/lists/partial" "$CACHE/archives/partial" "$CACHE/src"
    cat >"$CACHE/parts/pgvector-src.sources" <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$CACHE/parts"
              -o "Dir::State::Lists=$CACHE/lists" -o "Dir::Cache=$CACHE")
    # apt's downloader runs as _apt: let it write there (else a warning, and root does it)
    if id _apt >/dev/null 2>&1; then chown _apt "$CACHE/src" "$CACHE/archives/partial"; fi
    tarball="$CACHE/src/pgvector_$PGVECTOR_VERSION.orig.tar.gz"
    if [ ! -f "$tarball" ] || ! echo "$PGVECTOR_SHA256  $tarball" | sha256sum --check --status; then
        apt-get "${apt_opts[@]}" update -qq
        (cd "$CACHE/src" && rm -f pgvector_* &&
            apt-get "${apt_opts[@]}" source --download-only -qq "pgvector=$PGVECTOR_DEB")
    fi
    if ! echo "$PGVECTOR_SHA256  $tarball" | sha256sum --check --status; then
        say "pgvector's tarball does not have upstream's SHA-256 $PGVECTOR_SHA256: refused"
        exit 1
    fi
    build=$(mktemp -d)
    trap 'rm -rf "$build"' EXIT
    tar -xzf "$tarball" -C "$build" --strip-components=1
    # OPTFLAGS="": no -march=native, so the library runs on any x86-64 this image lands on.
    make -s -C "$build" PG_CONFIG="$PG_CONFIG" OPTFLAGS="" -j"$(nproc)" >/dev/null
    make -s -C "$build" PG_CONFIG="$PG_CONFIG" OPTFLAGS="" install >/dev/null
    have_vector || { say "pgvector was built but is not where $PG_CONFIG looks"; exit 1; }
fi
say "PostgreSQL $("$PG_CONFIG" --version | cut -d' ' -f2) with pgvector $PGVECTOR_VERSION ready"
