#!/usr/bin/env bash
# Newer servers for the test matrix, sourced by .ci/test.sh:
#
#   . .ci/servers.sh
#   servers_fetch           # Redis 8 and Valkey 9, into a temp dir removed on exit
#   bin=$(servers_bin redis8) || ...    # a dir whose redis-server runs Redis 8
#
# The servers come from Debian's own archive, as packages of suites newer
# than the machine's: Redis from experimental (redis-tools, whose
# redis-check-rdb is the multi-call server), Valkey from sid (valkey-tools,
# valkey-check-rdb). Their builds need a glibc newer than the machine's, so
# the libraries come from sid too, and the server runs through that glibc's
# loader (--argv0 picks the server out of the multi-call binary). Nothing
# is installed: apt-get runs on a private sources list, derived from the
# machine's deb822 /etc/apt/sources.list.d/debian.sources with its Suites
# replaced and its security stanza dropped (so no archive host is named
# here), with private lists and cache, and dpkg-deb -x unpacks each package
# into one root per server. The machine's own apt state is untouched.
#
# servers_bin NAME prints a directory holding redis-server and redis-cli
# wrappers for NAME, to put first on PATH; it fails, saying why, when NAME
# could not be fetched. sid and experimental move on: print the version
# each run (redis-server --version through the wrapper).
#
# Every function returns non-zero, with a message on stderr, on failure; they
# are safe under `set -u`.

# The servers: NAME, the package (with /suite when not the default), and the
# prefix of its binaries (PREFIX-check-rdb, PREFIX-cli).
SERVERS=(redis8 valkey9)
declare -A SERVERS_PKG=([redis8]=redis-tools/experimental [valkey9]=valkey-tools)
declare -A SERVERS_PREFIX=([redis8]=redis [valkey9]=valkey)
# What --version must start with: the product, whatever version the suite
# has now.
declare -A SERVERS_PRODUCT=([redis8]="Redis server" [valkey9]="Valkey server")
# The libraries the servers link, newer in sid than in bookworm.
SERVERS_LIBS=(libc6 libstdc++6 libgcc-s1 libjemalloc2 liblzf1 libssl3t64 libatomic1 libsystemd0 libzstd1 zlib1g)
# Why each server that could not be fetched could not.
declare -A SERVERS_ERR=()

# servers_sources FILE writes the private sources list: the machine's
# debian.sources with Suites: sid experimental (experimental is never chosen
# by default, so a package from it is asked for as PKG/experimental), less
# the security stanza, which has no sid.
servers_sources() {
	local src=/etc/apt/sources.list.d/debian.sources
	if [ ! -r "$src" ]; then
		echo "servers.sh: no $src: the servers are fetched from the Debian archive it names (a deb822 sources list, as on Debian 12 and later)" >&2
		return 1
	fi
	sed 's/^Suites:.*/Suites: sid experimental/' "$src" |
		awk 'BEGIN { RS = ""; ORS = "\n\n" } /debian-security/ { next } { print }' >"$1"
	if ! grep -q '^URIs:' "$1"; then
		echo "servers.sh: $src has no stanza with URIs: but the security one" >&2
		return 1
	fi
}

# servers_fetch downloads and unpacks every server in SERVERS, recording in
# SERVERS_ERR why one could not be had. It fails if any could not.
servers_fetch() {
	if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
		local name
		for name in "${SERVERS[@]}"; do
			SERVERS_ERR[$name]="apt-get and dpkg-deb are needed to fetch it (a Debian machine)"
		done
		echo "servers.sh: ${SERVERS_ERR[${SERVERS[0]}]}" >&2
		return 1
	fi
	SERVERS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/leasekit-servers-XXXXXX") || return 1
	# Before any exit trap already set, which it keeps.
	local prev
	prev=$(trap -p EXIT | sed -e "s/^trap -- '//" -e "s/' EXIT\$//")
	trap "servers_clean${prev:+; $prev}" EXIT
	local apt="$SERVERS_DIR/apt"
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
	SERVERS_APT=(-o Dir::Etc::sourcelist="$apt/debian.sources" -o Dir::Etc::sourceparts=-
		-o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" -o APT::Get::List-Cleanup=0)
	# Root's downloads run as _apt, which may not enter a private temp dir.
	[ "$(id -u)" = 0 ] && SERVERS_APT+=(-o APT::Sandbox::User=root)
	local why=""
	if ! servers_sources "$apt/debian.sources"; then
		why="no Debian sources list to derive sid and experimental from (see above)"
	elif ! apt-get "${SERVERS_APT[@]}" --error-on=any update -qq >"$apt/update.log" 2>&1; then
		cat "$apt/update.log" >&2
		why="apt-get update of sid and experimental failed (see above)"
	fi
	# The libraries once, for every server.
	mkdir -p "$SERVERS_DIR/libs"
	if [ -z "$why" ] && ! (cd "$SERVERS_DIR/libs" && apt-get "${SERVERS_APT[@]}" download "${SERVERS_LIBS[@]}") >"$apt/libs.log" 2>&1; then
		cat "$apt/libs.log" >&2
		why="apt-get download ${SERVERS_LIBS[*]} from sid failed (see above)"
	fi
	local name failed=0
	for name in "${SERVERS[@]}"; do
		if [ -n "$why" ]; then
			SERVERS_ERR[$name]=$why
		elif ! servers_unpack "$name"; then
			: # servers_unpack recorded why
		else
			continue
		fi
		echo "servers.sh: cannot fetch $name: ${SERVERS_ERR[$name]}" >&2
		failed=1
	done
	return "$failed"
}

# servers_unpack NAME downloads NAME's package, unpacks it and the libraries
# into one root, writes its wrappers, and checks that the server runs.
servers_unpack() {
	local name=$1 pkg=${SERVERS_PKG[$1]} prefix=${SERVERS_PREFIX[$1]}
	local dir="$SERVERS_DIR/$name"
	mkdir -p "$dir/debs" "$dir/root" "$dir/bin"
	if ! (cd "$dir/debs" && apt-get "${SERVERS_APT[@]}" download "$pkg") >"$dir/download.log" 2>&1; then
		cat "$dir/download.log" >&2
		SERVERS_ERR[$name]="apt-get download $pkg failed (see above)"
		return 1
	fi
	local deb
	for deb in "$dir"/debs/*.deb "$SERVERS_DIR"/libs/*.deb; do
		if ! dpkg-deb -x "$deb" "$dir/root"; then
			SERVERS_ERR[$name]="dpkg-deb -x $(basename "$deb") failed"
			return 1
		fi
	done
	# The loader and the library dir, found rather than named, so that no
	# architecture is assumed.
	local loader libc libdir
	loader=$(ls "$dir"/root/usr/lib64/ld-linux*.so.* "$dir"/root/usr/lib/ld-linux*.so.* 2>/dev/null | head -n 1)
	libc=$(find "$dir/root/usr/lib" -name libc.so.6 | head -n 1)
	if [ -z "$loader" ] || [ -z "$libc" ]; then
		SERVERS_ERR[$name]="libc6 from sid has no ld-linux loader or libc.so.6 where expected"
		return 1
	fi
	libdir=$(dirname "$libc")
	local tool
	for tool in check-rdb cli; do
		if [ ! -x "$dir/root/usr/bin/$prefix-$tool" ]; then
			SERVERS_ERR[$name]="$pkg has no /usr/bin/$prefix-$tool"
			return 1
		fi
	done
	servers_wrapper "$dir/bin/redis-server" "$loader" "$libdir" "$prefix-server" "$dir/root/usr/bin/$prefix-check-rdb"
	servers_wrapper "$dir/bin/redis-cli" "$loader" "$libdir" "$prefix-cli" "$dir/root/usr/bin/$prefix-cli"
	local version
	if ! version=$("$dir/bin/redis-server" --version 2>&1); then
		echo "$version" >&2
		SERVERS_ERR[$name]="the unpacked server does not run (see above)"
		return 1
	fi
	case $version in
	"${SERVERS_PRODUCT[$name]}"*) ;;
	*)
		SERVERS_ERR[$name]="the unpacked server says \"$version\", not ${SERVERS_PRODUCT[$name]}"
		return 1
		;;
	esac
	echo "servers.sh: $name: $version" >&2
}

# servers_wrapper FILE LOADER LIBDIR ARGV0 BINARY writes a script that runs
# BINARY as ARGV0 through LOADER with LIBDIR's libraries. exec keeps the
# pid, so a test that kills the server kills the server.
servers_wrapper() {
	printf '#!/bin/sh\nexec %q --library-path %q --argv0 %q %q "$@"\n' "$2" "$3" "$4" "$5" >"$1"
	chmod +x "$1"
}

# servers_bin NAME prints the directory of NAME's redis-server and redis-cli
# wrappers, or fails saying why NAME could not be had.
servers_bin() {
	local name=$1
	if [ -n "${SERVERS_ERR[$name]:-}" ]; then
		echo "servers.sh: no $name: ${SERVERS_ERR[$name]}" >&2
		return 1
	fi
	if [ -z "${SERVERS_DIR:-}" ] || [ ! -x "$SERVERS_DIR/$name/bin/redis-server" ]; then
		echo "servers.sh: no $name: servers_fetch did not fetch it" >&2
		return 1
	fi
	echo "$SERVERS_DIR/$name/bin"
}

# servers_clean removes the servers. Safe to call twice.
servers_clean() {
	[ -n "${SERVERS_DIR:-}" ] || return 0
	rm -rf "$SERVERS_DIR"
	SERVERS_DIR=
}
