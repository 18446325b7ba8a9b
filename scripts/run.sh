#!/usr/bin/env bash
# Builds logbook and runs the main job: the flights service on the embedded
# store in ./data, loaded with a generated demo season the first time.
# Installs what it needs; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

need_go
./scripts/ui.sh
log "building bin/logbook"
go build -o bin/logbook ./cmd/logbook

# Development tokens, made once and kept: a viewer, and one token of each
# role the services declare (flights planner, tickets booker, notify
# sender, kv writer, the registry's schema-admin), so that the file serves
# every command.
if [ ! -s dev-tokens ]; then
	umask 077
	{
		echo "# logbook development tokens: token role"
		for role in planner viewer booker sender writer schema-admin; do
			echo "$role-$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' | head -c 24) $role"
		done
	} >dev-tokens
fi

# A demo season the first time: a Lufthansa-sized summer (about 400,000
# legs) with 1% of each kind of violation.
if [ ! -d data ]; then
	log "generating a demo season and importing it into ./data"
	./bin/logbook flights generate --out data-demo
	./bin/logbook flights import --data ./data --ssim data-demo/schedule.ssim --rotations data-demo/rotations.csv
fi

addr="${LOGBOOK_ADDR:-127.0.0.1:8080}"
planner=$(awk '$2=="planner"{print $1; exit}' dev-tokens)
viewer=$(awk '$2=="viewer"{print $1; exit}' dev-tokens)
cat >&2 <<MSG
==> logbook flights service: http://$addr  (Ctrl-C stops it)
    planner token: $planner
    viewer token:  $viewer
    try: curl -H "Authorization: Bearer $viewer" http://$addr/api/validity
MSG
exec ./bin/logbook flights serve --data ./data --addr "$addr" --tokens dev-tokens
