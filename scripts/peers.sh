#!/usr/bin/env bash
# Installs the event stores `logbook bench peers` measures logbook against,
# into .cache/peers (never committed):
#   - Message DB, the PostgreSQL message store of the Eventide project, from
#     its npm package @eventide/message-db (its SQL: the bench installs it
#     into the database it is given, in the message_store schema);
#   - the Python eventsourcing library with its PostgreSQL recorder, from
#     PyPI, in a virtual environment.
# Prints two lines for the shell to eval:
#   LOGBOOK_MESSAGE_DB=<the package's database directory>
#   LOGBOOK_PEERS_PYTHON=<the environment's python>
# Run again, it installs nothing new.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

MESSAGE_DB=1.3.1
EVENTSOURCING="eventsourcing[postgres]==9.5.6"
dir=.cache/peers
mkdir -p "$dir"

if [ ! -f "$dir/message-db-$MESSAGE_DB/database/functions/write-message.sql" ]; then
	if ! command -v npm >/dev/null 2>&1; then
		log "installing npm from Debian's packages"
		apt_install npm
	fi
	log "fetching @eventide/message-db@$MESSAGE_DB from npm"
	tmp=$(mktemp -d)
	(cd "$tmp" && npm pack -q "@eventide/message-db@$MESSAGE_DB" >/dev/null)
	rm -rf "$dir/message-db-$MESSAGE_DB"
	mkdir -p "$dir/message-db-$MESSAGE_DB"
	tar -xzf "$tmp"/eventide-message-db-*.tgz -C "$dir/message-db-$MESSAGE_DB" --strip-components=1
	rm -rf "$tmp"
fi

venv="$dir/pyenv"
if ! command -v python3 >/dev/null 2>&1 || ! python3 -m venv --help >/dev/null 2>&1; then
	log "installing Python from Debian's packages"
	apt_install python3 python3-venv
fi
if [ ! -x "$venv/bin/python" ]; then
	log "creating $venv"
	python3 -m venv "$venv"
fi
if [ "$(cat "$venv/.installed" 2>/dev/null)" != "$EVENTSOURCING" ]; then
	log "installing $EVENTSOURCING into $venv"
	"$venv/bin/pip" install -q --disable-pip-version-check "$EVENTSOURCING" >&2
	echo "$EVENTSOURCING" >"$venv/.installed"
fi
echo "LOGBOOK_MESSAGE_DB=$PWD/$dir/message-db-$MESSAGE_DB/database"
echo "LOGBOOK_PEERS_PYTHON=$PWD/$venv/bin/python"
