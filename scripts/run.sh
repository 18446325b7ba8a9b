#!/usr/bin/env bash
# Builds logbook and runs the main job: the server on the embedded store in
# ./data. Installs what it needs; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

need_go
log "building bin/logbook"
go build -o bin/logbook ./cmd/logbook
addr="${LOGBOOK_ADDR:-127.0.0.1:8080}"
log "starting logbook on http://$addr (data in ./data; Ctrl-C stops it)"
exec ./bin/logbook serve --data ./data --addr "$addr"
