#!/bin/sh
# install-versitygw.sh installs versitygw, the S3-compatible server the
# fence/s3 tests run against, unless it is already installed. It prints the
# path of the binary on stdout. It installs outside this module's go.mod, so
# the library never depends on the server's code.
#
#   FENCELOCK_VERSITYGW  path of an existing binary to use instead
#   VERSITYGW_VERSION    version to install (default v1.8.0)
set -eu

version="${VERSITYGW_VERSION:-v1.8.0}"

if [ -n "${FENCELOCK_VERSITYGW:-}" ]; then
	if [ -x "$FENCELOCK_VERSITYGW" ]; then
		echo "$FENCELOCK_VERSITYGW"
		exit 0
	fi
	echo "install-versitygw: FENCELOCK_VERSITYGW=$FENCELOCK_VERSITYGW is not an executable file" >&2
	exit 1
fi

gobin="$(go env GOBIN)"
if [ -z "$gobin" ]; then
	gobin="$(go env GOPATH | cut -d: -f1)/bin"
fi

if found="$(command -v versitygw 2>/dev/null)"; then
	echo "$found"
	exit 0
fi
if [ -x "$gobin/versitygw" ]; then
	echo "$gobin/versitygw"
	exit 0
fi

echo "install-versitygw: installing github.com/versity/versitygw/cmd/versitygw@$version into $gobin (about 90 s on a cold module cache)" >&2
# "go install pkg@version" ignores the current module: this repository's
# go.mod is neither read nor changed.
GOFLAGS=-mod=mod GO111MODULE=on go install "github.com/versity/versitygw/cmd/versitygw@$version" >&2
echo "$gobin/versitygw"
