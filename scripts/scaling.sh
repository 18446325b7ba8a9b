#!/usr/bin/env bash
# The read and write scaling experiment of Dębski and Szczepanik's thesis
# "Scalable Architecture of Cloud Application Based on CQRS and Event
# Sourcing" (AGH Kraków, 2015), on this one machine: the
# demo season in a PostgreSQL store, then for 1, 2 and 3 write nodes a
# fixed command workload (loadtest write), and for 1, 2 and 4 read
# replicas a fixed query rate (loadtest read), each through nginx
# (logbook cluster). Every node, PostgreSQL, Kafka, nginx and the load
# generator share this machine's cores: the tables show what adding
# processes costs and buys here, not what more machines would.
#
#   scripts/scaling.sh            # prints one JSON line per run, then the tables
#
# WRITE_USERS, WRITE_LEGS, READ_RATE, READ_HOLD and BUS=1 (feed the
# replicas from Kafka) change the workload.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

need_go
./scripts/ui.sh
go build -o bin/logbook ./cmd/logbook
if [ ! -x /usr/sbin/nginx ]; then
	apt_install nginx
fi

work="${SCALING_DIR:-/tmp/logbook-scaling}"
mkdir -p "$work"
pg=$(./scripts/postgres.sh start)
schema="scaling_$(date +%s)"
store="$pg&search_path=$schema"
# Secrets (the store's URL may carry a password, the bus's too, and the
# load tests' tokens) go in the environment: a command line is visible to
# every user of the machine through ps.
export LOGBOOK_STORE="$store"
if [ "${BUS:-0}" = 1 ]; then
	kafka=$(./scripts/kafka.sh start)
	export LOGBOOK_BUS="kafka://$kafka/$schema"
fi
printf 'scaling-planner planner\nscaling-viewer viewer\n' >"$work/tokens"

if [ ! -s "$work/season/schedule.ssim" ]; then
	./bin/logbook flights generate --out "$work/season" >&2
fi
log "importing the season into $schema"
./bin/logbook flights import --ssim "$work/season/schedule.ssim" --rotations "$work/season/rotations.csv" >&2

cluster=""
stop_cluster() {
	if [ -n "$cluster" ]; then
		kill -TERM "$cluster" 2>/dev/null || true
		wait "$cluster" 2>/dev/null || true
		cluster=""
	fi
}
trap stop_cluster EXIT

start_cluster() { # writers replicas
	stop_cluster
	./bin/logbook cluster --writers "$1" --replicas "$2" \
		--addr 127.0.0.1:8090 --tokens "$work/tokens" --dir "$work/cluster" >"$work/cluster.out" 2>&1 &
	cluster=$!
	for _ in $(seq 1 600); do
		if curl -fsS -o /dev/null -H 'Authorization: Bearer scaling-viewer' http://127.0.0.1:8090/api/validity 2>/dev/null; then
			return
		fi
		if ! kill -0 "$cluster" 2>/dev/null; then
			cat "$work/cluster.out" >&2
			exit 1
		fi
		sleep 0.2
	done
	echo "cluster did not come up" >&2
	exit 1
}

results="$work/results.jsonl"
: >"$results"
for w in 1 2 3; do
	start_cluster "$w" 1
	log "write: $w write node(s)"
	LOGBOOK_TOKEN=scaling-planner ./bin/logbook loadtest write --url http://127.0.0.1:8090 \
		--users "${WRITE_USERS:-100}" --legs "${WRITE_LEGS:-300}" -o json |
		sed "s/^{/{\"kind\":\"write\",\"writers\":$w,\"replicas\":1,/" | tee -a "$results"
done
for r in 1 2 4; do
	start_cluster 1 "$r"
	log "read: $r replica(s)"
	LOGBOOK_TOKEN=scaling-viewer ./bin/logbook loadtest read --url http://127.0.0.1:8090 \
		--rate "${READ_RATE:-4000}" --ramp 5s --hold "${READ_HOLD:-20s}" -o json |
		sed "s/^{/{\"kind\":\"read\",\"writers\":1,\"replicas\":$r,/" | tee -a "$results"
done
stop_cluster

python3 - "$results" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def table(kind, key, fields):
    rs = [r for r in rows if r["kind"] == kind]
    print(f"\n| {key} | " + " | ".join(f for f, _ in fields) + " |")
    print("| --- " * (len(fields) + 1) + "|")
    for r in rs:
        print(f"| {r[key]} | " + " | ".join(fmt(r) for _, fmt in fields) + " |")
ms = lambda k: (lambda r: f"{r.get(k, 0):.1f}")
table("write", "writers", [("commands/s", lambda r: f"{r.get('commands_per_sec', 0):.0f}"),
    ("p75 ms", ms("p75_ms")), ("p95 ms", ms("p95_ms")), ("p99 ms", ms("p99_ms")), ("max ms", ms("max_ms")),
    ("requests", lambda r: str(r.get("requests", ""))), ("failed", lambda r: str(r.get("failures", "")))])
table("read", "replicas", [("req/s", lambda r: f"{r.get('achieved_rate', 0):.0f}"),
    ("p75 ms", ms("p75_ms")), ("p95 ms", ms("p95_ms")), ("p99 ms", ms("p99_ms")), ("max ms", ms("max_ms")),
    ("requests", lambda r: str(r.get("requests", ""))), ("failed", lambda r: str(r.get("failures", "")))])
EOF
