#!/usr/bin/env bash
# A throwaway 3-member etcd cluster for the tests, sourced by .ci/test.sh:
#
#   . .ci/etcd.sh
#   etcd_start    # exports LEASEKIT_ETCD_ENDPOINTS; etcd_stop runs on exit
#   ...
#   etcd_stop     # or earlier, by hand
#
# etcd_start installs Debian's etcd-server package (and nothing else) when
# etcd is missing and it can (root, apt-get, Debian), starts three members on
# free 127.0.0.1 ports, each with its data dir and log in a temp dir, waits
# until every member answers /health and they agree on a leader, and exports
# LEASEKIT_ETCD_ENDPOINTS=127.0.0.1:PORT,127.0.0.1:PORT,127.0.0.1:PORT, the
# members' client addresses, for etcdtest.Shared. With LEASEKIT_ETCD_ENDPOINTS
# already set it does nothing: the tests use that cluster. It speaks to the
# members over HTTP with bash's /dev/tcp, so it needs neither etcdctl nor curl.
# Every function returns non-zero, with a message on stderr, on failure; they
# are safe under `set -u`.

# etcd_install installs Debian's etcd-server package when etcd is missing and
# this is a Debian machine we are root on.
etcd_install() {
	command -v etcd >/dev/null 2>&1 && return
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1 || [ ! -r /etc/debian_version ]; then
		echo "etcd.sh: etcd is missing; install it (Debian: apt-get install etcd-server)" >&2
		return 1
	fi
	echo "etcd.sh: installing etcd-server (apt-get)" >&2
	if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends etcd-server >/dev/null; }; then
		echo "etcd.sh: apt-get could not install etcd-server" >&2
		return 1
	fi
	# The package may start a system member on 2379; the tests use their own.
	systemctl stop etcd >/dev/null 2>&1 || service etcd stop >/dev/null 2>&1 || true
	command -v etcd >/dev/null 2>&1 || {
		echo "etcd.sh: no etcd after installing etcd-server" >&2
		return 1
	}
}

# etcd_free_port prints a TCP port on 127.0.0.1 that nothing listens on and
# that is not among the ports given as arguments.
etcd_free_port() {
	local port taken
	for _ in $(seq 100); do
		port=$((20000 + RANDOM % 30000))
		for taken in "$@"; do
			[ "$port" = "$taken" ] && continue 2
		done
		if ! (: </dev/tcp/127.0.0.1/"$port") 2>/dev/null; then
			echo "$port"
			return
		fi
	done
	return 1
}

# etcd_http METHOD PORT PATH [BODY] prints the answer (headers and body) of
# one HTTP/1.0 request to the member on 127.0.0.1:PORT, within 3 seconds.
etcd_http() {
	timeout 3 bash -c '
		exec 3<>"/dev/tcp/127.0.0.1/$2" || exit 1
		printf "%s %s HTTP/1.0\r\nHost: 127.0.0.1:%s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" \
			"$1" "$3" "$2" "${#4}" "$4" >&3
		cat <&3
	' etcd_http "$1" "$2" "$3" "${4:-}" 2>/dev/null
}

# etcd_healthy PORT succeeds when the member on PORT answers /health with true.
etcd_healthy() {
	etcd_http GET "$1" /health | grep -q '"health":"true"'
}

# etcd_status_field PORT NAME prints the uint64 field NAME ("member_id",
# "leader") of the member's /v3/maintenance/status, or nothing.
etcd_status_field() {
	local answer
	answer=$(etcd_http POST "$1" /v3/maintenance/status '{}') || return 1
	if [[ $answer =~ \"$2\":\"([0-9]+)\" ]]; then
		echo "${BASH_REMATCH[1]}"
	fi
}

# etcd_alive succeeds while every member's process runs, and says which
# ended otherwise.
etcd_alive() {
	local i
	for i in "${!ETCD_PIDS[@]}"; do
		if ! kill -0 "${ETCD_PIDS[$i]}" 2>/dev/null; then
			echo "etcd.sh: member m$i (client 127.0.0.1:${ETCD_CLIENT_PORTS[$i]}, peer 127.0.0.1:${ETCD_PEER_PORTS[$i]}) exited:" >&2
			tail -n 5 "$ETCD_DIR/etcd-$i.log" >&2 || true
			return 1
		fi
	done
}

# etcd_ready succeeds when every member answers /health and every member
# reports, as its leader, the ID of a member that reports itself.
etcd_ready() {
	local i port id leader ids=() leaders=()
	for port in "${ETCD_CLIENT_PORTS[@]}"; do
		etcd_healthy "$port" || return 1
		id=$(etcd_status_field "$port" member_id)
		leader=$(etcd_status_field "$port" leader)
		[ -n "$id" ] && [ -n "$leader" ] || return 1
		ids+=("$id") leaders+=("$leader")
	done
	for i in "${!leaders[@]}"; do
		[ "${leaders[$i]}" = "${leaders[0]}" ] || return 1
	done
	for i in "${!ids[@]}"; do
		[ "${ids[$i]}" = "${leaders[0]}" ] && return 0
	done
	return 1
}

# etcd_await waits up to 60 seconds for etcd_ready. It fails as soon as a
# member's process ends.
etcd_await() {
	local deadline=$((SECONDS + 60)) i
	while [ "$SECONDS" -lt "$deadline" ]; do
		etcd_alive || return 1
		etcd_ready && return 0
		sleep 0.1
	done
	echo "etcd.sh: the members were not healthy with a leader within 60s" >&2
	for i in "${!ETCD_PIDS[@]}"; do
		echo "etcd.sh: the end of m$i's log:" >&2
		tail -n 5 "$ETCD_DIR/etcd-$i.log" >&2 || true
	done
	return 1
}

# etcd_launch starts the three members on fresh ports, with a new cluster
# token, and waits for them.
etcd_launch() {
	local i port ports=() cluster="" token unset=() v
	for i in 0 1 2 3 4 5; do
		port=$(etcd_free_port "${ports[@]}") || {
			echo "etcd.sh: no free port on 127.0.0.1" >&2
			return 1
		}
		ports+=("$port")
	done
	ETCD_CLIENT_PORTS=("${ports[0]}" "${ports[1]}" "${ports[2]}")
	ETCD_PEER_PORTS=("${ports[3]}" "${ports[4]}" "${ports[5]}")
	ETCD_PIDS=()
	for i in 0 1 2; do
		cluster+="${cluster:+,}m$i=http://127.0.0.1:${ETCD_PEER_PORTS[$i]}"
	done
	token="leasekit-ci-$$-$RANDOM$RANDOM"
	# etcd reads ETCD_ variables as flags: none of the caller's reach it.
	for v in $(compgen -e); do
		[[ $v == ETCD_* ]] && unset+=(-u "$v")
	done
	for i in 0 1 2; do
		env "${unset[@]}" etcd --name "m$i" --data-dir "$ETCD_DIR/m$i" \
			--listen-client-urls "http://127.0.0.1:${ETCD_CLIENT_PORTS[$i]}" \
			--advertise-client-urls "http://127.0.0.1:${ETCD_CLIENT_PORTS[$i]}" \
			--listen-peer-urls "http://127.0.0.1:${ETCD_PEER_PORTS[$i]}" \
			--initial-advertise-peer-urls "http://127.0.0.1:${ETCD_PEER_PORTS[$i]}" \
			--initial-cluster "$cluster" --initial-cluster-state new \
			--initial-cluster-token "$token" --pre-vote=true \
			--logger zap --log-outputs "$ETCD_DIR/etcd-$i.log" \
			</dev/null >>"$ETCD_DIR/etcd-$i.log" 2>&1 &
		ETCD_PIDS+=("$!")
	done
	etcd_await
}

# etcd_kill kills the members this shell started and waits for them.
etcd_kill() {
	local pid
	for pid in "${ETCD_PIDS[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
	done
	for pid in "${ETCD_PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	ETCD_PIDS=()
}

etcd_start() {
	[ -n "${LEASEKIT_ETCD_ENDPOINTS:-}" ] && return
	etcd_install || return 1
	echo "etcd.sh: $(etcd --version | head -n 1)" >&2
	ETCD_DIR=$(mktemp -d "${TMPDIR:-/tmp}/leasekit-etcd-XXXXXX") || return 1
	ETCD_PIDS=()
	# Before any exit trap already set, which it keeps.
	local prev
	prev=$(trap -p EXIT | sed -e "s/^trap -- '//" -e "s/' EXIT\$//")
	trap "etcd_stop${prev:+; $prev}" EXIT
	local tries
	for tries in 1 2 3 4 5; do
		if etcd_launch; then
			local endpoints="" port
			for port in "${ETCD_CLIENT_PORTS[@]}"; do
				endpoints+="${endpoints:+,}127.0.0.1:$port"
			done
			export LEASEKIT_ETCD_ENDPOINTS=$endpoints
			echo "etcd.sh: 3 members on $LEASEKIT_ETCD_ENDPOINTS" >&2
			return
		fi
		echo "etcd.sh: start failed (try $tries)" >&2
		etcd_kill
		rm -rf "${ETCD_DIR:?}"/m? "$ETCD_DIR"/etcd-?.log
	done
	echo "etcd.sh: could not start an etcd cluster" >&2
	etcd_stop
	return 1
}

# etcd_stop kills the members and removes their files. Safe to call twice.
etcd_stop() {
	[ -n "${ETCD_DIR:-}" ] || return 0
	etcd_kill
	rm -rf "$ETCD_DIR"
	ETCD_DIR=
	unset LEASEKIT_ETCD_ENDPOINTS
}
