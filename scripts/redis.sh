#!/usr/bin/env bash
# Starts or stops a private Redis server for tests and benchmarks: Debian's
# package, its own directory and port, listening on loopback only, so it
# never touches a system instance.
#
#   scripts/redis.sh start   # prints host:port
#   scripts/redis.sh stop
#
# LOGBOOK_REDIS_DIR (default /tmp/logbook-redis) and LOGBOOK_REDIS_PORT
# (default 63799) choose where; LOGBOOK_REDIS_FSYNC chooses the append-only
# file's fsync policy: no persistence (none, the default for tests),
# everysec or always.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

dir="${LOGBOOK_REDIS_DIR:-/tmp/logbook-redis}"
port="${LOGBOOK_REDIS_PORT:-63799}"
fsync="${LOGBOOK_REDIS_FSYNC:-none}"
addr="127.0.0.1:${port}"

server() {
	if ! command -v redis-server >/dev/null 2>&1; then
		log "installing Redis from Debian's packages"
		apt_install redis-server
	fi
}

running() {
	redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG
}

start() {
	server
	if running; then
		echo "$addr"
		return
	fi
	mkdir -p "$dir"
	local aof=(--appendonly no)
	case "$fsync" in
	none) ;;
	everysec | always) aof=(--appendonly yes --appendfsync "$fsync") ;;
	*)
		echo "LOGBOOK_REDIS_FSYNC must be none, everysec or always" >&2
		exit 2
		;;
	esac
	redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --save '' \
		"${aof[@]}" --daemonize yes --pidfile "$dir/redis.pid" \
		--logfile "$dir/redis.log" --protected-mode yes
	for _ in $(seq 100); do
		running && break
		sleep 0.1
	done
	running || { echo "redis did not start: see $dir/redis.log" >&2; exit 1; }
	echo "$addr"
}

stop() {
	if command -v redis-cli >/dev/null 2>&1 && running; then
		redis-cli -h 127.0.0.1 -p "$port" shutdown nosave >/dev/null 2>&1 || true
	fi
}

case "${1:-}" in
start) start ;;
stop) stop ;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac
