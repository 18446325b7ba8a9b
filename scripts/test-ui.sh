#!/usr/bin/env bash
# The web UI's browser tests: Debian's Chromium, driven headless by
# playwright-core, against a real `logbook serve` loaded with a generated
# schedule (with injected violations), and a real `logbook tickets serve`
# (the tickets page; its test runs `logbook loadtest tickets` against it).
# Installs what it needs. Screenshots of the main screens are kept in
# web/e2e/artifacts/ (not in git). Arguments name test files to run
# (e.g. e2e/tickets.test.mjs); none runs every one.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

if [ ! -x /usr/bin/chromium ]; then
	log "installing Chromium from Debian's packages"
	apt_install chromium
fi
./scripts/ui.sh
need_go

work=$(mktemp -d)
server=""
tickets_server=""
cleanup() {
	for pid in $server $tickets_server; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

log "building logbook with the UI embedded"
go build -o "$work/logbook" ./cmd/logbook

log "generating and importing a test schedule"
# Two weeks of 1,400 flights a week: 51 rotations, 2% of the legs given
# each kind of violation.
"$work/logbook" flights generate --out "$work/gen" --weeks 2 --flights-per-week 1400 --violations 0.02 --seed 7 --json >"$work/generated.json"
"$work/logbook" flights import --data "$work/data" --ssim "$work/gen/schedule.ssim" --rotations "$work/gen/rotations.csv" --json >"$work/imported.json"

planner="planner-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
viewer="viewer-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
printf '%s planner\n%s viewer\n' "$planner" "$viewer" >"$work/tokens"

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

"$work/logbook" serve --data "$work/data" --addr 127.0.0.1:0 --tokens "$work/tokens" 2>"$work/serve.log" &
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

tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(e2e/)
mkdir -p web/e2e/artifacts
[ $# -gt 0 ] || rm -f web/e2e/artifacts/*.png
status=0
(
	cd web
	LOGBOOK_URL="$url" PLANNER_TOKEN="$planner" VIEWER_TOKEN="$viewer" \
		GENERATED="$work/generated.json" SCHEDULE_DIR="$work/gen" ARTIFACTS="$PWD/e2e/artifacts" \
		TICKETS_URL="$tickets_url" BOOKER_TOKEN="$booker" LOGBOOK_BIN="$work/logbook" \
		node --test --test-concurrency=1 --test-timeout=120000 "${tests[@]}"
) || status=$?
if [ "$status" -ne 0 ]; then
	echo "--- logbook serve log (last 40 lines)" >&2
	tail -40 "$work/serve.log" >&2
	echo "--- logbook tickets serve log (last 40 lines)" >&2
	tail -40 "$work/tickets.log" >&2
fi
log "screenshots: web/e2e/artifacts/"
exit "$status"
