#!/usr/bin/env bash
# Builds the web UI (web/) into internal/webui/dist, which the logbook binary
# embeds — only when its sources changed since the last build. Installs
# the npm packages from package-lock.json when they changed. Safe to run
# again; prints nothing much when there is nothing to do.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

if ! command -v npm >/dev/null 2>&1; then
	log "installing Node.js and npm from Debian's packages"
	apt_install nodejs npm
fi

# The build's inputs, hashed: the stamp (beside the packages, which npm ci
# replaces) names the inputs
# the current build was made from.
inputs_hash() {
	(
		cd web
		find src index.html tickets.html notify.html admin.html package.json package-lock.json tsconfig.json vite.config.ts -type f -print0 |
			sort -z | xargs -0 sha256sum
	) | sha256sum | cut -d' ' -f1
}
stamp=web/node_modules/.logbook-ui-build
want=$(inputs_hash)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f internal/webui/dist/index.html ] && [ -f internal/webui/dist/tickets.html ] && [ -f internal/webui/dist/notify.html ] && [ -f internal/webui/dist/admin.html ]; then
	exit 0
fi

# npm ci only when the lock file changed since the packages were installed.
lockhash=$(sha256sum web/package-lock.json | cut -d' ' -f1)
if [ ! -f web/node_modules/.lock-hash ] || [ "$(cat web/node_modules/.lock-hash)" != "$lockhash" ]; then
	log "installing the web UI's npm packages (npm ci)"
	(cd web && npm ci --no-audit --no-fund --loglevel=error)
	echo "$lockhash" >web/node_modules/.lock-hash
fi

log "building the web UI into internal/webui/dist"
(cd web && npx --no-install tsc --noEmit && npx --no-install vite build --logLevel warn)
echo "$want" >"$stamp"
