#!/usr/bin/env bash
# The full test suite: vet, then every test with the race detector, on
# miniredis and on real redis-server processes that the tests start themselves
# on free loopback ports (and stop); then every test again with redis-server
# hidden, as on a machine with only Go. Installs redis-server when it is
# missing and this is a Debian machine we are root on.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "test.sh: installing redis-server (apt-get)" >&2
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq redis-server >/dev/null
		# The package starts a system service on 6379; the tests start their
		# own servers and do not need it.
		systemctl stop redis-server >/dev/null 2>&1 || service redis-server stop >/dev/null 2>&1 || true
	else
		echo "test.sh: redis-server is missing; install it (Debian: apt-get install redis-server)" >&2
		exit 1
	fi
fi
redis-server --version >&2
. scripts/postgres.sh
postgres_start

export LEASEKIT_REQUIRE_REDIS=1
echo "test.sh: go vet ./..." >&2
go vet ./...
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
	echo "test.sh: gofmt would change: $unformatted" >&2
	exit 1
fi
echo "test.sh: go test -race -count=1 ./..." >&2
go test -race -count=1 "$@" ./...
# CONTRIBUTING.md promises that `go test ./...` passes on a machine with only Go.
# This machine has redis-server, so hide it from the harness and prove it.
echo "test.sh: go test -count=1 ./... with redis-server hidden (LEASEKIT_NO_REDIS=1)" >&2
LEASEKIT_REQUIRE_REDIS= LEASEKIT_NO_REDIS=1 go test -count=1 "$@" ./...
