#!/bin/sh
# install-azurite.sh installs Azurite, Microsoft's Azure Storage emulator,
# which fence/azblob's tests run against (internal/testkit/azuritetest
# starts its azurite-blob), unless it is already installed: npm installs it
# into $GOPATH/azurite/<version>, where azuritetest looks for it, with
# nothing global. It prints Azurite's package directory; its blob server is
# node_modules/.bin/azurite-blob beside it (or node <dir>/dist/src/blob/main.js).
# It needs node and npm (.ci/setup.sh installs Debian's).
#
#   AZURITE_VERSION  version to install (default 3.35.0: 3.36 and later
#                    require node 21 or 22, and Debian 12's is 18)
set -eu

version="${AZURITE_VERSION:-3.35.0}"
prefix="$(go env GOPATH | cut -d: -f1)/azurite/$version"
dir="$prefix/node_modules/azurite"

if [ ! -f "$dir/package.json" ]; then
	echo "install-azurite: npm install azurite@$version into $prefix (a minute or so)" >&2
	npm install --prefix "$prefix" --omit=optional --no-audit --no-fund --loglevel=error "azurite@$version" >&2
fi
echo "$dir"
