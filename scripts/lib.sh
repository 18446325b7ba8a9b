# Shared helpers for the scripts; sourced, not run.

log() { printf '==> %s\n' "$*" >&2; }

# need_go makes sure a Go toolchain new enough for go.mod is on PATH and
# the module's dependencies are downloaded.
need_go() {
	if ! command -v go >/dev/null 2>&1; then
		if [ -x /usr/local/go/bin/go ]; then
			export PATH="/usr/local/go/bin:$PATH"
		else
			log "installing Go from Debian's packages"
			apt_install golang-go
		fi
	fi
	# go.mod names the toolchain; GOTOOLCHAIN=auto fetches it from the Go
	# module proxy when the installed one is older.
	export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"
	export GOFLAGS="${GOFLAGS:--buildvcs=false}"
	go mod download
}

apt_updated=""
apt_install() {
	if [ -z "$apt_updated" ]; then
		apt-get update -qq
		apt_updated=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}
