#!/usr/bin/env bash
# Build and run the C example as a C user does: the installed public
# headers and libraries, found by pkg-config (PKG_CONFIG_PATH must point at
# <prefix>/lib/<multiarch>/pkgconfig for a prefix outside the default
# search path). The RPATH lets it run without LD_LIBRARY_PATH.
#   bash examples/c/build.sh [OUTDIR]     (default: a temporary directory)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$(mktemp -d)}
mkdir -p "$out"
rm -rf "$out/stores" && mkdir "$out/stores"
cc -std=c11 -Wall -Wextra -Werror -O2 "$here/store_and_load.c" -o "$out/store_and_load" \
    $(pkg-config --cflags zloader) $(pkg-config --libs zloader) \
    -Wl,-rpath,"$(pkg-config --variable=libdir zloader)"
"$out/store_and_load" "$out/stores"
