#!/usr/bin/env bash
# setup.sh makes sure the machine has what the test suite starts by itself:
# PostgreSQL's server binaries (each test package runs a throwaway cluster
# from them), MariaDB's (the same, for fence/sql), etcd, redis-server (fence/redis's
# tests and the lessons in examples/ start one), nats-server (the JetStream
# sender's tests) and versitygw (the S3-compatible server the
# S3 tests run), node and dynalite (a second DynamoDB server for fence/dynamodb's
# tests), Chromium and tmux (tests that look at the harness's
# report and at fencelock status --watch as a person would).
# It installs only what is missing, so running it again is cheap.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

have_postgres() {
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1
}

if ! have_postgres; then
	echo "setup: installing PostgreSQL server binaries (apt-get)" >&2
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >/dev/null
	# The tests start their own clusters; the distribution's default one is not needed.
	$sudo service postgresql stop >/dev/null 2>&1 || true
fi
have_postgres || { echo "setup: PostgreSQL binaries still missing" >&2; exit 1; }

# etcd 3.4 from Debian's etcd-server package: the lock tests run against it
# besides the embedded etcd (TestEngineOnOtherEtcd). The tests start their
# own server; the distribution's service is not needed.
if ! command -v etcd >/dev/null 2>&1; then
	echo "setup: installing etcd-server (apt-get)" >&2
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq etcd-server >/dev/null
	$sudo service etcd stop >/dev/null 2>&1 || true
fi
command -v etcd >/dev/null 2>&1 || { echo "setup: etcd server binary still missing" >&2; exit 1; }

# redis-server from Debian's package: fence/redis's tests and the lessons in
# examples/ (naivelock, holderdies) start their own server from it; the distribution's service is
# not needed.
if ! command -v redis-server >/dev/null 2>&1; then
	echo "setup: installing redis-server (apt-get)" >&2
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server >/dev/null
	$sudo service redis-server stop >/dev/null 2>&1 || true
fi
command -v redis-server >/dev/null 2>&1 || { echo "setup: redis-server binary still missing" >&2; exit 1; }

# nats-server 2.9 from Debian's nats-server package: fence/outbox/jetstream's
# tests start their own server from it, with JetStream on
# (internal/testkit/natstest); the distribution's service is not needed.
if ! command -v nats-server >/dev/null 2>&1; then
	echo "setup: installing nats-server (apt-get)" >&2
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nats-server >/dev/null
	$sudo service nats-server stop >/dev/null 2>&1 || true
fi
command -v nats-server >/dev/null 2>&1 || { echo "setup: nats-server binary still missing" >&2; exit 1; }

# etcd 3.5 and 3.6, built from their own Go modules (through the module
# proxy): the lock, election and CLI tests run against them too
# (TestKindsOnEveryEtcd, TestEngineOnOtherEtcd, TestCLIOnEveryEtcd). 3.7,
# the version the tests embed, needs no build here: docs/restore.md's
# runbook test builds its members from ./docs/etcd and its tools as the
# page's step 1 does.
for v in v3.5.21 v3.6.16; do
	sh "$here/install-etcd.sh" "$v" >/dev/null
done

# MariaDB from Debian's mariadb-server package: fence/sql's MySQL tests
# start their own throwaway server from its binaries (internal/testkit/mysqltest);
# the distribution's service is not needed.
have_mariadb() {
	command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || [ -x /usr/sbin/mysqld ]
}
if ! have_mariadb; then
	echo "setup: installing mariadb-server (apt-get)" >&2
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq mariadb-server >/dev/null
	$sudo service mariadb stop >/dev/null 2>&1 || true
fi
have_mariadb || { echo "setup: MariaDB server binary still missing" >&2; exit 1; }

# Chromium and tmux from Debian: the harness's HTML report is opened in
# headless Chromium (internal/testkit/browser), and fencelock status
# --watch runs under tmux, in tests that check what a person would see.
have_chromium() {
	command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1
}
if ! have_chromium || ! command -v tmux >/dev/null 2>&1; then
	echo "setup: installing chromium and tmux (apt-get)" >&2
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium fonts-dejavu-core tmux >/dev/null
fi
have_chromium || { echo "setup: chromium still missing" >&2; exit 1; }
command -v tmux >/dev/null 2>&1 || { echo "setup: tmux still missing" >&2; exit 1; }

# node and npm from Debian, and dynalite from npm (.ci/install-dynalite.sh):
# fence/dynamodb's tests run again against dynalite, a second DynamoDB
# implementation (TestOnDynalite).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "setup: installing nodejs and npm (apt-get)" >&2
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nodejs npm >/dev/null
fi
command -v node >/dev/null 2>&1 || { echo "setup: node still missing" >&2; exit 1; }
dynalite="$(sh "$here/install-dynalite.sh")"

export FENCELOCK_VERSITYGW="${FENCELOCK_VERSITYGW:-}"
gw="$(sh "$here/install-versitygw.sh")"
echo "setup: PostgreSQL: $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | head -1)  versitygw: $gw  dynalite: $dynalite" >&2
