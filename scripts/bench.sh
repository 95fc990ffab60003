#!/usr/bin/env bash
# Runs `go run ./bench` against a throwaway redis-server: started on a free
# loopback port in a temp dir, without persistence, and stopped on exit.
# Arguments are passed to the bench: bash scripts/bench.sh -chart bench/results.png
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1; then
	echo "bench.sh: redis-server is missing; install it (Debian: apt-get install redis-server)" >&2
	exit 1
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/leasekit-bench.XXXXXX")
pid=""
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A free port: bind port 0 and read back what the kernel chose. Another
# process could take it before redis-server does; then the start fails and
# we try again with a new port.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
		shuf -i 20000-60000 -n 1
}

for attempt in 1 2 3 4 5; do
	port=$(free_port)
	redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" \
		--save "" --appendonly no --daemonize no \
		--logfile "$dir/redis.log" &
	pid=$!
	for _ in $(seq 100); do
		if redis-cli -p "$port" ping >/dev/null 2>&1; then
			break 2
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			break
		fi
		sleep 0.05
	done
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	pid=""
	echo "bench.sh: redis-server did not start on port $port (attempt $attempt)" >&2
done
if [ -z "$pid" ]; then
	tail -n 5 "$dir/redis.log" >&2 || true
	exit 1
fi

echo "bench.sh: redis-server $(redis-server --version | awk '{sub(/^v=/, "", $3); print $3}') on 127.0.0.1:$port" >&2
go run ./bench -addr "127.0.0.1:$port" "$@"
