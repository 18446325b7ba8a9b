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
#
# KAFKA_STATE (default .cache/kafka) moves the data directory and pid
# file, for a second broker beside the test one (other ports too).
#
# KAFKA_NODE_LISTENERS gives the broker one more plaintext listener per
# cluster node, so that a fault test can cut one node off from Kafka
# through a proxy of its own (lab/faultnet): a Kafka client connects to the
# address the metadata advertises, so each node's listener advertises that
# node's proxy. Space-separated entries NAME:PORT:HOST:ADVERTISED_PORT —
# the listener NAME (letters, digits, _) on 127.0.0.1:PORT, advertised as
# HOST:ADVERTISED_PORT, where the node's proxy listens and forwards to
# PORT. The node is given HOST:ADVERTISED_PORT as its bootstrap address.
#   KAFKA_NODE_LISTENERS="W1:19111:127.0.0.1:19121 W2:19112:127.0.0.1:19122"
#
# With --tls (start --tls, stop --tls) it runs a second broker beside that
# one, in .cache/kafka-tls, which speaks only TLS: a throwaway CA made by
# openssl signs its certificate (127.0.0.1 and localhost) and a client
# certificate; an SSL listener on KAFKA_TLS_PORT (19094) requires that
# client certificate, a SASL_SSL listener on KAFKA_SASL_PORT (19095)
# takes the SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN user "logbook" with a
# random password made at every start; its controller listens on
# KAFKA_TLS_CONTROLLER_PORT (19096). It prints one line of JSON, which is
# what LOGBOOK_TEST_KAFKA_TLS holds:
#   {"ssl":"127.0.0.1:19094","sasl_ssl":"127.0.0.1:19095","ca":"…/ca.pem",
#    "cert":"…/client.pem","key":"…/client.key","user":"logbook",
#    "password_file":"…/password"}
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

TLS=""
ARGS=()
for a in "$@"; do
	case "$a" in
	--tls) TLS=1 ;;
	*) ARGS+=("$a") ;;
	esac
done
set -- "${ARGS[@]}"

PORT="${KAFKA_PORT:-19092}"
CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-19093}"
HERE="scripts/kafka"
STATE="${KAFKA_STATE:-$PWD/.cache/kafka}"
if [ -n "$TLS" ]; then
	PORT="${KAFKA_TLS_PORT:-19094}"
	SASL_PORT="${KAFKA_SASL_PORT:-19095}"
	CONTROLLER_PORT="${KAFKA_TLS_CONTROLLER_PORT:-19096}"
	STATE="$PWD/.cache/kafka-tls"
fi
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

# make_tls makes the throwaway CA, the broker's keystore and a client
# certificate in $STATE/tls, and the SCRAM user's password.
make_tls() {
	command -v openssl >/dev/null 2>&1 || apt_install openssl
	local d="$STATE/tls"
	rm -rf "$d"
	mkdir -p "$d"
	chmod 700 "$d"
	(
		cd "$d"
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
			-subj "/CN=logbook test CA" -keyout ca.key -out ca.pem 2>/dev/null
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
			-subj "/CN=localhost" -keyout server.key -out server.csr 2>/dev/null
		printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' >server.ext
		openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 \
			-extfile server.ext -out server.pem 2>/dev/null
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
			-subj "/CN=logbook-client" -keyout client.key -out client.csr 2>/dev/null
		printf 'extendedKeyUsage=clientAuth\n' >client.ext
		openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 \
			-extfile client.ext -out client.pem 2>/dev/null
		openssl rand -hex 16 >store-password
		openssl pkcs12 -export -in server.pem -inkey server.key -certfile ca.pem \
			-passout "file:store-password" -out server.p12
		openssl rand -hex 16 >password
		chmod 600 ./*.key password store-password
		rm -f ./*.csr ./*.ext ca.srl
	)
}

# node_listeners adds KAFKA_NODE_LISTENERS's listeners to the properties
# file $1.
node_listeners() {
	local l=() a=() m=() e name port host aport
	for e in ${KAFKA_NODE_LISTENERS:-}; do
		if ! [[ "$e" =~ ^([A-Za-z][A-Za-z0-9_]*):([0-9]+):([^:]+):([0-9]+)$ ]]; then
			echo "kafka.sh: KAFKA_NODE_LISTENERS entry \"$e\": want NAME:PORT:HOST:ADVERTISED_PORT" >&2
			exit 2
		fi
		name=${BASH_REMATCH[1]^^} port=${BASH_REMATCH[2]} host=${BASH_REMATCH[3]} aport=${BASH_REMATCH[4]}
		case "$name" in PLAINTEXT | CONTROLLER)
			echo "kafka.sh: KAFKA_NODE_LISTENERS: the name $name is taken" >&2
			exit 2
			;;
		esac
		if port_busy "$port"; then
			echo "kafka.sh: port $port is taken by something this script did not start" >&2
			exit 1
		fi
		l+=("$name://127.0.0.1:$port") a+=("$name://$host:$aport") m+=("$name:PLAINTEXT")
	done
	[ ${#l[@]} -gt 0 ] || return 0
	local IFS=,
	sed -i -e "s#^listeners=.*#&,${l[*]}#" -e "s#^advertised.listeners=.*#&,${a[*]}#" \
		-e "s#^listener.security.protocol.map=.*#&,${m[*]}#" "$1"
}

start() {
	stop
	for p in "$PORT" "$CONTROLLER_PORT" ${SASL_PORT:+"$SASL_PORT"}; do
		if port_busy "$p"; then
			echo "kafka.sh: port $p is taken by something this script did not start" >&2
			exit 1
		fi
	done
	fetch_jars
	mkdir -p "$STATE"
	rm -rf "$STATE/data"
	local format_args=()
	if [ -n "$TLS" ]; then
		make_tls
		local pw
		pw=$(cat "$STATE/tls/password")
		# The properties hold the keystore's and the PLAIN user's
		# passwords: readable by this user only.
		(umask 077 && sed -e "s#@LOG_DIR@#$STATE/data#" -e "s#@STATE@#$STATE#g" \
			-e "s#@SSL_PORT@#$PORT#g" -e "s#@SASL_PORT@#$SASL_PORT#g" -e "s#@CONTROLLER_PORT@#$CONTROLLER_PORT#g" \
			-e "s#@STORE_PASSWORD@#$(cat "$STATE/tls/store-password")#" -e "s#@USER@#logbook#" -e "s#@PASSWORD@#$pw#" \
			"$HERE/server-tls.properties.in" >"$STATE/server.properties")
		# The SCRAM credentials go into the metadata log as it is
		# formatted: the broker knows the user from its first start.
		format_args=(--add-scram "SCRAM-SHA-512=[name=logbook,password=$pw]"
			--add-scram "SCRAM-SHA-256=[name=logbook,password=$pw]")
	else
		sed -e "s#@LOG_DIR@#$STATE/data#" -e "s#@PORT@#$PORT#g" -e "s#@CONTROLLER_PORT@#$CONTROLLER_PORT#g" \
			"$HERE/server.properties.in" >"$STATE/server.properties"
		node_listeners "$STATE/server.properties"
	fi
	local cp="$LIBS/*"
	local cid
	cid=$(java -cp "$cp" -Dlog4j2.configurationFile="$HERE/warn.yaml" kafka.tools.StorageTool random-uuid)
	java -cp "$cp" -Dlog4j2.configurationFile="$HERE/warn.yaml" kafka.tools.StorageTool format \
		-t "$cid" -c "$STATE/server.properties" "${format_args[@]}" >/dev/null
	log "starting the Kafka broker on 127.0.0.1:$PORT${SASL_PORT:+ and :$SASL_PORT} (log: $LOGFILE)"
	# setsid: the broker outlives this script and the shell that ran it.
	setsid java -Xms256m -Xmx512m -cp "$cp" -Dlog4j2.configurationFile="$HERE/log4j2.yaml" \
		kafka.Kafka "$STATE/server.properties" >"$LOGFILE" 2>&1 </dev/null &
	echo $! >"$PIDFILE"
	for _ in $(seq 1 600); do
		if grep -q "Kafka Server started" "$LOGFILE" 2>/dev/null; then
			if [ -n "$TLS" ]; then
				local t="$STATE/tls"
				printf '{"ssl":"127.0.0.1:%s","sasl_ssl":"127.0.0.1:%s","ca":"%s","cert":"%s","key":"%s","user":"logbook","password_file":"%s"}\n' \
					"$PORT" "$SASL_PORT" "$t/ca.pem" "$t/client.pem" "$t/client.key" "$t/password"
			else
				echo "127.0.0.1:$PORT"
			fi
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
	echo "usage: $0 start|stop [--tls]" >&2
	exit 2
	;;
esac
