#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests, sourced by .ci/test.sh:
#
#   . .ci/postgres.sh
#   postgres_start    # exports LEASEKIT_POSTGRES_URL; stops and removes the server on exit
#
# postgres_start installs Debian's postgresql package when initdb is missing
# and it can (root, apt-get), makes a cluster with initdb in a temp dir owned
# by a non-root user (postgres, or the caller when not root), starts it with
# pg_ctl on a free 127.0.0.1 port, trusting local connections, and removes it
# all when the shell exits. With LEASEKIT_POSTGRES_URL already set it does
# nothing: the tests use that server.

# postgres_bindir prints the directory of initdb and pg_ctl: from PATH, or the
# newest /usr/lib/postgresql/<version>/bin.
postgres_bindir() {
	local initdb
	if initdb=$(command -v initdb 2>/dev/null); then
		dirname "$initdb"
		return
	fi
	local dir
	dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
	if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then
		echo "$dir"
		return
	fi
	return 1
}

# postgres_install installs Debian's postgresql package when its binaries are
# missing and this is a Debian machine we are root on.
postgres_install() {
	postgres_bindir >/dev/null && return
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		echo "postgres.sh: PostgreSQL is missing; install it (Debian: apt-get install postgresql)" >&2
		return 1
	fi
	echo "postgres.sh: installing postgresql (apt-get)" >&2
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
	# The package may start a system cluster on 5432; the tests use their own.
	systemctl stop postgresql >/dev/null 2>&1 || service postgresql stop >/dev/null 2>&1 || true
	postgres_bindir >/dev/null || {
		echo "postgres.sh: no initdb after installing postgresql" >&2
		return 1
	}
}

# postgres_user prints the user that runs the server: the caller, or when
# the caller is root (which initdb refuses) the package's postgres user,
# made when missing.
postgres_user() {
	if [ "$(id -u)" != 0 ]; then
		id -un
		return
	fi
	if ! id postgres >/dev/null 2>&1; then
		useradd --system --no-create-home --shell /usr/sbin/nologin postgres
	fi
	echo postgres
}

# postgres_as runs a command as the server's user.
postgres_as() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u "$POSTGRES_USER" -- "$@"
	else
		"$@"
	fi
}

# postgres_free_port prints a TCP port on 127.0.0.1 that nothing listens on.
postgres_free_port() {
	local port
	for _ in $(seq 50); do
		port=$((20000 + RANDOM % 30000))
		if ! (: </dev/tcp/127.0.0.1/"$port") 2>/dev/null; then
			echo "$port"
			return
		fi
	done
	return 1
}

postgres_start() {
	[ -n "${LEASEKIT_POSTGRES_URL:-}" ] && return
	postgres_install
	POSTGRES_BIN=$(postgres_bindir)
	POSTGRES_USER=$(postgres_user)
	# In /tmp: the server's user must reach it, which a root TMPDIR may forbid.
	POSTGRES_DIR=$(mktemp -d /tmp/leasekit-postgres-XXXXXX)
	# Before any exit trap already set, which it keeps.
	local prev
	prev=$(trap -p EXIT | sed -e "s/^trap -- '//" -e "s/' EXIT\$//")
	trap "postgres_stop${prev:+; $prev}" EXIT
	chown "$POSTGRES_USER" "$POSTGRES_DIR"
	postgres_as "$POSTGRES_BIN/initdb" -D "$POSTGRES_DIR/data" -U leasekit --auth=trust \
		--encoding=UTF8 --no-sync >"$POSTGRES_DIR/initdb.log" 2>&1 ||
		{ cat "$POSTGRES_DIR/initdb.log" >&2; return 1; }
	local port tries
	for tries in 1 2 3 4 5; do
		port=$(postgres_free_port)
		# Unsafe settings are fine for a cluster that dies with the tests.
		if postgres_as "$POSTGRES_BIN/pg_ctl" -D "$POSTGRES_DIR/data" -l "$POSTGRES_DIR/server.log" -w -t 60 \
			-o "-p $port -c listen_addresses=127.0.0.1 -k $POSTGRES_DIR -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
			start >/dev/null; then
			export LEASEKIT_POSTGRES_URL="postgres://leasekit@127.0.0.1:$port/postgres?sslmode=disable"
			echo "postgres.sh: $("$POSTGRES_BIN/postgres" --version) on 127.0.0.1:$port" >&2
			return
		fi
		echo "postgres.sh: start on port $port failed (try $tries):" >&2
		tail -n 5 "$POSTGRES_DIR/server.log" >&2 || true
	done
	return 1
}

# postgres_stop stops the server and removes its files.
postgres_stop() {
	[ -n "${POSTGRES_DIR:-}" ] || return 0
	if [ -f "$POSTGRES_DIR/data/postmaster.pid" ]; then
		postgres_as "$POSTGRES_BIN/pg_ctl" -D "$POSTGRES_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$POSTGRES_DIR"
	POSTGRES_DIR=
}
