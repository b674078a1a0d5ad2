#!/usr/bin/env bash
# setup.sh makes sure the machine has what the test suite starts by itself:
# PostgreSQL's server binaries (each test package runs a throwaway cluster
# from them), MariaDB's (the same, for fence/sql), etcd, redis-server (fence/redis's
# tests and the lessons in examples/ start one), nats-server (the JetStream
# sender's tests) and versitygw (the S3-compatible server the
# S3 tests run), node and dynalite (a second DynamoDB server for fence/dynamodb's
# tests) and Azurite (fence/azblob's), Chromium and tmux (tests that look at the harness's
# report and at fencelock status --watch as a person would).
# It installs only what is missing, so running it again is cheap.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

have_postgres() {
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1
}
have_mariadb() {
	command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || [ -x /usr/sbin/mysqld ]
}
have_chromium() {
	command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1
}
have() { command -v "$1" >/dev/null 2>&1; }

# What Debian gives, each for:
# - postgresql: PostgreSQL's server binaries; each test package runs a
#   throwaway cluster from them.
# - etcd-server: etcd 3.4; the lock tests run against it besides the
#   embedded etcd (TestEngineOnOtherEtcd).
# - redis-server: fence/redis's tests and the lessons in examples/
#   (naivelock, holderdies) start their own server from it.
# - nats-server 2.9: fence/outbox/jetstream's and fence/jetstream's tests start their own server
#   from it, with JetStream on (internal/testkit/natstest).
# - mariadb-server: fence/sql's MySQL tests start their own throwaway
#   server from its binaries (internal/testkit/mysqltest).
# - chromium and tmux: the harness's HTML report is opened in headless
#   Chromium (internal/testkit/browser), and fencelock status --watch runs
#   under tmux, in tests that check what a person would see.
# - nodejs and npm: dynalite, from npm (.ci/install-dynalite.sh), a second
#   DynamoDB implementation fence/dynamodb's tests run against
#   (TestOnDynalite), and Azurite, from npm (.ci/install-azurite.sh), the
#   Azure Blob Storage emulator fence/azblob's tests run against.
# The tests start their own servers: each package's service, which Debian
# starts on install, is stopped. All of them come in one apt-get run, in
# the background while the Go builds below take the CPU.
pkgs=() services=()
have_postgres || { pkgs+=(postgresql); services+=(postgresql); }
have etcd || { pkgs+=(etcd-server); services+=(etcd); }
have redis-server || { pkgs+=(redis-server); services+=(redis-server); }
have nats-server || { pkgs+=(nats-server); services+=(nats-server); }
have_mariadb || { pkgs+=(mariadb-server); services+=(mariadb); }
{ have_chromium && have tmux; } || pkgs+=(chromium fonts-dejavu-core tmux)
{ have node && have npm; } || pkgs+=(nodejs npm)
apt_pid=""
if [ ${#pkgs[@]} -gt 0 ]; then
	echo "setup: installing ${pkgs[*]} (apt-get)" >&2
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
	(
		$sudo apt-get update -qq
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${pkgs[@]}" >/dev/null
		for s in "${services[@]}"; do $sudo service "$s" stop >/dev/null 2>&1 || true; done
	) &
	apt_pid=$!
fi

# Meanwhile, from their own Go modules (through the module proxy): etcd 3.5
# and 3.6, which the lock, election and CLI tests run against too
# (TestKindsOnEveryEtcd, TestEngineOnOtherEtcd, TestCLIOnEveryEtcd), and
# versitygw, the S3-compatible server of the S3 tests. 3.7, the version the
# tests embed, needs no build here: docs/restore.md's runbook test builds
# its members from ./docs/etcd and its tools as the page's step 1 does.
# The three build side by side: their module downloads wait on the
# network while another compiles.
export FENCELOCK_VERSITYGW="${FENCELOCK_VERSITYGW:-}"
etcd_pids=()
for v in v3.5.21 v3.6.16; do
	sh "$here/install-etcd.sh" "$v" >/dev/null &
	etcd_pids+=($!)
done
gw="$(sh "$here/install-versitygw.sh")"
for p in "${etcd_pids[@]}"; do
	wait "$p" || { echo "setup: building etcd failed (.ci/install-etcd.sh)" >&2; exit 1; }
done

if [ -n "$apt_pid" ] && ! wait "$apt_pid"; then
	echo "setup: apt-get install ${pkgs[*]} failed" >&2
	exit 1
fi
have_postgres || { echo "setup: PostgreSQL binaries still missing" >&2; exit 1; }
have etcd || { echo "setup: etcd server binary still missing" >&2; exit 1; }
have redis-server || { echo "setup: redis-server binary still missing" >&2; exit 1; }
have nats-server || { echo "setup: nats-server binary still missing" >&2; exit 1; }
have_mariadb || { echo "setup: MariaDB server binary still missing" >&2; exit 1; }
have_chromium || { echo "setup: chromium still missing" >&2; exit 1; }
have tmux || { echo "setup: tmux still missing" >&2; exit 1; }
have node || { echo "setup: node still missing" >&2; exit 1; }
dynalite="$(sh "$here/install-dynalite.sh")"
azurite="$(sh "$here/install-azurite.sh")"

echo "setup: PostgreSQL: $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | head -1)  versitygw: $gw  dynalite: $dynalite  azurite: $azurite" >&2
