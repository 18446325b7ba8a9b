#!/usr/bin/env bash
# Starts or stops a private etcd server for tests and benchmarks: Debian's
# package, its own data directory and ports, listening on loopback only.
# One member by default; --members 3 is a cluster of three on other ports
# and directories, beside the single one, for the tests of a member that
# dies and comes back.
#
#   scripts/etcd.sh start                  # prints host:port of the client endpoint
#   scripts/etcd.sh stop
#   scripts/etcd.sh start --members 3      # starts the members not running;
#                                          # prints the three client endpoints, comma-separated
#   scripts/etcd.sh stop --members 3 [--member I]   # all members, or member I (1…3)
#   scripts/etcd.sh kill --members 3 --member I     # SIGKILL member I, as a crash
#
# LOGBOOK_ETCD_DIR (default /tmp/logbook-etcd) and LOGBOOK_ETCD_PORT
# (default 23799; the peer port is the next one) choose where the single
# member runs. The cluster lives in LOGBOOK_ETCD_CLUSTER_DIR (default
# /tmp/logbook-etcd-cluster), member I's client port is
# LOGBOOK_ETCD_CLUSTER_PORT (default 23811) + 2(I-1), its peer port the next.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

cmd="${1:-}"
shift || true
members=1
member=""
while [ $# -gt 0 ]; do
	case "$1" in
	--members)
		members="$2"
		shift 2
		;;
	--member)
		member="$2"
		shift 2
		;;
	*)
		echo "unknown argument $1" >&2
		exit 2
		;;
	esac
done
case "$members" in
1 | 3 | 5) ;;
*)
	echo "--members: 1, 3 or 5" >&2
	exit 2
	;;
esac

if [ "$members" = 1 ]; then
	dir="${LOGBOOK_ETCD_DIR:-/tmp/logbook-etcd}"
	base="${LOGBOOK_ETCD_PORT:-23799}"
else
	dir="${LOGBOOK_ETCD_CLUSTER_DIR:-/tmp/logbook-etcd-cluster}"
	base="${LOGBOOK_ETCD_CLUSTER_PORT:-23811}"
fi

server() {
	if ! command -v etcd >/dev/null 2>&1; then
		log "installing etcd from Debian's packages"
		apt_install etcd-server
	fi
}

# Member i (1…members): its name, client and peer address, directory.
name() { if [ "$members" = 1 ]; then echo logbook; else echo "logbook$1"; fi; }
client() { echo "127.0.0.1:$((base + 2 * ($1 - 1)))"; }
peer() { echo "127.0.0.1:$((base + 2 * ($1 - 1) + 1))"; }
mdir() { if [ "$members" = 1 ]; then echo "$dir"; else echo "$dir/$(name "$1")"; fi; }

running() {
	curl -fsS "http://$(client "$1")/health" 2>/dev/null | grep -q '"health":"true"'
}

cluster() {
	local s="" i
	for i in $(seq "$members"); do
		s="$s${s:+,}$(name "$i")=http://$(peer "$i")"
	done
	echo "$s"
}

endpoints() {
	local s="" i
	for i in $(seq "$members"); do
		s="$s${s:+,}$(client "$i")"
	done
	echo "$s"
}

pidalive() { [ -f "$1/etcd.pid" ] && kill -0 "$(cat "$1/etcd.pid")" 2>/dev/null; }

launch() {
	local i="$1" d
	d="$(mdir "$i")"
	if pidalive "$d" || running "$i"; then
		return
	fi
	mkdir -p "$d"
	# Batches of the kv benchmark go into one transaction: allow them.
	# A member that restarts with its data directory rejoins with what
	# it has; the --initial-* flags only matter the first time.
	nohup etcd --name "$(name "$i")" --data-dir "$d/data" \
		--listen-client-urls "http://$(client "$i")" --advertise-client-urls "http://$(client "$i")" \
		--listen-peer-urls "http://$(peer "$i")" --initial-advertise-peer-urls "http://$(peer "$i")" \
		--initial-cluster "$(cluster)" --initial-cluster-state new \
		--initial-cluster-token "logbook-$members" \
		--max-txn-ops 32768 --max-request-bytes 33554432 \
		--quota-backend-bytes 8589934592 \
		--log-level warn >>"$d/etcd.log" 2>&1 &
	echo $! >"$d/etcd.pid"
}

start() {
	server
	local i
	for i in $(seq "$members"); do
		launch "$i"
	done
	# A cluster answers once a majority is up: wait for every member.
	for i in $(seq "$members"); do
		for _ in $(seq 150); do
			running "$i" && break
			sleep 0.2
		done
		running "$i" || {
			echo "etcd member $i did not start: see $(mdir "$i")/etcd.log" >&2
			exit 1
		}
	done
	endpoints
}

# signal SIG: to every member, or to --member.
signal() {
	local i list
	list="$(seq "$members")"
	if [ -n "$member" ]; then
		list="$member"
	fi
	for i in $list; do
		local d
		d="$(mdir "$i")"
		if [ -f "$d/etcd.pid" ]; then
			kill "-$1" "$(cat "$d/etcd.pid")" 2>/dev/null || true
			# Wait until it is gone: a restart must not find its port taken.
			for _ in $(seq 100); do
				kill -0 "$(cat "$d/etcd.pid")" 2>/dev/null || break
				sleep 0.1
			done
			rm -f "$d/etcd.pid"
		fi
	done
}

case "$cmd" in
start) start ;;
stop) signal TERM ;;
kill)
	[ -n "$member" ] || {
		echo "kill: which --member?" >&2
		exit 2
	}
	signal KILL
	;;
*)
	echo "usage: $0 start|stop [--members 1|3|5] [--member I]; $0 kill --members N --member I" >&2
	exit 2
	;;
esac
