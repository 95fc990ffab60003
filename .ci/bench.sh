#!/usr/bin/env bash
# Runs `go run ./bench` against a throwaway redis-server, or with -cluster a
# throwaway 3-master Redis Cluster: started on free loopback ports in a temp
# dir, without persistence, and stopped on exit. Other arguments are passed to
# the bench:
#   bash .ci/bench.sh -chart bench/results.png
#   bash .ci/bench.sh -cluster -scenarios convoy-procs
# Unless the arguments set -spin, the bench runs with one low-priority spinner
# per CPU, so that idle vCPUs do not halt between round trips (see the
# header it prints).
# When etcd is installed and .ci/etcd.sh is there, it also starts a throwaway
# 3-member etcd cluster (etcd_start: free loopback ports, a temp dir, stopped
# on exit; or the cluster that LEASEKIT_ETCD_ENDPOINTS already names) and
# passes its endpoints as -etcd, which adds the etcd rows, unless the
# arguments set -etcd themselves (-etcd= runs without):
#   bash .ci/bench.sh -scenarios ping,uncontended,convoy-8
set -euo pipefail
cd "$(dirname "$0")/.."

for cmd in redis-server redis-cli; do
	if ! command -v "$cmd" >/dev/null 2>&1; then
		echo "bench.sh: $cmd is missing; install it (Debian: apt-get install redis-server)" >&2
		exit 1
	fi
done

cluster=false
args=()
for a in "$@"; do
	if [ "$a" = "-cluster" ] || [ "$a" = "--cluster" ]; then
		cluster=true
	else
		args+=("$a")
	fi
done
case " ${args[*]-} " in
*" -spin"* | *" --spin"*) ;;
*) args+=(-spin "$(nproc 2>/dev/null || echo 2)") ;;
esac
etcd=true
case " ${args[*]-} " in
*" -etcd"* | *" --etcd"*) etcd=false ;;
esac
if $etcd && { ! command -v etcd >/dev/null 2>&1 || [ ! -f .ci/etcd.sh ]; }; then
	etcd=false
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/leasekit-bench.XXXXXX")
pids=()
cleanup() {
	for pid in "${pids[@]-}"; do
		[ -n "$pid" ] || continue
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# After the trap above: etcd_start adds the cluster's stop to it.
if $etcd; then
	. .ci/etcd.sh
	if etcd_start; then
		args+=(-etcd "$LEASEKIT_ETCD_ENDPOINTS")
	else
		echo "bench.sh: could not start etcd; running without the etcd rows" >&2
	fi
fi

# A free port: bind port 0 and read back what the kernel chose. Another
# process could take it before redis-server does; then the start fails and
# we try again with a new port.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
		shuf -i 20000-60000 -n 1
}

# start_server DIR EXTRA... starts a redis-server in DIR on a free port and
# sets $port, or exits.
start_server() {
	local d=$1
	shift
	mkdir -p "$d"
	for attempt in 1 2 3 4 5; do
		port=$(free_port)
		redis-server --port "$port" --bind 127.0.0.1 --dir "$d" \
			--save "" --appendonly no --daemonize no \
			--logfile "$d/redis.log" "$@" &
		local pid=$!
		for _ in $(seq 100); do
			if redis-cli -p "$port" ping >/dev/null 2>&1; then
				pids+=("$pid")
				return 0
			fi
			if ! kill -0 "$pid" 2>/dev/null; then
				break
			fi
			sleep 0.05
		done
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		echo "bench.sh: redis-server did not start on port $port (attempt $attempt)" >&2
	done
	tail -n 5 "$d/redis.log" >&2 || true
	exit 1
}

version=$(redis-server --version | awk '{sub(/^v=/, "", $3); print $3}')
if $cluster; then
	nodes=()
	for i in 1 2 3; do
		start_server "$dir/node$i" --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 5000
		nodes+=("127.0.0.1:$port")
	done
	redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >/dev/null
	for _ in $(seq 200); do
		if redis-cli -p "${nodes[0]##*:}" cluster info | grep -q 'cluster_state:ok'; then
			break
		fi
		sleep 0.05
	done
	list=$(IFS=,; echo "${nodes[*]}")
	echo "bench.sh: a 3-master Redis Cluster of redis-server $version on $list" >&2
	go run ./bench -cluster "$list" "${args[@]}"
else
	start_server "$dir"
	echo "bench.sh: redis-server $version on 127.0.0.1:$port" >&2
	go run ./bench -addr "127.0.0.1:$port" "${args[@]}"
fi
