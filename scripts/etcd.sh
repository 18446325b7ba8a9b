#!/usr/bin/env bash
# Starts or stops a private single-member etcd server for tests and
# benchmarks: Debian's package, its own data directory and ports, listening
# on loopback only.
#
#   scripts/etcd.sh start   # prints host:port of the client endpoint
#   scripts/etcd.sh stop
#
# LOGBOOK_ETCD_DIR (default /tmp/logbook-etcd) and LOGBOOK_ETCD_PORT
# (default 23799; the peer port is the next one) choose where.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

dir="${LOGBOOK_ETCD_DIR:-/tmp/logbook-etcd}"
port="${LOGBOOK_ETCD_PORT:-23799}"
peer=$((port + 1))
addr="127.0.0.1:${port}"

server() {
	if ! command -v etcd >/dev/null 2>&1; then
		log "installing etcd from Debian's packages"
		apt_install etcd-server
	fi
}

running() {
	curl -fsS "http://$addr/health" 2>/dev/null | grep -q '"health":"true"'
}

start() {
	server
	if running; then
		echo "$addr"
		return
	fi
	mkdir -p "$dir"
	# Batches of the kv benchmark go into one transaction: allow them.
	nohup etcd --name logbook --data-dir "$dir/data" \
		--listen-client-urls "http://$addr" --advertise-client-urls "http://$addr" \
		--listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
		--initial-cluster "logbook=http://127.0.0.1:$peer" \
		--max-txn-ops 32768 --max-request-bytes 33554432 \
		--quota-backend-bytes 8589934592 \
		--log-level warn >"$dir/etcd.log" 2>&1 &
	echo $! >"$dir/etcd.pid"
	for _ in $(seq 150); do
		running && break
		sleep 0.2
	done
	running || { echo "etcd did not start: see $dir/etcd.log" >&2; exit 1; }
	echo "$addr"
}

stop() {
	if [ -f "$dir/etcd.pid" ]; then
		kill "$(cat "$dir/etcd.pid")" 2>/dev/null || true
		rm -f "$dir/etcd.pid"
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
