#!/bin/sh
# install-etcd.sh VERSION builds the etcd server VERSION (3.5.x, 3.6.x,
# 3.7.x), its etcdutl and its etcdctl from their own Go modules, through the
# module proxy as any dependency, and installs them as etcd-MAJOR.MINOR,
# etcdutl-MAJOR.MINOR and etcdctl-MAJOR.MINOR next to the other Go
# binaries, unless they are there already. It prints the server's path on
# stdout.
#
# install-etcd.sh VERSION DIR builds only etcdctl and etcdutl, into DIR
# under their own names (as etcd's release archives have them), unless
# they are there already, and prints DIR: docs/restore.md's runbook takes
# its tools so, into a directory of their own, touching nothing else.
#
# "go install go.etcd.io/etcd/server/v3@VERSION" (and etcdctl's, etcdutl's)
# is refused (their go.mod files have replace directives), so it builds
# etcdmain.Main, etcdctl and etcdutl in a throwaway module
# of its own: this repository's go.mod is neither read nor changed. The
# lock, election and CLI tests run against these servers (see
# internal/testkit/otheretcd), and TestSnapshotRestore restores one with
# etcdutl.
set -eu

version="$1"
dest="${2:-}"
minor="$(echo "${version#v}" | cut -d. -f1,2)"

has() { # has BIN ARG: BIN is there, and BIN ARG says it is of the version
	[ -x "$1" ] && "$1" "$2" 2>/dev/null | grep -qi "version: ${version#v}\$"
}

if [ -n "$dest" ]; then
	server="" ctl="$dest/etcdctl" utl="$dest/etcdutl" out="$dest"
else
	gobin="$(go env GOBIN)"
	if [ -z "$gobin" ]; then
		gobin="$(go env GOPATH | cut -d: -f1)/bin"
	fi
	dest="$gobin"
	server="$gobin/etcd-$minor" ctl="$gobin/etcdctl-$minor" utl="$gobin/etcdutl-$minor" out="$server"
fi
if has "$ctl" version && has "$utl" version && { [ -z "$server" ] || has "$server" --version; }; then
	echo "$out"
	exit 0
fi

echo "install-etcd: building ${server:+etcd, }etcdctl and etcdutl $version into $dest (a few minutes on a cold module cache)" >&2
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
cat >"$dir/main.go" <<'GO'
// Command etcd is the etcd server, built from etcdmain for the tests.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
cat >"$dir/go.mod" <<MOD
module etcdserver

go 1.26.0

require (
	go.etcd.io/etcd/etcdctl/v3 $version
	go.etcd.io/etcd/etcdutl/v3 $version
	go.etcd.io/etcd/server/v3 $version
)
MOD
cat >"$dir/tools.go" <<'GO'
//go:build tools

package main

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/etcdutl/v3"
)
GO
mkdir -p "$dest"
(cd "$dir" && GOFLAGS=-mod=mod go mod tidy >&2 &&
	{ [ -z "$server" ] || go build -o "$server" . >&2; } &&
	go build -o "$utl" go.etcd.io/etcd/etcdutl/v3 >&2 &&
	go build -o "$ctl" go.etcd.io/etcd/etcdctl/v3 >&2)
echo "$out"
