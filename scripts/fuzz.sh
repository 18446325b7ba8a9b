#!/usr/bin/env bash
# Runs every fuzz target of the project for N seconds each (default 10):
#
#   scripts/fuzz.sh [N] [TARGET-REGEXP]
#
# Each target's seed corpus (f.Add and testdata/fuzz/<target>) also runs
# as a plain test under `go test`; this script searches beyond it. New
# inputs the fuzzer finds interesting stay in Go's cache
# ($(go env GOCACHE)/fuzz), so later runs go on from them; with
# FUZZ_KEEP=1 they are copied into the package's testdata/fuzz/<target>,
# to commit. A failure stops the script: its input is written to
# testdata/fuzz/<target>/ and reproduces with `go test -run <target>/<file>`.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

secs="${1:-10}"
only="${2:-.}"
need_go

# package target
targets="
./services/flights/ssim FuzzRead
./services/flights/ssim FuzzReadRotations
./engine/auth FuzzParseFile
./engine/auth FuzzParseEnv
./engine/kafkabus FuzzDecodeValue
./engine/eventstore/pebblestore FuzzDecodeEvent
./engine/httpreplica FuzzStream
./services/flights FuzzDecodeCursor
./engine/aggregate FuzzDecodeEnvelope
./engine/aggregate FuzzJSONCodec
./services/flights/httpapi FuzzAPI
./services/notify/httpapi FuzzSend
./services/kv/httpapi FuzzAPI
./engine/registry FuzzSchemas
./engine/window FuzzQuery
./services/tickets/httpapi FuzzAPI
./engine/admin FuzzAPI
"

module=$(go list -m)
cache="$(go env GOCACHE)/fuzz"
while read -r pkg target; do
	[ -n "$pkg" ] || continue
	[[ "$target" =~ $only ]] || continue
	for attempt in 1 2; do
		log "fuzzing $pkg $target for ${secs}s"
		out=$(mktemp)
		if go test -run '^$' -fuzz "^${target}\$" -fuzztime "${secs}s" "$pkg" >"$out" 2>&1; then
			grep -v '^time=\|^[0-9/]* [0-9:]* \(INFO\|WARN\)' "$out" || true
			rm -f "$out"
			break
		fi
		grep -v '^time=\|^[0-9/]* [0-9:]* \(INFO\|WARN\)' "$out" || true
		# Go's fuzzer can end a run that found nothing with "context
		# deadline exceeded" when -fuzztime elapses while a worker is
		# still busy; a real finding writes its input to testdata. Such a
		# run is tried once more; anything else fails the script.
		if [ "$attempt" = 1 ] && grep -q 'context deadline exceeded' "$out" && ! grep -q 'Failing input written' "$out"; then
			rm -f "$out"
			log "$target: the fuzzer stopped at its deadline without a finding; once more"
			continue
		fi
		rm -f "$out"
		log "$target failed"
		exit 1
	done
	found="$cache/$module/${pkg#./}/$target"
	n=0
	[ -d "$found" ] && n=$(find "$found" -type f | wc -l)
	log "$target: $n inputs in the cached corpus"
	if [ "${FUZZ_KEEP:-}" = 1 ] && [ "$n" -gt 0 ]; then
		mkdir -p "$pkg/testdata/fuzz/$target"
		cp "$found"/* "$pkg/testdata/fuzz/$target/"
	fi
done <<<"$targets"
