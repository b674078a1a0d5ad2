#!/bin/sh
# install-azurite.sh installs Azurite, Microsoft's Azure Storage emulator,
# which fence/azblob's tests run against (internal/testkit/azuritetest
# starts its blob service), unless it is already installed: npm installs
# it into $GOPATH/azurite/<version>, where azuritetest looks for it, with
# nothing global. It prints Azurite's package directory; the blob service
# is node <dir>/dist/src/blob/main.js. It needs node and npm (.ci/setup.sh
# installs Debian's).
#
#   AZURITE_VERSION  version to install (default 3.33.0: 3.36 and later
#                    require node 21 or 22, and Debian 12's is 18; 3.34
#                    and 3.35 load @azure/core-* libraries that require
#                    node 20, and collect telemetry unless told not to)
#   AZURITE_BEFORE   npm's --before: the dependencies as they were on
#                    that date (default 2024-12-31, 3.33.0's month, when
#                    every one of them still ran on node 18), so that an
#                    install is the same next year
set -eu

version="${AZURITE_VERSION:-3.33.0}"
before="${AZURITE_BEFORE:-2024-12-31}"
prefix="$(go env GOPATH | cut -d: -f1)/azurite/$version"
dir="$prefix/node_modules/azurite"

if [ ! -f "$dir/package.json" ]; then
	echo "install-azurite: npm install azurite@$version (dependencies as of $before) into $prefix (half a minute)" >&2
	npm install --prefix "$prefix" --before="$before" --omit=optional --no-audit --no-fund --loglevel=error "azurite@$version" >&2
fi
echo "$dir"
