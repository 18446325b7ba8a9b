#!/usr/bin/env bash
# The web UI's browser tests: Debian's Chromium, driven headless by
# playwright-core, against a real `logbook flights serve` loaded with a generated
# schedule (with injected violations), and a real `logbook tickets serve`
# (the tickets page; its test runs `logbook loadtest tickets` against it),
# and — when the notify page's tests run — a real `logbook notify serve`
# following a users' database of generated users in a private PostgreSQL
# (scripts/postgres.sh, its own directory and port: LOGBOOK_UI_PG_DIR,
# LOGBOOK_UI_PG_PORT) with a real `logbook notify sink` to deliver to.
# Installs what it needs. Screenshots of the main screens are kept in
# web/e2e/artifacts/ (not in git). Arguments name test files to run
# (e.g. e2e/tickets.test.mjs); none runs every one. The admin page's tests
# also run the admin test server (internal/webui/testdata/adminserver: a
# fresh embedded store whose deletion, truncation and forgetting hooks
# record calls, a stalled view and a Kafka publisher's state).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

if [ ! -x /usr/bin/chromium ]; then
	log "installing Chromium from Debian's packages"
	apt_install chromium
fi
./scripts/ui.sh
need_go

tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(e2e/)
# The notify stack (PostgreSQL, the sink, the service) only for its tests.
want_notify=0
for t in "${tests[@]}"; do
	case "$t" in e2e/ | e2e | *notify*) want_notify=1 ;; esac
done

work=$(mktemp -d)
server=""
tickets_server=""
notify_server=""
notify_sink=""
admin_server=""
pg_dir="${LOGBOOK_UI_PG_DIR:-/tmp/logbook-pg-ui}"
pg_port="${LOGBOOK_UI_PG_PORT:-54331}"
pg_started=""
pg_admin=""
users_db_name=""
slot=""
psql=""
cleanup() {
	for pid in $server $tickets_server $notify_server $notify_sink $admin_server; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	# A replication slot would keep the server's WAL forever: drop them,
	# and the users' database.
	if [ -n "$users_db_name" ]; then
		# (every slot of the database: the tests start servers of their own on it)
		"$psql" "$pg_admin" -qAtc "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '$users_db_name' AND NOT active" >/dev/null 2>&1 || true
		"$psql" "$pg_admin" -qc "DROP DATABASE IF EXISTS $users_db_name WITH (FORCE)" >/dev/null 2>&1 || true
	fi
	if [ -n "$pg_started" ]; then
		LOGBOOK_PG_DIR="$pg_dir" LOGBOOK_PG_PORT="$pg_port" ./scripts/postgres.sh stop || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

log "building logbook with the UI embedded"
go build -o "$work/logbook" ./cmd/logbook
go build -o "$work/adminserver" ./internal/webui/testdata/adminserver

log "generating and importing a test schedule"
# Two weeks of 1,400 flights a week: 51 rotations, 2% of the legs given
# each kind of violation.
"$work/logbook" flights generate --out "$work/gen" --weeks 2 --flights-per-week 1400 --violations 0.02 --seed 7 -o json >"$work/generated.json"
"$work/logbook" flights import --data "$work/data" --ssim "$work/gen/schedule.ssim" --rotations "$work/gen/rotations.csv" -o json >"$work/imported.json"

planner="planner-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
viewer="viewer-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
admin="admin-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
printf '%s planner\n%s viewer\n%s admin\n' "$planner" "$viewer" "$admin" >"$work/tokens"

# server_url PID LOG MSG: the URL a server started on port 0 logs (the
# kernel picks a free loopback port) in its start message MSG.
server_url() {
	local url=""
	for _ in $(seq 1 100); do
		url=$(sed -n "s/.*msg=\"$3\" url=\([^ ]*\).*/\1/p" "$2" | head -1)
		[ -n "$url" ] && break
		kill -0 "$1" 2>/dev/null || { cat "$2" >&2; exit 1; }
		sleep 0.1
	done
	[ -n "$url" ] || { echo "$3: not started" >&2; cat "$2" >&2; exit 1; }
	echo "$url"
}

"$work/logbook" flights serve --data "$work/data" --addr 127.0.0.1:0 --tokens "$work/tokens" 2>"$work/serve.log" &
server=$!
url=$(server_url "$server" "$work/serve.log" "logbook serving")
log "logbook serving at $url"

# The tickets service: three sports on emulated nodes of 100 requests/s.
booker="booker-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
printf '%s booker\n%s viewer\n' "$booker" "$viewer" >"$work/tickets-tokens"
"$work/logbook" tickets serve --data "$work/tickets-data" --addr 127.0.0.1:0 --tokens "$work/tickets-tokens" \
	--arch fair --node-rate 100 --tickets-per-sport 200 --days 5 2>"$work/tickets.log" &
tickets_server=$!
tickets_url=$(server_url "$tickets_server" "$work/tickets.log" "logbook tickets serving")
log "logbook tickets serving at $tickets_url"

if [ "$want_notify" = 1 ]; then
	# A private PostgreSQL (stopped at the end if this script started it),
	# a fresh database of 600 generated users in 6 clubs for it.
	[ -f "$pg_dir/data/postmaster.pid" ] || pg_started=1
	log "starting PostgreSQL ($pg_dir, port $pg_port) for the notify service's users"
	pg_admin=$(LOGBOOK_PG_DIR="$pg_dir" LOGBOOK_PG_PORT="$pg_port" ./scripts/postgres.sh start)
	psql="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)/psql"
	suffix=$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')
	users_db_name="ui_notify_users_$suffix"
	slot="ui_notify_$suffix"
	"$psql" "$pg_admin" -qc "CREATE DATABASE $users_db_name" >/dev/null
	users_db="postgres://logbook@127.0.0.1:${pg_port}/${users_db_name}?sslmode=disable"
	# The users' database URL goes in the environment, not in ps.
	export LOGBOOK_USERS_DB="$users_db"
	"$work/logbook" notify users generate --users 600 --clubs 6 --seed 3 2>"$work/users.log"

	"$work/logbook" notify sink --addr 127.0.0.1:0 2>"$work/sink.log" &
	notify_sink=$!
	sink_url=$(server_url "$notify_sink" "$work/sink.log" "logbook notify sink serving")

	sender="sender-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	printf '%s sender\n%s viewer\n' "$sender" "$viewer" >"$work/notify-tokens"
	"$work/logbook" notify serve --data "$work/notify-data" --state "$work/notify-state" --addr 127.0.0.1:0 --tokens "$work/notify-tokens" \
		--slot "$slot" --push-url "$sink_url/deliver" --email-url "$sink_url/deliver" 2>"$work/notify.log" &
	notify_server=$!
	notify_url=$(server_url "$notify_server" "$work/notify.log" "logbook notify serving")
	log "logbook notify serving at $notify_url (sink at $sink_url)"
fi

# The admin page's test server: a fresh store of a few streams.
LOGBOOK_TOKENS="$viewer:viewer,$admin:admin" "$work/adminserver" "$work/admin-data" 2>"$work/admin.log" &
admin_server=$!
admin_url=$(server_url "$admin_server" "$work/admin.log" "logbook admin test server serving")
log "admin test server at $admin_url"

mkdir -p web/e2e/artifacts
[ $# -gt 0 ] || rm -f web/e2e/artifacts/*.png
status=0
(
	cd web
	LOGBOOK_URL="$url" PLANNER_TOKEN="$planner" VIEWER_TOKEN="$viewer" \
		GENERATED="$work/generated.json" SCHEDULE_DIR="$work/gen" ARTIFACTS="$PWD/e2e/artifacts" \
		TICKETS_URL="$tickets_url" BOOKER_TOKEN="$booker" LOGBOOK_BIN="$work/logbook" \
		NOTIFY_URL="${notify_url:-}" SENDER_TOKEN="${sender:-}" SINK_URL="${sink_url:-}" \
		USERS_DB="${users_db:-}" PSQL="$psql" \
		ADMIN_TOKEN="$admin" ADMIN_TEST_URL="$admin_url" \
		node --test --test-concurrency=1 --test-timeout=120000 "${tests[@]}"
) || status=$?
if [ "$status" -ne 0 ]; then
	echo "--- logbook flights serve log (last 40 lines)" >&2
	tail -40 "$work/serve.log" >&2
	echo "--- logbook tickets serve log (last 40 lines)" >&2
	tail -40 "$work/tickets.log" >&2
	if [ -n "$notify_server" ]; then
		echo "--- logbook notify serve log (last 40 lines)" >&2
		tail -40 "$work/notify.log" >&2
	fi
fi
log "screenshots: web/e2e/artifacts/"
exit "$status"
