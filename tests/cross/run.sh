#!/usr/bin/env bash
# The cross-language determinism test: for the same stores, seed and
# options, the C, Python, Lua and Go loaders hand out identical indices and
# batch bytes. make_stores.py builds small stores once; each language's
# program runs every case of cases.txt and prints one line per step,
# `<step> <indices> <sha256 of the batch bytes, keys in sorted order>`;
# the outputs are compared byte for byte, case by case: every language runs
# every case, and a missing or empty output fails like a difference. And
# an mrec collection written from Python, Lua and Go must be the same bytes
# (mrec_write.py, mrec.lua, the Go crosscheck's mrec.go). And the same
# records give the same zstd dictionary from `zr train-dict` (the store
# sampled in C) and from each language's train_dict (dict.py, dict.lua, the
# Go crosscheck's dict.go): the sample rule is the library's.
#
# Run by scripts/test.sh (after its setup); by hand, from the repository
# root after a build and install: BUILD_DIR (default build), PREFIX
# (default .prefix), VENV (default .venv).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
PREFIX=$(cd "${PREFIX:-.prefix}" && pwd)
VENV=${VENV:-$PWD/.venv}
export PREFIX
multiarch=$(gcc -print-multiarch)
export PKG_CONFIG_PATH="$PREFIX/lib/$multiarch/pkgconfig:$PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
cases=$PWD/tests/cross/cases.txt
work=$(mktemp -d "${TMPDIR:-/tmp}/zr-cross.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/out"

"$VENV/bin/python3" tests/cross/make_stores.py "$work/stores"
"$BUILD_DIR/tests/cross/zr_cross" "$cases" "$work/stores" "$work/out"
"$VENV/bin/python3" tests/cross/cross.py "$cases" "$work/stores" "$work/out"
lua_module=$(ls "$BUILD_DIR"/bindings/lua/zrecord.* | grep -v '\.p$' | head -1)
LUA_CPATH="$(dirname "$lua_module")/?.${lua_module##*.}" lua5.4 tests/cross/cross.lua \
    "$cases" "$work/stores" "$work/out"
. scripts/go_env.sh
zr_go run ./internal/crosscheck "$cases" "$work/stores" "$work/out"

# mrec collections: Lua and Go write the collection Python writes
# (mrec_write.py); every LMDB key and value must be Python's, byte for byte,
# and the C tool and loaderx.mrec read and validate them.
"$VENV/bin/python3" tests/cross/mrec_write.py write "$work/mrec.py.mrec.lmdb"
LUA_CPATH="$(dirname "$lua_module")/?.${lua_module##*.}" lua5.4 tests/cross/mrec.lua "$work/mrec.lua.mrec.lmdb"
zr_go run ./internal/crosscheck mrec "$work/mrec.go.mrec.lmdb"
status=0
for lang in lua go; do
    "$BUILD_DIR/tools/zr" mrec validate "$work/mrec.$lang.mrec.lmdb" >/dev/null || status=1
done
"$VENV/bin/python3" tests/cross/mrec_write.py compare "$work/mrec.py.mrec.lmdb" \
    "$work/mrec.lua.mrec.lmdb" "$work/mrec.go.mrec.lmdb" || status=1

# dictionaries: one sample rule for every language and the zr tool.
"$VENV/bin/python3" tests/cross/dict.py make "$work/dict"
"$BUILD_DIR/tools/zr" train-dict --tier fast "$work/dict/src" -o "$work/dict/c" >/dev/null
"$VENV/bin/python3" tests/cross/dict.py train "$work/dict"
LUA_CPATH="$(dirname "$lua_module")/?.${lua_module##*.}" lua5.4 tests/cross/dict.lua "$work/dict"
zr_go run ./internal/crosscheck dict "$work/dict"
langs="c"
for lang in python lua go; do
    if [ -s "$work/dict/$lang" ] && cmp -s "$work/dict/c" "$work/dict/$lang"; then
        langs="$langs $lang"
    else
        echo "cross: dict: the $lang dictionary differs from zr train-dict's" >&2
        status=1
    fi
done
echo "cross: dict: $(wc -c < "$work/dict/c")-byte dictionary identical in: $langs"

for name in $(grep -v '^#' "$cases" | awk 'NF { print $1 }'); do
    ref=$work/out/$name.c
    if [ ! -s "$ref" ]; then
        echo "cross: $name: the C side printed nothing" >&2
        status=1
        continue
    fi
    langs="c"
    for lang in python lua go; do
        f=$work/out/$name.$lang
        if [ ! -s "$f" ]; then
            echo "cross: $name: the $lang side printed nothing" >&2
            status=1
        elif cmp -s "$ref" "$f"; then
            langs="$langs $lang"
        else
            echo "cross: $name: $lang differs from C:" >&2
            diff "$ref" "$f" | head -10 >&2 || true
            status=1
        fi
    done
    echo "cross: $name: $(wc -l < "$ref") steps identical in: $langs"
done
exit $status
