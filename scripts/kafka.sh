#!/usr/bin/env bash
# Starts or stops a real single-node Kafka broker (KRaft, no ZooKeeper) on
# loopback for development and the kafkabus tests, from Maven Central jars
# (Debian ships no broker and no Docker engine runs here):
#
#   scripts/kafka.sh start    # prints the bootstrap address once it serves
#   scripts/kafka.sh stop
#   LOGBOOK_TEST_KAFKA=$(scripts/kafka.sh start) go test -race ./engine/kafkabus/
#
# KAFKA_PORT (default 19092) and KAFKA_CONTROLLER_PORT (19093) pick the
# ports. The broker's data and log live in .cache/kafka (ignored), and
# every start formats a fresh data directory: tests make their own topics
# and a broker's state is not worth keeping between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

PORT="${KAFKA_PORT:-19092}"
CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-19093}"
HERE="scripts/kafka"
STATE="$PWD/.cache/kafka"
PIDFILE="$STATE/broker.pid"
LOGFILE="$STATE/broker.log"
LIBS="$HERE/target/libs"

# is_ours reports whether the pid file names a live broker this script
# started: the pid alone might since have been reused by another process.
is_ours() {
	[ -s "$PIDFILE" ] || return 1
	local pid
	pid=$(cat "$PIDFILE")
	kill -0 "$pid" 2>/dev/null || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "kafka.Kafka $STATE/server.properties"
}

stop() {
	if is_ours; then
		local pid
		pid=$(cat "$PIDFILE")
		log "stopping the Kafka broker (pid $pid)"
		kill -TERM "$pid"
		for _ in $(seq 1 150); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			log "broker did not stop in 15 s; killing it"
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
	log "fetching the Kafka broker jars from Maven Central"
	rm -rf "$LIBS"
	# The Maven repository stays in ~/.m2, so a second fetch is offline-fast.
	# Maven writes to stdout, which is where this script prints the
	# broker's address: keep it on stderr, without colours.
	(cd "$HERE" && mvn -q -B -Dstyle.color=never package) >&2
	touch "$LIBS"
}

port_busy() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

start() {
	stop
	for p in "$PORT" "$CONTROLLER_PORT"; do
		if port_busy "$p"; then
			echo "kafka.sh: port $p is taken by something this script did not start" >&2
			exit 1
		fi
	done
	fetch_jars
	mkdir -p "$STATE"
	rm -rf "$STATE/data"
	sed -e "s#@LOG_DIR@#$STATE/data#" -e "s#@PORT@#$PORT#g" -e "s#@CONTROLLER_PORT@#$CONTROLLER_PORT#g" \
		"$HERE/server.properties.in" >"$STATE/server.properties"
	local cp="$LIBS/*"
	local cid
	cid=$(java -cp "$cp" -Dlog4j2.configurationFile="$HERE/warn.yaml" kafka.tools.StorageTool random-uuid)
	java -cp "$cp" -Dlog4j2.configurationFile="$HERE/warn.yaml" kafka.tools.StorageTool format \
		-t "$cid" -c "$STATE/server.properties" >/dev/null
	log "starting the Kafka broker on 127.0.0.1:$PORT (log: $LOGFILE)"
	# setsid: the broker outlives this script and the shell that ran it.
	setsid java -Xms256m -Xmx512m -cp "$cp" -Dlog4j2.configurationFile="$HERE/log4j2.yaml" \
		kafka.Kafka "$STATE/server.properties" >"$LOGFILE" 2>&1 </dev/null &
	echo $! >"$PIDFILE"
	for _ in $(seq 1 600); do
		if grep -q "Kafka Server started" "$LOGFILE" 2>/dev/null; then
			echo "127.0.0.1:$PORT"
			return
		fi
		if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
			echo "kafka.sh: the broker exited while starting; last lines of $LOGFILE:" >&2
			tail -n 30 "$LOGFILE" >&2
			rm -f "$PIDFILE"
			exit 1
		fi
		sleep 0.1
	done
	echo "kafka.sh: the broker did not start in 60 s; see $LOGFILE" >&2
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
