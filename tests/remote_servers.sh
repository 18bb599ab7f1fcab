#!/usr/bin/env bash
# Run a command against the Python suite's real servers on 127.0.0.1
# (tests/python/remote_servers.py): nginx serving a fresh empty directory,
# exported as ZR_TEST_HTTP_ROOT (files written there are served at once)
# and ZR_TEST_HTTP_URL; and, where SeaweedFS is built (scripts/setup.sh
# --tests), an S3 server with the bucket "zrtest", exported as the AWS_*
# variables a client needs. The remote cache goes to a fresh directory.
#
#   bash tests/remote_servers.sh COMMAND [ARGS...]
#
# Without nginx it exits 77 (meson's "skipped"), as the Python suite skips
# its remote tests then; without SeaweedFS the command runs with no
# AWS_ENDPOINT_URL, and the S3 cases skip, saying why. The servers stop
# when the command ends.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
servers=$here/tests/python/remote_servers.py
if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
    echo "remote_servers: skipped: nginx is installed by scripts/setup.sh --tests"
    exit 77
fi
py=$(command -v python3) || { echo "remote_servers: skipped: no python3 to run $servers"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/zr-remote-XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT
# Start `remote_servers.py ARGS` and wait (up to $1 s) for it to print $2.
start() {
    local timeout=$1 want=$2 out=$3 what=$4
    shift 3
    "$py" "$servers" "$@" >"$out" 2>"$out.err" &
    pids+=($!)
    local pid=$! t=0
    while ! grep -q "$want" "$out" 2>/dev/null; do
        if ! kill -0 "$pid" 2>/dev/null || [ $t -ge $((timeout * 5)) ]; then
            echo "remote_servers: $what did not start:" >&2
            cat "$out.err" >&2
            return 1
        fi
        sleep 0.2
        t=$((t + 1))
    done
}
mkdir -p "$work/root" "$work/cache"
start 60 '^http://' "$work/nginx.out" nginx "$work/root" || exit 1
export ZR_TEST_HTTP_ROOT=$work/root
export ZR_TEST_HTTP_URL=$(head -n 1 "$work/nginx.out")
export ZR_CACHE_DIR=$work/cache ZR_CACHE_BLOCK=64K
export ZR_REMOTE_CONNECT_TIMEOUT=2 ZR_REMOTE_READ_TIMEOUT=2
unset AWS_ENDPOINT_URL AWS_PROFILE
if start 180 '^export AWS_ENDPOINT_URL=' "$work/s3.out" s3 "$work/s3" zrtest; then
    eval "$(grep '^export AWS_' "$work/s3.out")"
else
    echo "remote_servers: SeaweedFS is not available; the S3 cases skip" >&2
fi
"$@"
