#!/usr/bin/env bash
# Sets up and runs the whole test suite: formatting, vet, lint, and every
# package's tests under the race detector. Installs what it needs.
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

log "go vet"
go vet ./...

log "staticcheck"
go run "$STATICCHECK" ./...

log "go build"
go build -o bin/logbook ./cmd/logbook

log "go test -race"
go test -race -count=1 -timeout 20m ./...
