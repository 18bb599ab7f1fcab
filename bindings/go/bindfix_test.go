package zrecord_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"loaderx.invalid/zrecord"
)

// A store and a loader over it, both dropped without Close: the two
// finalizers must run (no finalizer cycle between Store and Loader), so
// the store's lock is released and it can be opened again.
func TestFinalizerWithLoader(t *testing.T) {
	p := tmp(t, "d")
	func() {
		s, err := zrecord.CreateDense(p, "uint8", []uint64{1}, "raw")
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 8; i++ {
			if _, err := s.Append([]byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
		}
		l, err := zrecord.NewLoader([]*zrecord.Store{s}, zrecord.LoaderOptions{BatchSize: 2, NumWorkers: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Next(); err != nil {
			t.Fatal(err)
		}
	}()
	var s *zrecord.Store
	var err error
	for k := 0; k < 100; k++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		if s, err = zrecord.Open(p); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("store still locked after dropping it and its loader: %v", err)
	}
	defer s.Close()
	if s.Len() != 8 {
		t.Fatalf("len %d", s.Len())
	}
}

// A nil stream is an error naming its position, not a panic.
func TestLoaderNilStream(t *testing.T) {
	r, err := zrecord.CreateDense(tmp(t, "d"), "uint8", []uint64{1}, "raw")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Append([]byte{1}, []byte{2})
	_, err = zrecord.NewLoader([]*zrecord.Store{r, nil}, zrecord.LoaderOptions{BatchSize: 1})
	if !errors.Is(err, zrecord.ErrInvalid) || !strings.Contains(err.Error(), "stream 1") {
		t.Fatalf("nil stream: %v", err)
	}
	// a closed stream names its position too
	c, err := zrecord.CreateDense(tmp(t, "c"), "uint8", []uint64{1}, "raw")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	_, err = zrecord.NewLoader([]*zrecord.Store{r, c}, zrecord.LoaderOptions{BatchSize: 1})
	if !errors.Is(err, zrecord.ErrClosed) || !strings.Contains(err.Error(), "stream 1") {
		t.Fatalf("closed stream: %v", err)
	}
	// r is still usable (its read lock was released)
	if r.Len() != 2 || r.Close() != nil {
		t.Fatal("store left locked")
	}
}

// A 1-D ragged record whose byte length is not a whole number of items
// says so (not a misleading shape error from the library).
func TestRaggedAppendItemsize(t *testing.T) {
	s, err := zrecord.CreateRagged(tmp(t, "r"), "int32", "raw")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Append([]byte{1, 2, 3})
	if !errors.Is(err, zrecord.ErrInvalid) || !strings.Contains(err.Error(), "3 bytes is not a multiple of the itemsize 4") {
		t.Fatalf("odd byte count: %v", err)
	}
	if s.Len() != 0 {
		t.Fatalf("len %d", s.Len())
	}
}

// Appending zero records is a no-op returning Len() for both kinds.
func TestAppendNothing(t *testing.T) {
	d, err := zrecord.CreateDense(tmp(t, "d"), "uint8", []uint64{2}, "raw")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r, err := zrecord.CreateRagged(tmp(t, "r"), "uint8", "raw")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d.Append([]byte{1, 2})
	r.Append([]byte{1, 2})
	for _, s := range []*zrecord.Store{d, r} {
		if first, err := s.Append(); err != nil || first != 1 || s.Len() != 1 {
			t.Fatalf("%s: empty append: %d %v", s.Kind(), first, err)
		}
	}
}

// `go vet ./...` is clean, generated SWIG package included (its string
// copy is overridden in zrcore.swig). Skipped with -short.
func TestGoVetClean(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go vet")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goBin); err != nil {
			t.Skip("go not found")
		}
	}
	cmd := exec.Command(goBin, "vet", "./...")
	// Vet reads the Go file SWIG generates for internal/zrcore from the
	// current build's work directory, but the go command does not run SWIG
	// again when the package's build comes from the build cache: right
	// after `go build` (or a `go test` that did not vet zrcore) vet then
	// fails with "can't parse raw cgo file: open .../_zrcore_swig.go".
	// A CGO_CFLAGS of this run alone makes the cached build unusable for
	// this one command, so SWIG runs and vet sees its output (about 10 s).
	cflags := os.Getenv("CGO_CFLAGS")
	if cflags == "" {
		cflags = "-O2 -g"
	}
	cmd.Env = append(os.Environ(), fmt.Sprintf("CGO_CFLAGS=%s -DZR_GO_VET_RUN=%d", cflags, time.Now().UnixNano()))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go vet ./...: %v\n%s", err, out)
	}
}
