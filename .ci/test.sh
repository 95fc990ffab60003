#!/usr/bin/env bash
# The full test suite. Every pass runs, even after one fails, and a summary
# of each pass's result and duration ends the output; the exit status is
# non-zero if any pass failed. Every pass covers the six modules, the
# library's (./...), the bench's (./bench/...), the reliability tests'
# (./internal/reliability/...), the etcd token source's
# (./correctness/etcdtokens/...) and the client adapters'
# (./efficiency/rueidisconn/..., ./efficiency/valkeyconn/...): go.work
# joins the nested five to the library, and a pattern from the root stops
# at a nested module, so each is named.
# The passes:
#   vet       go vet on the six modules' packages
#   gofmt     gofmt -l . lists nothing
#   staticcheck  honnef.co/go/tools' staticcheck, pinned, on the six
#   race      every test with the race detector, on miniredis and on real
#             redis-server processes that the tests start themselves on free
#             loopback ports (and stop), LEASEKIT_REQUIRE_REDIS=1
#   no-redis  every test again with redis-server hidden (LEASEKIT_NO_REDIS=1),
#             as on a machine with only Go
#   redis8, valkey9  the server matrix: the race pass again, on the packages
#             whose tests can start a real server (those that link
#             internal/testkit/redistest), with a newer server's
#             redis-server and redis-cli first on PATH: Redis 8 from
#             Debian experimental, Valkey 9 from Debian sid, fetched by
#             .ci/servers.sh; each prints its version. A server that cannot
#             be fetched fails its pass, saying why
# Before the passes it starts a throwaway PostgreSQL server for the SQL
# fences (.ci/postgres.sh) and a throwaway 3-member etcd cluster for the
# token source (.ci/etcd.sh), and removes them on exit.
# Arguments go to every `go test` pass: .ci/test.sh -run TestSoak.
# Installs redis-server, PostgreSQL and etcd (Debian's etcd-server) when
# they are missing and this is a Debian machine we are root on.
set -uo pipefail
cd "$(dirname "$0")/.."
trap 'exit 130' INT TERM

if ! command -v redis-server >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "test.sh: installing redis-server (apt-get)" >&2
		export DEBIAN_FRONTEND=noninteractive
		if ! { apt-get update -qq && apt-get install -y -qq redis-server >/dev/null; }; then
			echo "test.sh: apt-get could not install redis-server" >&2
			exit 1
		fi
		# The package starts a system service on 6379; the tests start their
		# own servers and do not need it.
		systemctl stop redis-server >/dev/null 2>&1 || service redis-server stop >/dev/null 2>&1 || true
	else
		echo "test.sh: redis-server is missing; install it (Debian: apt-get install redis-server)" >&2
		exit 1
	fi
fi
redis-server --version >&2

# --- Services the tests need, started before the passes -----------------
# Start them here (and stop them on exit with a trap) so that every pass
# sees them. Keep this block safe under `set -u`.
# PostgreSQL, for the SQL fences: a throwaway cluster on a free loopback
# port, run as a non-root user, removed on exit (.ci/postgres.sh).
. .ci/postgres.sh
if ! postgres_start; then
	echo "test.sh: could not start PostgreSQL for the SQL fence tests" >&2
	exit 1
fi
# etcd, for the token source: three members on free loopback ports, whose
# endpoints go to the tests in LEASEKIT_ETCD_ENDPOINTS (.ci/etcd.sh). Tests
# that kill an etcd leader start clusters of their own.
. .ci/etcd.sh
if ! etcd_start; then
	echo "test.sh: could not start etcd for the token source tests" >&2
	exit 1
fi
# The newer servers of the matrix passes, fetched now so that a machine that
# cannot have them says so at once; their passes fail with the reason.
. .ci/servers.sh
servers_fetch || echo "test.sh: the matrix passes of the servers above will fail" >&2
# --- end of services ------------------------------------------------------

passes=()
results=()
failed=0

# pass NAME COMMAND... runs one pass, records its result and duration, and
# never stops the script.
pass() {
	local name=$1
	shift
	echo "test.sh: [$name] $*" >&2
	local start=$SECONDS status=0
	"$@" || status=$?
	local took=$((SECONDS - start))
	local took_s
	took_s=$(printf '%dm%02ds' $((took / 60)) $((took % 60)))
	if [ "$status" -eq 0 ]; then
		results+=("ok    $name ($took_s)")
	else
		results+=("FAIL  $name ($took_s, exit status $status)")
		failed=1
	fi
	passes+=("$name")
}

check_gofmt() {
	local unformatted
	unformatted=$(gofmt -l .) || return 1
	if [ -n "$unformatted" ]; then
		echo "test.sh: gofmt would change:" >&2
		echo "$unformatted" >&2
		return 1
	fi
}

# The packages of the six modules; go.work makes them one build.
packages=(./... ./bench/... ./internal/reliability/... ./correctness/etcdtokens/... ./efficiency/rueidisconn/... ./efficiency/valkeyconn/...)

# real_packages prints the packages whose tests link the harness that starts
# real servers (internal/testkit/redistest), directly or through a helper;
# the slowest, internal/reliability/processes (its tests run one after
# another, for minutes), first, so that the others run beside it.
real_packages() {
	go list -test -f '{{if .ForTest}}{{.ForTest}}{{range .Deps}} {{.}}{{end}}{{end}}' "${packages[@]}" |
		awk '/ github.com\/leasekit\/leasekit\/internal\/testkit\/redistest( |$)/ { print ($1 ~ /\/processes$/ ? 0 : 1), $1 }' |
		sort -u | cut -d' ' -f2
}

# matrix NAME ARGS... runs the tests of real_packages on the server NAME
# (.ci/servers.sh), with its wrappers first on PATH, under the race
# detector, as the race pass does. Their tests mostly wait (on servers,
# ttls, child processes), so four packages run at once (-p 4; the default,
# one per core, leaves a core idle). The miniredis halves of redistest.Run
# are skipped: the race pass ran them, and no server runs them.
matrix() {
	local name=$1 bin
	shift
	bin=$(servers_bin "$name") || return 1
	local real
	real=$(real_packages) || return 1
	[ -n "$real" ] || { echo "test.sh: no package links redistest" >&2; return 1; }
	echo "test.sh: [$name] $(PATH="$bin:$PATH" redis-server --version)" >&2
	# shellcheck disable=SC2086 # one package a word
	env -u LEASEKIT_NO_REDIS PATH="$bin:$PATH" LEASEKIT_REQUIRE_REDIS=1 go test -race -count=1 -p 4 \
		-skip '/^miniredis$|//^miniredis$|///^miniredis$' "$@" $real
}

pass vet go vet "${packages[@]}"
pass gofmt check_gofmt
# Pinned: a newer staticcheck may add checks that fail a green tree.
pass staticcheck go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 "${packages[@]}"
pass race env -u LEASEKIT_NO_REDIS LEASEKIT_REQUIRE_REDIS=1 go test -race -count=1 "$@" "${packages[@]}"
# CONTRIBUTING.md promises that `go test ./...` passes on a machine with only
# Go. This machine has redis-server, so hide it from the harness and prove it.
pass no-redis env -u LEASEKIT_REQUIRE_REDIS -u LEASEKIT_ETCD_ENDPOINTS LEASEKIT_NO_REDIS=1 go test -count=1 "$@" "${packages[@]}"
# The server matrix: what talks to a real server, again on each newer one.
for server in "${SERVERS[@]}"; do
	pass "$server" matrix "$server" "$@"
done

echo >&2
echo "test.sh: summary" >&2
for r in "${results[@]}"; do
	echo "  $r" >&2
done
if [ "$failed" -ne 0 ]; then
	echo "test.sh: FAILED" >&2
	exit 1
fi
echo "test.sh: all ${#passes[@]} passes ok" >&2
