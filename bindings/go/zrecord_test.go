package zrecord_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"loaderx.invalid/zrecord"
)

func tmp(t *testing.T, name string) string { return filepath.Join(t.TempDir(), name) }

func record(i, size int) []byte {
	r := make([]byte, size)
	for k := range r {
		r[k] = byte(i*7 + k)
	}
	return r
}

func TestDenseRoundTrip(t *testing.T) {
	for _, codec := range []string{"raw", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			s, err := zrecord.CreateDense(tmp(t, "d"), "uint8", []uint64{2, 3}, codec)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.RecordSize() != 6 || s.Codec() != codec || s.Dtype() != "|u1" || s.Kind() != zrecord.Dense {
				t.Fatalf("identity: %d %s %s %v", s.RecordSize(), s.Codec(), s.Dtype(), s.Kind())
			}
			first, err := s.Append(record(0, 6), record(1, 6), append(record(2, 6), record(3, 6)...))
			if err != nil || first != 0 || s.Len() != 4 {
				t.Fatalf("append: first %d len %d err %v", first, s.Len(), err)
			}
			first, err = s.Append(record(4, 6))
			if err != nil || first != 4 {
				t.Fatalf("second append: %d %v", first, err)
			}
			dst := make([]byte, 3*6)
			if err := s.Gather([]int64{4, -5, 2}, dst); err != nil {
				t.Fatal(err)
			}
			want := append(append(record(4, 6), record(0, 6)...), record(2, 6)...)
			if !bytes.Equal(dst, want) {
				t.Fatalf("gather: %v want %v", dst, want)
			}
			got, err := s.Get(-1)
			if err != nil || !bytes.Equal(got, record(4, 6)) {
				t.Fatalf("get: %v %v", got, err)
			}
			st, err := s.Stats()
			if err != nil || st.Records != 5 || st.LogicalBytes != 30 {
				t.Fatalf("stats: %+v %v", st, err)
			}
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestReopen(t *testing.T) {
	p := tmp(t, "d")
	s, err := zrecord.CreateDense(p, "float32", []uint64{4}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(record(1, 16), record(2, 16)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = zrecord.OpenDense(p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Len() != 2 || s.Dtype() != "<f4" || s.Codec() != "zstd" || fmt.Sprint(s.ItemShape()) != "[4]" {
		t.Fatalf("reopened: %d %s %s %v", s.Len(), s.Dtype(), s.Codec(), s.ItemShape())
	}
	if _, err := zrecord.OpenRagged(p); !errors.Is(err, zrecord.ErrBusy) && !errors.Is(err, zrecord.ErrInvalid) {
		t.Fatalf("OpenRagged of a dense store held open: %v", err)
	}
}

func TestRagged(t *testing.T) {
	p := tmp(t, "r")
	s, err := zrecord.CreateRagged(p, "<i4", "zstd")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs := []zrecord.Record{
		{Shape: []uint64{2, 2}, Data: record(0, 16)},
		{Shape: nil, Data: record(1, 4)},
		{Shape: []uint64{3}, Data: record(2, 12)},
	}
	first, err := s.AppendRecords(recs...)
	if err != nil || first != 0 {
		t.Fatalf("append: %d %v", first, err)
	}
	if first, err = s.Append(record(3, 8)); err != nil || first != 3 {
		t.Fatalf("append 1-D: %d %v", first, err)
	}
	got, err := s.GatherRecords([]int64{2, 0, 1, -1})
	if err != nil {
		t.Fatal(err)
	}
	want := []zrecord.Record{recs[2], recs[0], recs[1], {Shape: []uint64{2}, Data: record(3, 8)}}
	for i := range want {
		if fmt.Sprint(got[i].Shape) != fmt.Sprint(want[i].Shape) && !(len(got[i].Shape) == 0 && len(want[i].Shape) == 0) {
			t.Fatalf("record %d shape %v want %v", i, got[i].Shape, want[i].Shape)
		}
		if !bytes.Equal(got[i].Data, want[i].Data) {
			t.Fatalf("record %d data differs", i)
		}
	}
	// wrong payload size for the shape: refused with the library's message
	_, err = s.AppendRecords(zrecord.Record{Shape: []uint64{3}, Data: record(0, 8)})
	if !errors.Is(err, zrecord.ErrInvalid) {
		t.Fatalf("bad ragged record: %v", err)
	}
	if s.Len() != 4 {
		t.Fatalf("failed append committed something: len %d", s.Len())
	}
}

func TestErrors(t *testing.T) {
	p := tmp(t, "d")
	s, err := zrecord.CreateDense(p, "uint8", []uint64{4}, "raw")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(record(0, 4)); err != nil {
		t.Fatal(err)
	}
	// create over an existing path
	if _, err := zrecord.CreateDense(p, "uint8", []uint64{4}, "raw"); !errors.Is(err, zrecord.ErrExist) {
		t.Fatalf("create existing: %v", err)
	}
	// a second handle while the first holds the lock
	if _, err := zrecord.Open(p); !errors.Is(err, zrecord.ErrBusy) {
		t.Fatalf("open busy: %v", err)
	}
	// out of range, with the library's message
	err = s.Gather([]int64{7}, make([]byte, 4))
	var ze *zrecord.Error
	if !errors.As(err, &ze) || ze.Code != zrecord.StatusRange || !strings.Contains(err.Error(), "7") {
		t.Fatalf("range: %v", err)
	}
	// destination too small
	if err := s.Gather([]int64{0, 0}, make([]byte, 7)); !errors.Is(err, zrecord.ErrInvalid) {
		t.Fatalf("small dst: %v", err)
	}
	// wrong record size
	if _, err := s.Append(record(0, 5)); !errors.Is(err, zrecord.ErrInvalid) {
		t.Fatalf("bad size: %v", err)
	}
	if _, err := zrecord.CreateDense(tmp(t, "x"), "float128", nil, ""); !errors.Is(err, zrecord.ErrInvalid) {
		t.Fatalf("bad dtype: %v", err)
	}
	if _, err := zrecord.CreateDense(tmp(t, "y"), "uint8", nil, "lz4"); !errors.Is(err, zrecord.ErrInvalid) {
		t.Fatalf("bad codec: %v", err)
	}
	if _, err := zrecord.Open(tmp(t, "missing")); !errors.Is(err, zrecord.ErrNotStore) {
		t.Fatalf("open missing: %v", err)
	}
	// use after close: in-band error, no crash; Close is idempotent
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Gather([]int64{0}, make([]byte, 4)); !errors.Is(err, zrecord.ErrClosed) {
		t.Fatalf("gather after close: %v", err)
	}
	if _, err := s.Append(record(0, 4)); !errors.Is(err, zrecord.ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if s.Len() != 0 {
		t.Fatalf("Len after close: %d", s.Len())
	}
}

// The detail message must belong to the failing call even when many
// goroutines fail differently at once (errors are read on the thread of
// the call that failed).
func TestErrorMessagesPerGoroutine(t *testing.T) {
	s, err := zrecord.CreateDense(tmp(t, "d"), "uint8", []uint64{1}, "raw")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Append(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for k := 0; k < 50; k++ {
				bad := int64(100 + g)
				err := s.Gather([]int64{bad}, make([]byte, 1))
				if err == nil || !strings.Contains(err.Error(), fmt.Sprint(bad)) {
					errs <- fmt.Errorf("goroutine %d: %v", g, err)
					return
				}
				runtime.Gosched()
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestSampler(t *testing.T) {
	s, err := zrecord.NewSampler(zrecord.SamplerConfig{Length: 10, BatchSize: 5, Seed: 7, Mode: zrecord.Cyclic})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.Next()
	b, _ := s.Next()
	seen := map[uint64]bool{}
	for _, v := range append(a, b...) {
		if v >= 10 || seen[v] {
			t.Fatalf("cycle 0 is not a permutation: %v %v", a, b)
		}
		seen[v] = true
	}
	again, _ := s.Indices(1)
	if fmt.Sprint(again) != fmt.Sprint(b) {
		t.Fatalf("not a pure function of step: %v vs %v", again, b)
	}
	if _, err := zrecord.NewSampler(zrecord.SamplerConfig{Length: 3, BatchSize: 4, Mode: zrecord.Cyclic}); !errors.Is(err, zrecord.ErrInvalid) {
		t.Fatalf("invalid config accepted: %v", err)
	}
	if m, err := zrecord.ParseMode("IID"); err != nil || m != zrecord.IID {
		t.Fatalf("ParseMode: %v %v", m, err)
	}
}

func TestLoader(t *testing.T) {
	d, err := zrecord.CreateDense(tmp(t, "d"), "uint8", []uint64{3}, "raw")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r, err := zrecord.CreateRagged(tmp(t, "r"), "uint8", "zstd")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := 0; i < 8; i++ {
		d.Append([]byte{byte(i), byte(i), byte(i)})
		r.Append(bytes.Repeat([]byte{byte(i)}, i+1))
	}
	l, err := zrecord.NewLoader([]*zrecord.Store{d, r}, zrecord.LoaderOptions{BatchSize: 4, Seed: 3, NumWorkers: 2})
	if err != nil {
		t.Fatal(err)
	}
	for step := uint64(0); step < 5; step++ {
		b, err := l.Next()
		if err != nil {
			t.Fatal(err)
		}
		if b.Step != step || len(b.Indices) != 4 || len(b.Data[0]) != 12 || b.Records[0] != nil || len(b.Records[1]) != 4 {
			t.Fatalf("batch %d: %+v", step, b)
		}
		for k, i := range b.Indices {
			if b.Data[0][3*k] != byte(i) || len(b.Records[1][k].Data) != int(i)+1 || b.Records[1][k].Data[0] != byte(i) {
				t.Fatalf("step %d record %d (index %d) misaligned", step, k, i)
			}
		}
	}
	if l.Step() != 5 {
		t.Fatalf("step %d", l.Step())
	}
	// closing a stream closes the loader reading it
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Next(); !errors.Is(err, zrecord.ErrClosed) {
		t.Fatalf("next after store close: %v", err)
	}
	if _, err := zrecord.NewLoader([]*zrecord.Store{d}, zrecord.LoaderOptions{BatchSize: 4}); !errors.Is(err, zrecord.ErrClosed) {
		t.Fatalf("loader over a closed store: %v", err)
	}
}

// Handles dropped without Close are closed by the finalizer: the lock is
// released, so the store can be opened again.
func TestFinalizer(t *testing.T) {
	p := tmp(t, "d")
	func() {
		s, err := zrecord.CreateDense(p, "uint8", []uint64{1}, "raw")
		if err != nil {
			t.Fatal(err)
		}
		s.Append([]byte{1})
	}()
	var s *zrecord.Store
	var err error
	for k := 0; k < 50; k++ {
		runtime.GC()
		if s, err = zrecord.Open(p); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("store still locked after GC: %v", err)
	}
	defer s.Close()
	if s.Len() != 1 {
		t.Fatalf("len %d", s.Len())
	}
}

// Closing a store under a live loader (two workers gathering) is safe:
// Next fails with ErrClosed naming the store, every time, Closed reports
// it; a store a loader reads refuses Delete and Compact (ErrBusy).
func TestCloseStoreUnderLiveLoader(t *testing.T) {
	for round := 0; round < 20; round++ {
		p := tmp(t, "d")
		d, err := zrecord.CreateDense(p, "uint8", []uint64{3}, "raw")
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 64; i++ {
			d.Append([]byte{byte(i), byte(i), byte(i)})
		}
		l, err := zrecord.NewLoader([]*zrecord.Store{d}, zrecord.LoaderOptions{BatchSize: 4, NumWorkers: 2, Prefetch: 4})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Next(); err != nil {
			t.Fatal(err)
		}
		if err := d.Delete([]int64{0}); !errors.Is(err, zrecord.ErrBusy) || !strings.Contains(err.Error(), "exclusive") {
			t.Fatalf("delete under a loader: %v", err)
		}
		if err := d.Compact(); !errors.Is(err, zrecord.ErrBusy) {
			t.Fatalf("compact under a loader: %v", err)
		}
		if d.Len() != 64 {
			t.Fatalf("%d records after a refused delete", d.Len())
		}
		if l.Closed() {
			t.Fatal("closed before its store")
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if !l.Closed() {
			t.Fatal("the loader must report its store's close")
		}
		for k := 0; k < 3; k++ {
			_, err := l.Next()
			if !errors.Is(err, zrecord.ErrClosed) || !strings.Contains(err.Error(), p) ||
				!strings.Contains(err.Error(), "was closed while") {
				t.Fatalf("next after the store's close: %v", err)
			}
		}
		l.Close()
	}
}
