#!/usr/bin/env bash
# Starts or stops a real Apache Cassandra 5.0 cluster on loopback for
# development, the cassandrakv tests and the kv benchmarks, from Maven
# Central jars (Debian ships no Cassandra and no Docker engine runs here),
# on Debian's Java 17:
#
#   scripts/cassandra.sh start    # prints host:port once it answers CQL
#   scripts/cassandra.sh start --nodes 2   # 127.0.0.1 and 127.0.0.2
#   scripts/cassandra.sh stop
#   LOGBOOK_TEST_CASSANDRA=$(scripts/cassandra.sh start) go test ./services/kv/cassandrakv/
#
# One node by default (the tests'); --nodes 2 or 3 runs more on 127.0.0.2
# and 127.0.0.3 (the same ports, another loopback address; 127.0.0.1 is
# the seed), started one after the other as each joins the ring, and
# prints every contact address, comma-separated. CASSANDRA_PORT (default
# 19042) picks the CQL (native transport) port, CASSANDRA_STORAGE_PORT
# (17000) the inter-node port, CASSANDRA_HEAP the heap of each node (1G
# for one node, 768M each for more). Each node's data, commit log and log
# live in .cache/cassandra/nodeN (ignored; CASSANDRA_ROOT moves them, for a
# second cluster beside the tests' on other ports: give stop the same
# CASSANDRA_ROOT); every start begins from empty
# data directories: tests make their own keyspaces and a node's state is
# not worth keeping between runs. The commit log is synced before a write
# is acknowledged (commitlog_sync batch, like the other kv backends'
# durable writes); CASSANDRA_COMMITLOG_SYNC=periodic gives Cassandra's
# default (synced every 10 s), which the seed's measurements used.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

NODES=1
ARGS=()
while [ $# -gt 0 ]; do
	case "$1" in
	--nodes)
		NODES="${2:-}"
		shift 2 || true
		;;
	--nodes=*)
		NODES="${1#--nodes=}"
		shift
		;;
	*)
		ARGS+=("$1")
		shift
		;;
	esac
done
set -- "${ARGS[@]}"
case "$NODES" in
1 | 2 | 3) ;;
*)
	echo "cassandra.sh: --nodes is 1, 2 or 3, not '$NODES'" >&2
	exit 2
	;;
esac

PORT="${CASSANDRA_PORT:-19042}"
STORAGE_PORT="${CASSANDRA_STORAGE_PORT:-17000}"
if [ "$NODES" = 1 ]; then
	HEAP="${CASSANDRA_HEAP:-1G}"
else
	HEAP="${CASSANDRA_HEAP:-768M}"
fi
SYNC="${CASSANDRA_COMMITLOG_SYNC:-batch}"
HERE="scripts/cassandra"
ROOT="$(realpath -m "${CASSANDRA_ROOT:-$PWD/.cache/cassandra}")"
LIBS="$HERE/target/libs"

# is_ours reports whether node N's pid file names a live node this script
# started: the pid alone might since have been reused by another process.
is_ours() {
	local state="$ROOT/node$1" pid
	[ -s "$state/node.pid" ] || return 1
	pid=$(cat "$state/node.pid")
	kill -0 "$pid" 2>/dev/null || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "cassandra.config=file://$state/cassandra.yaml"
}

stop_node() {
	local state="$ROOT/node$1" pid
	if is_ours "$1"; then
		pid=$(cat "$state/node.pid")
		log "stopping Cassandra node $1 (pid $pid)"
		kill -TERM "$pid"
		for _ in $(seq 1 300); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			log "node $1 did not stop in 30 s; killing it"
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	rm -f "$state/node.pid"
}

# stop stops every node this script started, whatever --nodes says.
stop() {
	for n in 3 2 1; do
		stop_node "$n"
	done
}

fetch_jars() {
	if [ -d "$LIBS" ] && [ "$HERE/pom.xml" -ot "$LIBS" ]; then
		return
	fi
	command -v java >/dev/null 2>&1 || apt_install openjdk-17-jre-headless
	command -v mvn >/dev/null 2>&1 || apt_install maven
	log "fetching the Cassandra jars from Maven Central"
	rm -rf "$LIBS"
	# Maven writes to stdout, which is where this script prints the
	# node's address: keep it on stderr, without colours.
	(cd "$HERE" && mvn -q -B -Dstyle.color=never package) >&2
	touch "$LIBS"
}

port_busy() {
	(exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

addresses() {
	local out="" n
	for n in $(seq 1 "$NODES"); do
		out="${out:+$out,}127.0.0.$n:$PORT"
	done
	echo "$out"
}

start_node() {
	local n="$1" host="127.0.0.$1" state="$ROOT/node$1" period="" opts=()
	[ "$SYNC" = periodic ] && period="commitlog_sync_period: 10000ms"
	mkdir -p "$state"
	sed -e "s#@STATE@#$state#g" -e "s#@HOST@#$host#g" -e "s#@SEEDS@#127.0.0.1:$STORAGE_PORT#" \
		-e "s#@PORT@#$PORT#" -e "s#@STORAGE_PORT@#$STORAGE_PORT#" \
		-e "s#@COMMITLOG_SYNC@#$SYNC#" -e "s#@COMMITLOG_SYNC_PERIOD@#$period#" \
		"$HERE/cassandra.yaml.in" >"$state/cassandra.yaml"
	mapfile -t opts < <(grep -v '^#' "$HERE/jvm17.options" | grep -v '^$')
	log "starting Cassandra node $n on $host:$PORT (log: $state/node.log)"
	# setsid: the node outlives this script and the shell that ran it.
	# ring_delay_ms: a joining node waits 5 s, not 30, for the ring to
	# settle — every node here is local.
	setsid java -Xms"$HEAP" -Xmx"$HEAP" -Xss512k "${opts[@]}" \
		-Dcassandra.config="file://$state/cassandra.yaml" \
		-Dcassandra-foreground=yes -Dcassandra.logdir="$state" \
		-Dcassandra.skip_wait_for_gossip_to_settle=0 -Dcassandra.ring_delay_ms=5000 \
		-Dlogback.configurationFile="$HERE/logback.xml" \
		-cp "$LIBS/*" org.apache.cassandra.service.CassandraDaemon >"$state/node.log" 2>&1 </dev/null &
	echo $! >"$state/node.pid"
	# A loaded machine takes a minute or more to boot a node.
	for _ in $(seq 1 3000); do
		if port_busy "$host" "$PORT"; then
			return
		fi
		if ! kill -0 "$(cat "$state/node.pid")" 2>/dev/null; then
			echo "cassandra.sh: node $n exited while starting; last lines of $state/node.log:" >&2
			tail -n 30 "$state/node.log" >&2
			rm -f "$state/node.pid"
			stop
			exit 1
		fi
		sleep 0.1
	done
	echo "cassandra.sh: node $n did not start in 300 s; see $state/node.log" >&2
	stop
	exit 1
}

start() {
	local n running=1
	for n in $(seq 1 "$NODES"); do
		if ! is_ours "$n" || ! port_busy "127.0.0.$n" "$PORT"; then
			running=""
		fi
	done
	if [ -n "$running" ] && ! is_ours $((NODES + 1)); then
		# Idempotent: the nodes this script started are already serving.
		addresses
		return
	fi
	stop
	case "$SYNC" in
	batch | periodic) ;;
	*)
		echo "cassandra.sh: CASSANDRA_COMMITLOG_SYNC is batch or periodic, not $SYNC" >&2
		exit 2
		;;
	esac
	for n in $(seq 1 "$NODES"); do
		for p in "$PORT" "$STORAGE_PORT"; do
			if port_busy "127.0.0.$n" "$p"; then
				echo "cassandra.sh: port 127.0.0.$n:$p is taken by something this script did not start" >&2
				exit 1
			fi
		done
	done
	fetch_jars
	rm -rf "$ROOT"/node*
	for n in $(seq 1 "$NODES"); do
		start_node "$n"
	done
	addresses
}

case "${1:-}" in
start) start ;;
stop) stop ;;
*)
	echo "usage: $0 start|stop [--nodes 1|2|3]" >&2
	exit 2
	;;
esac
