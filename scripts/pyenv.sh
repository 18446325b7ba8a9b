#!/usr/bin/env bash
# Installs the Python clients the tests drive the schema registry with —
# Confluent's confluent-kafka (its SchemaRegistryClient and Avro serdes),
# from PyPI — into a virtual environment in .cache/pyenv, and prints the
# environment's python. Run again, it installs nothing new.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

VENV=.cache/pyenv
REQUIREMENT="confluent-kafka[avro,schemaregistry]==2.16.0"

if ! command -v python3 >/dev/null 2>&1 || ! python3 -m venv --help >/dev/null 2>&1; then
	log "installing Python from Debian's packages"
	apt_install python3 python3-venv
fi
if [ ! -x "$VENV/bin/python" ]; then
	log "creating $VENV"
	python3 -m venv "$VENV"
fi
if [ "$(cat "$VENV/.installed" 2>/dev/null)" != "$REQUIREMENT" ]; then
	log "installing $REQUIREMENT into $VENV"
	"$VENV/bin/pip" install -q --disable-pip-version-check "$REQUIREMENT" >&2
	echo "$REQUIREMENT" >"$VENV/.installed"
fi
echo "$PWD/$VENV/bin/python"
