#!/usr/bin/env bash
# Sets up and runs the whole test suite: formatting, vet, lint, every
# package's tests under the race detector — against a real PostgreSQL
# server, Redis, etcd (one member, and a cluster of three), a real Kafka broker, an Apache Cassandra node and
# nginx (and a PostgreSQL
# server and a Kafka broker that speak only TLS), which it installs, starts on
# private ports and stops again — Confluent's Python registry client in a
# virtual environment, and the web UI's tests in a real browser. Installs
# what it needs.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

need_go
STATICCHECK="honnef.co/go/tools/cmd/staticcheck@v0.8.2"

log "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.cache/*'))
if [ -n "$unformatted" ]; then
	echo "not gofmt-formatted:" >&2
	echo "$unformatted" >&2
	exit 1
fi

log "relative links in the Markdown docs"
./scripts/checklinks.py

log "go vet"
go vet ./...

log "staticcheck"
go run "$STATICCHECK" ./...

# The UI is embedded in the binary: build it before the binary and the
# tests that serve it.
log "web UI build"
./scripts/ui.sh

log "go build"
go build -o bin/logbook ./cmd/logbook

if [ ! -x /usr/sbin/nginx ]; then
	log "installing nginx from Debian's packages"
	apt_install nginx
fi

cleanup() {
	./scripts/kafka.sh stop --tls || true
	./scripts/kafka.sh stop || true
	./scripts/cassandra.sh stop || true
	./scripts/etcd.sh stop || true
	./scripts/etcd.sh stop --members 3 || true
	./scripts/redis.sh stop || true
	./scripts/postgres.sh stop --tls || true
	./scripts/postgres.sh stop || true
}
trap cleanup EXIT
log "starting PostgreSQL"
LOGBOOK_TEST_POSTGRES=$(./scripts/postgres.sh start)
export LOGBOOK_TEST_POSTGRES
log "starting Redis"
LOGBOOK_TEST_REDIS=$(./scripts/redis.sh start)
export LOGBOOK_TEST_REDIS
log "starting etcd"
LOGBOOK_TEST_ETCD=$(./scripts/etcd.sh start)
export LOGBOOK_TEST_ETCD
log "starting a three-member etcd cluster"
LOGBOOK_TEST_ETCD_CLUSTER=$(./scripts/etcd.sh start --members 3)
export LOGBOOK_TEST_ETCD_CLUSTER
log "starting Cassandra"
LOGBOOK_TEST_CASSANDRA=$(./scripts/cassandra.sh start)
export LOGBOOK_TEST_CASSANDRA
log "starting Kafka"
# Two listeners more, one per cluster node, each advertised at the address
# where that node's fault proxy will listen (lab/faultnet's Kafka tests).
LOGBOOK_TEST_KAFKA_NODES="N1:19111:127.0.0.1:19121 N2:19112:127.0.0.1:19122"
LOGBOOK_TEST_KAFKA=$(KAFKA_NODE_LISTENERS="$LOGBOOK_TEST_KAFKA_NODES" ./scripts/kafka.sh start)
export LOGBOOK_TEST_KAFKA LOGBOOK_TEST_KAFKA_NODES
# TLS-only servers beside the plain ones, for the tests of the Kafka and
# PostgreSQL hops over TLS (and SASL).
log "starting a TLS-only PostgreSQL"
LOGBOOK_TEST_POSTGRES_TLS=$(./scripts/postgres.sh start --tls)
export LOGBOOK_TEST_POSTGRES_TLS
log "starting a TLS-only Kafka broker"
LOGBOOK_TEST_KAFKA_TLS=$(./scripts/kafka.sh start --tls)
export LOGBOOK_TEST_KAFKA_TLS

log "Python clients (confluent-kafka) for the schema registry's tests"
LOGBOOK_TEST_PYTHON=$(./scripts/pyenv.sh)
export LOGBOOK_TEST_PYTHON

log "peer event stores (Message DB, Python eventsourcing) for bench peers"
eval "$(./scripts/peers.sh)"
export LOGBOOK_MESSAGE_DB LOGBOOK_PEERS_PYTHON

# Every server is up: from here a test that finds one missing fails
# instead of skipping, so that this suite cannot pass by skipping them.
export LOGBOOK_REQUIRE_EXTERNAL=1

log "go test -race"
go test -race -count=1 -timeout 30m ./...

log "power cuts: logbook torture, 2,000 crash points per store kind"
go build -o bin/logbook ./cmd/logbook
for kind in events projection; do
	bin/logbook torture --crash-points 2000 --seed "$RANDOM" --store-kind "$kind"
done

log "fuzzing, ${LOGBOOK_FUZZTIME:-3}s per target"
./scripts/fuzz.sh "${LOGBOOK_FUZZTIME:-3}"

log "web UI browser tests"
./scripts/test-ui.sh
