#!/usr/bin/env bash
# Build SeaweedFS's `weed` (an S3-compatible server) from the Go module
# proxy, once per version, into a stable folder, and print its path.
#
#   bash scripts/seaweedfs.sh        -> ~/.cache/loaderx/seaweedfs/<version>/weed
#
# The remote-store tests (tests/remote/) start `weed server -s3` on
# 127.0.0.1. The build takes minutes on two cores, so it is cached by
# version under $LOADERX_CACHE (default ~/.cache/loaderx) and reused by
# every later run, CI included; a version change builds a new folder.
set -euo pipefail
VERSION=${SEAWEEDFS_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}
ROOT=${LOADERX_CACHE:-$HOME/.cache/loaderx}/seaweedfs/$VERSION
if [ -x "$ROOT/weed" ]; then
    echo "$ROOT/weed"
    exit 0
fi
command -v go >/dev/null || { echo "seaweedfs: needs Go (bash scripts/setup.sh --tests)" >&2; exit 1; }
mkdir -p "$ROOT"
tmp=$(mktemp -d "$ROOT/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "seaweedfs: building weed $VERSION (first run only; cached in $ROOT)" >&2
# One exact version from the module proxy, built as the main module in its
# (read-only) module-cache folder: `go install pkg@version` refuses it, since
# its go.mod carries a replace directive. Nothing of it is committed. CGO off
# gives a static binary that no system library update can break.
src=$(go mod download -json "github.com/seaweedfs/seaweedfs@$VERSION" |
      sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || { echo "seaweedfs: the module proxy did not give $VERSION" >&2; exit 1; }
(cd "$src" && CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=readonly" go build -o "$tmp/weed" ./weed) >&2
mv "$tmp/weed" "$ROOT/weed"
echo "$ROOT/weed"
