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

// #cgo pkg-config: zloader
// #cgo CPPFLAGS: -I${SRCDIR}/../../../swig
import "C"
