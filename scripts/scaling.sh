#!/usr/bin/env bash
# The read and write scaling experiments of Dębski and Szczepanik's thesis
# "Scalable Architecture of Cloud Application Based on CQRS and Event
# Sourcing" (AGH Kraków, 2015), on this one machine, every process on a
# CPU quota of its own (logbook bench scaling; needs root): one replica's
# capacity and read scaling, then write scaling, each with the model's
# prediction. Needs a quiet machine for numbers worth keeping.
#
#   scripts/scaling.sh            # NODES, NODE_CPUS, STORE_CPUS, PROXY_CPUS, LOADGEN_CPUS, SCALE change it
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

need_go
go build -o bin/logbook ./cmd/logbook
if [ ! -x /usr/sbin/nginx ]; then
	apt_install nginx
fi
nodes="${NODES:-1,2,4}"
common=(--nodes "$nodes" --node-cpus "${NODE_CPUS:-0.1}" --store-cpus "${STORE_CPUS:-0.3}"
	--proxy-cpus "${PROXY_CPUS:-0.3}" --loadgen-cpus "${LOADGEN_CPUS:-0.7}" --predict --predict-nodes 16,32,64)
log "read scaling (capacity sweep first)"
./bin/logbook bench scaling --mode read "${common[@]}"
log "write scaling"
./bin/logbook bench scaling --mode write "${common[@]}" --scale "${SCALE:-0.05}"
