#!/usr/bin/env bash
# The web UI's browser tests: Debian's Chromium, driven headless by
# playwright-core, against a real `logbook serve` loaded with a generated
# schedule (with injected violations). Installs what it needs. Screenshots
# of the main screens are kept in web/e2e/artifacts/ (not in git).
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
cleanup() {
	if [ -n "$server" ]; then
		kill "$server" 2>/dev/null || true
		wait "$server" 2>/dev/null || true
	fi
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

# Port 0: the kernel picks a free loopback port, which serve logs.
"$work/logbook" serve --data "$work/data" --addr 127.0.0.1:0 --tokens "$work/tokens" 2>"$work/serve.log" &
server=$!
url=""
for _ in $(seq 1 100); do
	url=$(sed -n 's/.*msg="logbook serving" url=\([^ ]*\).*/\1/p' "$work/serve.log" | head -1)
	[ -n "$url" ] && break
	kill -0 "$server" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
	sleep 0.1
done
[ -n "$url" ] || { echo "logbook serve did not start" >&2; cat "$work/serve.log" >&2; exit 1; }
log "logbook serving at $url"

mkdir -p web/e2e/artifacts
rm -f web/e2e/artifacts/*.png
status=0
(
	cd web
	LOGBOOK_URL="$url" PLANNER_TOKEN="$planner" VIEWER_TOKEN="$viewer" \
		GENERATED="$work/generated.json" SCHEDULE_DIR="$work/gen" ARTIFACTS="$PWD/e2e/artifacts" \
		node --test --test-concurrency=1 --test-timeout=120000 e2e/
) || status=$?
if [ "$status" -ne 0 ]; then
	echo "--- logbook serve log (last 40 lines)" >&2
	tail -40 "$work/serve.log" >&2
fi
log "screenshots: web/e2e/artifacts/"
exit "$status"
