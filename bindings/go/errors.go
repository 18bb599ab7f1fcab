package zrecord

import (
	"fmt"
	"regexp"
	"runtime"

	"loaderx.invalid/zrecord/internal/zrcore"
)

// Status is a loaderx-in-C status code (zr_status in zrerror.h): 0 or
// negative.
type Status int

// The status codes an Error can carry: the values of zrerror.h (a test
// checks each against the C table).
const (
	StatusInvalid     Status = -1  // a bad argument: wrong size, dtype, shape
	StatusNoMemory    Status = -2  // an allocation failed
	StatusIO          Status = -3  // the operating system refused a file operation
	StatusBusy        Status = -4  // the store is locked by another handle/process
	StatusExist       Status = -5  // create: the path already exists
	StatusNotStore    Status = -6  // open: not a store, or malformed
	StatusRange       Status = -7  // an index is out of range
	StatusCorrupt     Status = -8  // stored bytes are inconsistent
	StatusTooBig      Status = -9  // a record over the size limit
	StatusUnsupported Status = -10 // an operation this handle or build cannot do
	StatusClosed      Status = -11 // the object was closed
	StatusState       Status = -12 // an error earlier in a pipeline
	StatusInterrupted Status = -13 // stopped early on request; the store is intact
)

// Name is the C name of the status without its ZR_ prefix ("EINVAL"), or
// "" for a code outside the table.
func (s Status) Name() string { return zrcore.Zr_status_name(int(s)) }

// String is the C library's short text for the status (zr_strerror).
func (s Status) String() string { return zrcore.Zr_strerror(int(s)) }

// sentinel is the errors.Is target for a status: its text is the C
// library's zr_strerror.
func sentinel(s Status) *Error { return &Error{Code: s, Msg: s.String()} }

// Sentinel errors for errors.Is: errors.Is(err, zrecord.ErrRange) is true
// for any *Error with that status.
var (
	ErrInvalid     = sentinel(StatusInvalid)
	ErrNoMemory    = sentinel(StatusNoMemory)
	ErrIO          = sentinel(StatusIO)
	ErrBusy        = sentinel(StatusBusy)
	ErrExist       = sentinel(StatusExist)
	ErrNotStore    = sentinel(StatusNotStore)
	ErrRange       = sentinel(StatusRange)
	ErrCorrupt     = sentinel(StatusCorrupt)
	ErrTooBig      = sentinel(StatusTooBig)
	ErrUnsupported = sentinel(StatusUnsupported)
	ErrClosed      = sentinel(StatusClosed)
	ErrState       = sentinel(StatusState)
	ErrInterrupted = sentinel(StatusInterrupted)
)

// Error is a failure reported by the C libraries: the status code and
// the library's detail message (what was wrong, where, expected vs got).
// Op names the Go function that failed ("zrecord.TrainDict",
// "zrecord.Store.Append"); Error() starts with it.
type Error struct {
	Code Status
	Msg  string
	Op   string
}

func (e *Error) Error() string {
	if e.Op != "" {
		return e.Op + ": " + e.Msg
	}
	return "zrecord: " + e.Msg
}

// Is reports whether target is an *Error with the same Code, so that
// errors.Is(err, ErrRange) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

func errorf(code Status, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// opErrorf is errorf for the Go function op ("zrecord.NewLoader").
func opErrorf(op string, code Status, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...), Op: op}
}

// cName matches the C function a library message starts with
// ("train_dict: ", "zld_create: "): the Go caller's name replaces it.
var cName = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)+: `)

// callAs is call for the Go function op: its error names op, not the C
// function behind it.
func callAs(op string, f func() int) error {
	err := call(f)
	if e, ok := err.(*Error); ok {
		e.Op = op
		e.Msg = cName.ReplaceAllString(e.Msg, "")
	}
	return err
}

// call runs one status-returning C call and, if it failed, reads the
// detail message on the same OS thread: zr_last_error() is thread-local in
// C, and a goroutine may move to another thread between two cgo calls
// unless it is locked to its thread for both.
func call(f func() int) error {
	runtime.LockOSThread()
	rc := f()
	var msg string
	if rc < 0 {
		msg = zrcore.Zr_last_error()
		if msg == "" {
			msg = zrcore.Zr_strerror(rc)
		}
	}
	runtime.UnlockOSThread()
	if rc < 0 {
		return &Error{Code: Status(rc), Msg: msg}
	}
	return nil
}
