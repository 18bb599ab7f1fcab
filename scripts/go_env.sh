# Sourced by scripts/test.sh and tests/cross/run.sh: zr_go ARGS... runs
# `go ARGS...` in bindings/go against the C install of $PREFIX (the
# caller sets PREFIX and PKG_CONFIG_PATH; the working directory is the
# repository root).
#
# The binary loads the libraries of this prefix, not any other install.
# Go's build cache keys the cgo package on its own directory only, not on
# the headers it includes from the prefix: their hash in CGO_CFLAGS makes
# a changed header a new build (a stale wrapper of an older zld_options
# aborted in free()).
zr_go() {
    local multiarch hdrs
    multiarch=$(gcc -print-multiarch)
    hdrs=$(cat "$PREFIX"/include/z*.h bindings/swig/* | sha256sum | cut -c1-16)
    (cd bindings/go && CGO_ENABLED=1 CGO_CFLAGS="-O2 -g -DZR_HEADERS_HASH=$hdrs" \
        LD_LIBRARY_PATH="$PREFIX/lib/$multiarch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        go "$@")
}
