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
#
# With --tls (start --tls, stop --tls) it runs a second server beside that
# one, in LOGBOOK_PG_TLS_DIR (default /tmp/logbook-pg-tls) on
# LOGBOOK_PG_TLS_PORT (default 54339), which takes TLS connections only
# (pg_hba.conf rejects every other TCP connection, replication ones
# included). A throwaway CA made by openssl signs its certificate, for
# 127.0.0.1 and localhost; the server also listens on 127.0.0.2, a name
# the certificate does not carry, so that tests can check that
# sslmode=verify-full refuses it. It prints a URL with
# sslmode=verify-full and the CA as sslrootcert.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

tls=""
args=()
for a in "$@"; do
	case "$a" in
	--tls) tls=1 ;;
	*) args+=("$a") ;;
	esac
done
set -- "${args[@]}"

dir="${LOGBOOK_PG_DIR:-/tmp/logbook-pg}"
port="${LOGBOOK_PG_PORT:-54329}"
url="postgres://logbook@127.0.0.1:${port}/logbook?sslmode=disable"
if [ -n "$tls" ]; then
	dir="${LOGBOOK_PG_TLS_DIR:-/tmp/logbook-pg-tls}"
	port="${LOGBOOK_PG_TLS_PORT:-54339}"
	url="postgres://logbook@127.0.0.1:${port}/logbook?sslmode=verify-full&sslrootcert=${dir}/ca.pem"
fi

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

# make_tls makes the throwaway CA ($dir/ca.pem, readable by the tests) and
# the server's certificate and key in the data directory, and turns on
# TLS, alone.
make_tls() {
	command -v openssl >/dev/null 2>&1 || apt_install openssl
	local d="$dir/data" t
	t=$(mktemp -d)
	(
		cd "$t"
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
			-subj "/CN=logbook test PostgreSQL CA" -keyout ca.key -out ca.pem 2>/dev/null
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
			-subj "/CN=localhost" -keyout server.key -out server.csr 2>/dev/null
		printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext
		openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 365 \
			-extfile server.ext -out server.crt 2>/dev/null
	)
	cp "$t/ca.pem" "$dir/ca.pem"
	chmod 644 "$dir/ca.pem"
	install -m 600 "$t/server.crt" "$t/server.key" "$d/"
	[ "$(id -u)" = 0 ] && chown postgres:postgres "$d/server.crt" "$d/server.key"
	rm -rf "$t"
	cat >>"$d/postgresql.conf" <<-EOF
		listen_addresses = '127.0.0.1,127.0.0.2'
		ssl = on
		ssl_cert_file = 'server.crt'
		ssl_key_file = 'server.key'
		ssl_min_protocol_version = 'TLSv1.2'
	EOF
	# TLS or nothing over TCP; the Unix socket (for this script's own
	# psql) stays trusted.
	cat >"$d/pg_hba.conf" <<-EOF
		local   all         all                 trust
		hostssl all         all   127.0.0.0/8   trust
		hostssl replication all   127.0.0.0/8   trust
		hostnossl all       all   0.0.0.0/0     reject
		hostnossl replication all 0.0.0.0/0     reject
	EOF
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
		if [ -n "$tls" ]; then
			# A smaller server: it serves the TLS tests only.
			cat >>"$dir/data/postgresql.conf" <<-EOF
				max_connections = 100
				shared_buffers = 128MB
			EOF
			make_tls
		fi
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
		if [ "$(as_pg "$bin/psql" -h "$dir" -p "$port" -U logbook -d postgres -tAc 'show wal_level')" != logical ]; then
			log "warning: the running server has wal_level below logical; restart it (scripts/postgres.sh stop && start) for change data capture"
		fi
		echo "$url"
		return
	fi
	as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
	if ! as_pg "$bin/psql" -h "$dir" -p "$port" -U logbook -d postgres -tAc "select 1 from pg_database where datname='logbook'" | grep -q 1; then
		as_pg "$bin/createdb" -h "$dir" -p "$port" -U logbook logbook
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
	echo "usage: $0 start|stop [--tls]" >&2
	exit 2
	;;
esac
