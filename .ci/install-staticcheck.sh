#!/bin/sh
# install-staticcheck.sh installs the pinned staticcheck (honnef.co/go/tools)
# unless that version is already installed. It prints the path of the binary
# on stdout. Like install-versitygw.sh it installs outside this module's
# go.mod, so the linter is never a dependency of the library.
#
#   STATICCHECK_VERSION  module version to install (default v0.8.2, which is
#                        staticcheck 2026.2.2, the newest release; it supports
#                        the go 1.26 this module declares)
set -eu

version="${STATICCHECK_VERSION:-v0.8.2}"

gobin="$(go env GOBIN)"
if [ -z "$gobin" ]; then
	gobin="$(go env GOPATH | cut -d: -f1)/bin"
fi
bin="$gobin/staticcheck"

# "staticcheck -version" prints e.g. "staticcheck 2026.2.2 (0.8.2)": match the
# module version in parentheses, so a different install on PATH is not taken.
if [ -x "$bin" ] && "$bin" -version 2>/dev/null | grep -q "(${version#v})"; then
	echo "$bin"
	exit 0
fi

echo "install-staticcheck: installing honnef.co/go/tools/cmd/staticcheck@$version into $gobin" >&2
# "go install pkg@version" ignores the current module: this repository's
# go.mod is neither read nor changed.
GOFLAGS=-mod=mod GO111MODULE=on go install "honnef.co/go/tools/cmd/staticcheck@$version" >&2
echo "$bin"
