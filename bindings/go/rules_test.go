package zrecord_test

import (
	"errors"
	"strings"
	"testing"

	"loaderx.invalid/zrecord"
)

// The loader's limits are the C library's (zld_create): Go reaches them
// through LoaderOptions, and the error names the option and its limit.
func TestLoaderLimits(t *testing.T) {
	s := flipStore(t, "limits")
	cases := []struct {
		o    zrecord.LoaderOptions
		want string
	}{
		{zrecord.LoaderOptions{BatchSize: 4, NumWorkers: 4097}, "num_workers must be <= 4096"},
		{zrecord.LoaderOptions{BatchSize: 4, NumWorkers: 1, Prefetch: 65537}, "prefetch must be <= 65536"},
	}
	for _, c := range cases {
		l, err := zrecord.NewLoader([]*zrecord.Store{s}, c.o)
		if l != nil {
			l.Close()
		}
		if !errors.Is(err, zrecord.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want ErrInvalid with %q", c.o, err, c.want)
		}
	}
	l := flipLoader(t, []*zrecord.Store{s}, zrecord.LoaderOptions{BatchSize: 4, NumWorkers: 2, Prefetch: 65536})
	if _, err := l.Next(); err != nil {
		t.Fatal(err)
	}
}

// Ragged records are packed by the C encoder: an empty record and a
// scalar one round-trip, and a payload that does not match its shape is
// refused naming the record and the sizes, with nothing appended.
func TestAppendRecordsEncoder(t *testing.T) {
	s, err := zrecord.CreateRagged(tmp(t, "enc"), "float32", "raw")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs := []zrecord.Record{
		{Shape: []uint64{0, 4}, Data: nil},
		{Shape: nil, Data: []byte{1, 2, 3, 4}},
	}
	if first, err := s.AppendRecords(recs...); err != nil || first != 0 {
		t.Fatalf("append: %d %v", first, err)
	}
	got, err := s.GatherRecords([]int64{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(got[0].Shape) != 2 || got[0].Shape[1] != 4 || len(got[0].Data) != 0 ||
		len(got[1].Shape) != 0 || string(got[1].Data) != "\x01\x02\x03\x04" {
		t.Fatalf("round trip: %+v", got)
	}
	_, err = s.AppendRecords(zrecord.Record{Shape: []uint64{1}, Data: make([]byte, 4)},
		zrecord.Record{Shape: []uint64{2}, Data: make([]byte, 4)})
	want := "record 1: record of shape with 2 elements needs 8 bytes of data, got 4"
	if !errors.Is(err, zrecord.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Fatalf("bad record: got %v, want ErrInvalid with %q", err, want)
	}
	if s.Len() != 2 {
		t.Fatalf("a refused append committed something: len %d", s.Len())
	}
}

// dtype names are the C parser's (zrs_dtype_from_name): numpy strings,
// names and codes; a big-endian name is refused since Go records are raw
// little-endian bytes.
func TestDtypeNames(t *testing.T) {
	for name, want := range map[string]int{"float32": 4, "f4": 4, "<f4": 4, "|u1": 1, "u1": 1, "bool": 1, "c16": 16, "int64": 8} {
		if got, err := zrecord.Itemsize(name); err != nil || got != want {
			t.Errorf("Itemsize(%q) = %d, %v; want %d", name, got, err, want)
		}
	}
	if _, err := zrecord.Itemsize(">f4"); !errors.Is(err, zrecord.ErrInvalid) || !strings.Contains(err.Error(), "big-endian") {
		t.Errorf("Itemsize(\">f4\"): %v", err)
	}
	if _, err := zrecord.Itemsize("float"); !errors.Is(err, zrecord.ErrInvalid) {
		t.Errorf("Itemsize(\"float\"): %v", err)
	}
}
