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
# With --brokers N (2 or 3; start --brokers 3, stop --brokers 3) it runs
# N brokers, each its own controller too, in one cluster: broker n listens
# on KAFKA_PORT + 100·(n−1) (19092, 19192, 19292) and its controller on
# KAFKA_CONTROLLER_PORT + 100·(n−1); broker 1 lives in .cache/kafka as
# the single broker does, broker n in .cache/kafka/brokerN. It prints every
# bootstrap address, comma-separated. Topics made without a replication
# factor still get one replica (offsets and transactions too): a test of
# replication asks for it (the kv benchmark's replicas table does).
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
BROKERS=1
ARGS=()
while [ $# -gt 0 ]; do
	case "$1" in
	--tls)
		TLS=1
		shift
		;;
	--brokers)
		BROKERS="${2:-}"
		shift 2 || true
		;;
	--brokers=*)
		BROKERS="${1#--brokers=}"
		shift
		;;
	*)
		ARGS+=("$1")
		shift
		;;
	esac
done
set -- "${ARGS[@]}"
case "$BROKERS" in
1 | 2 | 3) ;;
*)
	echo "kafka.sh: --brokers is 1, 2 or 3, not '$BROKERS'" >&2
	exit 2
	;;
esac
if [ -n "$TLS" ] && [ "$BROKERS" != 1 ]; then
	echo "kafka.sh: --tls runs one broker; --brokers is for the plain listener" >&2
	exit 2
fi

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
LIBS="$HERE/target/libs"

# dir_of N is broker N's state directory; port_of N and cport_of N its
# listener's and its controller's ports.
dir_of() {
	if [ "$1" = 1 ]; then echo "$STATE"; else echo "$STATE/broker$1"; fi
}
port_of() { echo $((PORT + 100 * ($1 - 1))); }
cport_of() { echo $((CONTROLLER_PORT + 100 * ($1 - 1))); }

# is_ours reports whether broker N's pid file names a live broker this
# script started: the pid alone might since have been reused by another
# process.
is_ours() {
	local d pid
	d=$(dir_of "$1")
	[ -s "$d/broker.pid" ] || return 1
	pid=$(cat "$d/broker.pid")
	kill -0 "$pid" 2>/dev/null || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "kafka.Kafka $d/server.properties"
}

stop_broker() {
	local d pid
	d=$(dir_of "$1")
	if is_ours "$1"; then
		pid=$(cat "$d/broker.pid")
		log "stopping Kafka broker $1 (pid $pid)"
		kill -TERM "$pid"
		for _ in $(seq 1 150); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			log "broker $1 did not stop in 15 s; killing it"
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	rm -f "$d/broker.pid"
}

# stop stops every broker this script started here, whatever --brokers says.
stop() {
	for n in 3 2 1; do
		stop_broker "$n"
	done
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
	local n
	for n in $(seq 1 "$BROKERS"); do
		for p in "$(port_of "$n")" "$(cport_of "$n")" ${SASL_PORT:+"$SASL_PORT"}; do
			if port_busy "$p"; then
				echo "kafka.sh: port $p is taken by something this script did not start" >&2
				exit 1
			fi
		done
	done
	fetch_jars
	mkdir -p "$STATE"
	rm -rf "$STATE/data" "$STATE/broker2" "$STATE/broker3"
	local format_args=() voters=""
	for n in $(seq 1 "$BROKERS"); do
		voters="${voters:+$voters,}$n@127.0.0.1:$(cport_of "$n")"
	done
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
		for n in $(seq 1 "$BROKERS"); do
			local d
			d=$(dir_of "$n")
			mkdir -p "$d"
			sed -e "s#@LOG_DIR@#$d/data#" -e "s#@PORT@#$(port_of "$n")#g" -e "s#@CONTROLLER_PORT@#$(cport_of "$n")#g" \
				-e "s#@NODE_ID@#$n#" -e "s#@VOTERS@#$voters#" \
				"$HERE/server.properties.in" >"$d/server.properties"
			if [ "$n" = 1 ]; then node_listeners "$d/server.properties"; fi
		done
	fi
	local cp="$LIBS/*"
	local cid
	cid=$(java -cp "$cp" -Dlog4j2.configurationFile="$HERE/warn.yaml" kafka.tools.StorageTool random-uuid)
	# Every broker of a cluster is formatted with the same cluster id.
	for n in $(seq 1 "$BROKERS"); do
		java -cp "$cp" -Dlog4j2.configurationFile="$HERE/warn.yaml" kafka.tools.StorageTool format \
			-t "$cid" -c "$(dir_of "$n")/server.properties" "${format_args[@]}" >/dev/null
	done
	# Every broker starts before any is waited for: the controllers
	# elect a leader only once a majority of them runs.
	for n in $(seq 1 "$BROKERS"); do
		local d
		d=$(dir_of "$n")
		log "starting Kafka broker $n on 127.0.0.1:$(port_of "$n")${SASL_PORT:+ and :$SASL_PORT} (log: $d/broker.log)"
		# setsid: the broker outlives this script and the shell that ran it.
		setsid java -Xms256m -Xmx512m -cp "$cp" -Dlog4j2.configurationFile="$HERE/log4j2.yaml" \
			kafka.Kafka "$d/server.properties" >"$d/broker.log" 2>&1 </dev/null &
		echo $! >"$d/broker.pid"
	done
	for n in $(seq 1 "$BROKERS"); do
		wait_broker "$n"
	done
	if [ -n "$TLS" ]; then
		local t="$STATE/tls"
		printf '{"ssl":"127.0.0.1:%s","sasl_ssl":"127.0.0.1:%s","ca":"%s","cert":"%s","key":"%s","user":"logbook","password_file":"%s"}\n' \
			"$PORT" "$SASL_PORT" "$t/ca.pem" "$t/client.pem" "$t/client.key" "$t/password"
	else
		local out=""
		for n in $(seq 1 "$BROKERS"); do
			out="${out:+$out,}127.0.0.1:$(port_of "$n")"
		done
		echo "$out"
	fi
}

# wait_broker waits for broker N to say it started (a loaded machine takes
# a while); on failure it stops every broker and exits.
wait_broker() {
	local d log
	d=$(dir_of "$1")
	log="$d/broker.log"
	for _ in $(seq 1 1200); do
		if grep -q "Kafka Server started" "$log" 2>/dev/null; then
			return
		fi
		if ! kill -0 "$(cat "$d/broker.pid")" 2>/dev/null; then
			echo "kafka.sh: broker $1 exited while starting; last lines of $log:" >&2
			tail -n 30 "$log" >&2
			rm -f "$d/broker.pid"
			stop
			exit 1
		fi
		sleep 0.1
	done
	echo "kafka.sh: broker $1 did not start in 120 s; see $log" >&2
	stop
	exit 1
}

case "${1:-}" in
start) start ;;
stop) stop ;;
*)
	echo "usage: $0 start|stop [--tls | --brokers 1|2|3]" >&2
	exit 2
	;;
esac
