#!/usr/bin/env bash
# Installs and starts what kwal's tests need on a fresh machine, then runs
# the command given as arguments with the integration environment set:
#   KWAL_S3_ENDPOINT, KWAL_S3_ACCESS_KEY, KWAL_S3_SECRET_KEY, KWAL_S3_BUCKET
#   KWAL_KCAT (kcat binary), KWAL_KAFKAJS_DIR (integration/kafkajs, with
#   kafkajs 2.2.4 in its node_modules)
# versitygw (an S3-compatible server) is installed once into $(go env GOPATH)/bin
# and stopped by PID when the command ends. kcat and Node.js come from Debian
# (apt-get, only when missing; needs root or sudo), kafkajs from npm (npm ci,
# only when integration/kafkajs/node_modules is missing). Any failed install
# stops the script: CI must never skip the compatibility tests.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

VERSITYGW_VERSION=v1.8.0
GOBIN_DIR="$(go env GOPATH)/bin"
VGW="$GOBIN_DIR/versitygw"

log() { printf '[test-env] %s\n' "$*" >&2; }

# `go install` builds report "Version: git" from --version, so read the module
# version recorded in the binary instead.
if [[ ! -x "$VGW" ]] || ! go version -m "$VGW" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+github.com/versity/versitygw[[:space:]]+$VERSITYGW_VERSION[[:space:]]"; then
	log "installing versitygw $VERSITYGW_VERSION (about 70 s on a cold cache)"
	GOFLAGS=-mod=mod go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
fi

as_root() {
	if [[ $EUID -eq 0 ]]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
		log "need root (or sudo) to run: $*"; exit 1
	fi
}
APT_UPDATED=
# apt_install retries (a package mirror may answer slowly or fail once).
apt_install() {
	local try
	for try in 1 2 3; do
		if [[ -z "$APT_UPDATED" ]]; then
			as_root apt-get update && APT_UPDATED=1
		fi
		if as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"; then
			return 0
		fi
		log "apt-get install $* failed (try $try of 3)"
		APT_UPDATED=
		sleep $((try * 5))
	done
	return 1
}

# docker-compose validates docker-compose.yml (no Docker engine is needed
# for `docker-compose config -q`).
if ! command -v docker-compose >/dev/null; then
	log "installing docker-compose from Debian (to validate docker-compose.yml)"
	apt_install docker-compose || log "WARNING: docker-compose could not be installed; TestDockerComposeValid will be SKIPPED"
fi
export KWAL_DOCKER_COMPOSE="$(command -v docker-compose || true)"

if ! command -v kcat >/dev/null; then
	log "installing kcat from Debian"
	apt_install kcat
fi
KWAL_KCAT="$(command -v kcat)"
export KWAL_KCAT
log "kcat: $KWAL_KCAT, $("$KWAL_KCAT" -V 2>&1 | grep -m1 -o 'Version [0-9.]*' || echo 'version unknown')"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	log "installing Node.js and npm from Debian"
	apt_install nodejs npm
fi
export KWAL_KAFKAJS_DIR="$ROOT/integration/kafkajs"
if [[ ! -f "$KWAL_KAFKAJS_DIR/node_modules/kafkajs/package.json" ]]; then
	log "installing kafkajs into $KWAL_KAFKAJS_DIR/node_modules (npm ci)"
	(cd "$KWAL_KAFKAJS_DIR" && npm ci --no-audit --no-fund)
fi
KAFKAJS_VERSION="$(node -p "require('$KWAL_KAFKAJS_DIR/node_modules/kafkajs/package.json').version")"
if [[ "$KAFKAJS_VERSION" != 2.2.4 ]]; then
	log "kafkajs $KAFKAJS_VERSION in $KWAL_KAFKAJS_DIR/node_modules, want 2.2.4: remove node_modules and rerun"
	exit 1
fi
log "node $(node --version), kafkajs $KAFKAJS_VERSION"

WORK="$(mktemp -d -t kwal-test-XXXXXX)"
mkdir -p "$WORK/s3" "$WORK/s3/kwal-test"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
PORT="$(free_port)"
export KWAL_S3_ACCESS_KEY=kwaltestaccess
export KWAL_S3_SECRET_KEY=kwaltestsecretkey123
export KWAL_S3_BUCKET=kwal-test
export KWAL_S3_ENDPOINT="http://127.0.0.1:$PORT"

"$VGW" --port "127.0.0.1:$PORT" --access "$KWAL_S3_ACCESS_KEY" --secret "$KWAL_S3_SECRET_KEY" --quiet posix "$WORK/s3" >"$WORK/versitygw.log" 2>&1 &
VGW_PID=$!
cleanup() {
	kill "$VGW_PID" 2>/dev/null || true
	wait "$VGW_PID" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT

for _ in $(seq 1 100); do
	if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then break; fi
	if ! kill -0 "$VGW_PID" 2>/dev/null; then log "versitygw exited:"; cat "$WORK/versitygw.log" >&2; exit 1; fi
	sleep 0.1
done
log "versitygw pid $VGW_PID listening on $KWAL_S3_ENDPOINT (bucket $KWAL_S3_BUCKET)"

"$@"
