#!/usr/bin/env bash
# Starts or stops a private PostgreSQL server for tests and benchmarks:
# Debian's package, its own data directory and port, listening on loopback
# only, so it never touches a system cluster.
#
#   scripts/postgres.sh start   # prints the connection URL
#   scripts/postgres.sh stop
#
# LOGBOOK_PG_DIR (default /tmp/logbook-pg) and LOGBOOK_PG_PORT (default
# 54329) choose where.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

dir="${LOGBOOK_PG_DIR:-/tmp/logbook-pg}"
port="${LOGBOOK_PG_PORT:-54329}"
url="postgres://logbook@127.0.0.1:${port}/logbook?sslmode=disable"

bindir() {
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
	if [ -z "$d" ]; then
		log "installing PostgreSQL from Debian's packages"
		apt_install postgresql
		d=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
	fi
	echo "$d"
}

# PostgreSQL refuses to run as root: as root, run it as the package's
# postgres user.
as_pg() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

start() {
	local bin
	bin=$(bindir)
	if [ ! -f "$dir/data/PG_VERSION" ]; then
		rm -rf "$dir"
		mkdir -p "$dir"
		[ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"
		as_pg "$bin/initdb" -D "$dir/data" -U logbook --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log"
		# Sized for a 2-core, 24 GiB machine running the whole suite and
		# the benchmarks; fsync stays on, the numbers must be honest.
		cat >>"$dir/data/postgresql.conf" <<-EOF
			listen_addresses = '127.0.0.1'
			port = $port
			unix_socket_directories = '$dir'
			max_connections = 400
			shared_buffers = 1GB
			wal_buffers = 64MB
			max_wal_size = 8GB
			checkpoint_timeout = 15min
			synchronous_commit = on
			fsync = on
			log_min_messages = warning
			logging_collector = off
		EOF
	fi
	# Logical replication (change data capture of a users' database by
	# pgoutput) needs wal_level=logical, slots and senders. Added to a
	# data directory made before this setting existed too; it takes
	# effect at the server's next start.
	if ! grep -q '^wal_level = logical' "$dir/data/postgresql.conf"; then
		cat >>"$dir/data/postgresql.conf" <<-EOF
			wal_level = logical
			max_replication_slots = 64
			max_wal_senders = 64
		EOF
	fi
	if as_pg "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
		if [ "$(as_pg "$bin/psql" -h 127.0.0.1 -p "$port" -U logbook -d postgres -tAc 'show wal_level')" != logical ]; then
			log "warning: the running server has wal_level below logical; restart it (scripts/postgres.sh stop && start) for change data capture"
		fi
		echo "$url"
		return
	fi
	as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
	if ! as_pg "$bin/psql" -h 127.0.0.1 -p "$port" -U logbook -d postgres -tAc "select 1 from pg_database where datname='logbook'" | grep -q 1; then
		as_pg "$bin/createdb" -h 127.0.0.1 -p "$port" -U logbook logbook
	fi
	echo "$url"
}

stop() {
	local bin
	bin=$(bindir)
	if [ -f "$dir/data/PG_VERSION" ]; then
		as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
	fi
}

case "${1:-}" in
start) start ;;
stop) stop ;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac
