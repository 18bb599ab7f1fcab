// Package zrcore is the raw SWIG wrapper of loaderx-in-C for Go: every
// function of the language-neutral interface bindings/swig/zr_core.i,
// with the Go typemaps of zrcore.swig. It is internal: the public API is
// the idiomatic package zrecord one directory up.
//
// `go build` runs SWIG on zrcore.swig itself (swig -go -cgo -intgosize 64);
// the C flags, and the -I flags SWIG needs to find zr_core.i and the
// public headers, come from the cgo directives below and from the
// libraries' pkg-config file (zloader.pc).
package zrcore

// SWIG must know whether int64_t is `long` (zrcore.swig): int64_long/ or
// int64_longlong/ joins the include path by GOOS/GOARCH. A target in
// neither list stops SWIG ("Unable to find 'zrcore_wordsize.i'"); one in
// the wrong list stops the C compile (a _Static_assert in zrcore.swig).

// #cgo pkg-config: zloader zmrec
// #cgo CPPFLAGS: -I${SRCDIR}/../../../swig
// #cgo linux,amd64 linux,arm64 linux,ppc64 linux,ppc64le linux,riscv64 linux,s390x linux,loong64 linux,mips64 linux,mips64le CPPFLAGS: -I${SRCDIR}/int64_long
// #cgo freebsd,amd64 freebsd,arm64 freebsd,riscv64 CPPFLAGS: -I${SRCDIR}/int64_long
// #cgo windows darwin ios 386 arm mips mipsle CPPFLAGS: -I${SRCDIR}/int64_longlong
import "C"
