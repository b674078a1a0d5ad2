#!/bin/sh
# install-dynalite.sh installs dynalite, the second DynamoDB implementation
# fence/dynamodb's tests run against (TestOnDynalite; minidyn, in the test
# process, is the first), unless it is already installed: npm installs it
# into $GOPATH/dynalite/<version>, where internal/testkit/dynamotest looks
# for it, with nothing global and no native module (--omit=optional: its
# in-memory store needs none). It prints dynalite's package directory.
# It needs node and npm (.ci/setup.sh installs Debian's).
#
#   DYNALITE_VERSION  version to install (default 3.2.2: dynalite 4
#                     requires node 20, and Debian 12's is 18)
set -eu

version="${DYNALITE_VERSION:-3.2.2}"
prefix="$(go env GOPATH | cut -d: -f1)/dynalite/$version"
dir="$prefix/node_modules/dynalite"

if [ ! -f "$dir/package.json" ]; then
	echo "install-dynalite: npm install dynalite@$version into $prefix (a few seconds)" >&2
	npm install --prefix "$prefix" --omit=optional --no-audit --no-fund --loglevel=error "dynalite@$version" >&2
fi
echo "$dir"
