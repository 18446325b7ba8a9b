#!/usr/bin/env bash
# Starts or stops a real Apache Cassandra 5.0 node on loopback for
# development, the cassandrakv tests and the kv benchmarks, from Maven
# Central jars (Debian ships no Cassandra and no Docker engine runs here),
# on Debian's Java 17:
#
#   scripts/cassandra.sh start    # prints host:port once it answers CQL
#   scripts/cassandra.sh stop
#   LOGBOOK_TEST_CASSANDRA=$(scripts/cassandra.sh start) go test ./services/kv/cassandrakv/
#
# CASSANDRA_PORT (default 19042) picks the CQL (native transport) port,
# CASSANDRA_STORAGE_PORT (17000) the inter-node port, CASSANDRA_HEAP (1G)
# the heap. The node's data, commit log and log live in .cache/cassandra
# (ignored); every start begins from an empty data directory: tests make
# their own keyspaces and a node's state is not worth keeping between runs.
# The commit log is synced before a write is acknowledged (commitlog_sync
# batch, like the other kv backends' durable writes);
# CASSANDRA_COMMITLOG_SYNC=periodic gives Cassandra's default (synced every
# 10 s), which the seed's measurements used.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

HOST=127.0.0.1
PORT="${CASSANDRA_PORT:-19042}"
STORAGE_PORT="${CASSANDRA_STORAGE_PORT:-17000}"
HEAP="${CASSANDRA_HEAP:-1G}"
SYNC="${CASSANDRA_COMMITLOG_SYNC:-batch}"
HERE="scripts/cassandra"
STATE="$PWD/.cache/cassandra"
PIDFILE="$STATE/node.pid"
LOGFILE="$STATE/node.log"
LIBS="$HERE/target/libs"

# is_ours reports whether the pid file names a live node this script
# started: the pid alone might since have been reused by another process.
is_ours() {
	[ -s "$PIDFILE" ] || return 1
	local pid
	pid=$(cat "$PIDFILE")
	kill -0 "$pid" 2>/dev/null || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "cassandra.config=file://$STATE/cassandra.yaml"
}

stop() {
	if is_ours; then
		local pid
		pid=$(cat "$PIDFILE")
		log "stopping the Cassandra node (pid $pid)"
		kill -TERM "$pid"
		for _ in $(seq 1 300); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			log "node did not stop in 30 s; killing it"
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	rm -f "$PIDFILE"
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
	(exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null
}

start() {
	if is_ours && port_busy "$PORT"; then
		# Idempotent: a node this script started is already serving.
		echo "$HOST:$PORT"
		return
	fi
	stop
	for p in "$PORT" "$STORAGE_PORT"; do
		if port_busy "$p"; then
			echo "cassandra.sh: port $p is taken by something this script did not start" >&2
			exit 1
		fi
	done
	case "$SYNC" in
	batch) period="" ;;
	periodic) period="commitlog_sync_period: 10000ms" ;;
	*)
		echo "cassandra.sh: CASSANDRA_COMMITLOG_SYNC is batch or periodic, not $SYNC" >&2
		exit 2
		;;
	esac
	fetch_jars
	rm -rf "$STATE"
	mkdir -p "$STATE"
	sed -e "s#@STATE@#$STATE#g" -e "s#@HOST@#$HOST#g" -e "s#@SEEDS@#$HOST:$STORAGE_PORT#" \
		-e "s#@PORT@#$PORT#" -e "s#@STORAGE_PORT@#$STORAGE_PORT#" \
		-e "s#@COMMITLOG_SYNC@#$SYNC#" -e "s#@COMMITLOG_SYNC_PERIOD@#$period#" \
		"$HERE/cassandra.yaml.in" >"$STATE/cassandra.yaml"
	local opts=()
	mapfile -t opts < <(grep -v '^#' "$HERE/jvm17.options" | grep -v '^$')
	log "starting the Cassandra node on $HOST:$PORT (log: $LOGFILE)"
	# setsid: the node outlives this script and the shell that ran it.
	setsid java -Xms"$HEAP" -Xmx"$HEAP" -Xss512k "${opts[@]}" \
		-Dcassandra.config="file://$STATE/cassandra.yaml" \
		-Dcassandra-foreground=yes -Dcassandra.logdir="$STATE" \
		-Dcassandra.skip_wait_for_gossip_to_settle=0 \
		-Dlogback.configurationFile="$HERE/logback.xml" \
		-cp "$LIBS/*" org.apache.cassandra.service.CassandraDaemon >"$LOGFILE" 2>&1 </dev/null &
	echo $! >"$PIDFILE"
	# A loaded machine takes a minute or more to boot the node.
	for _ in $(seq 1 3000); do
		if port_busy "$PORT"; then
			echo "$HOST:$PORT"
			return
		fi
		if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
			echo "cassandra.sh: the node exited while starting; last lines of $LOGFILE:" >&2
			tail -n 30 "$LOGFILE" >&2
			rm -f "$PIDFILE"
			exit 1
		fi
		sleep 0.1
	done
	echo "cassandra.sh: the node did not start in 300 s; see $LOGFILE" >&2
	stop
	exit 1
}

case "${1:-}" in
start) start ;;
stop) stop ;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac
