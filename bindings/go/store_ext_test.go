package zrecord_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"loaderx.invalid/zrecord"
)

func TestDeleteCompactReadOnly(t *testing.T) {
	p := tmp(t, "d")
	s, err := zrecord.CreateDense(p, "uint8", []uint64{2}, "zstd")
	if err != nil {
		t.Fatal(err)
	}
	s.Append([]byte("aabbccdd"))
	if err := s.Delete([]int64{0}); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 6)
	if err := s.Gather([]int64{0, 1, 2}, dst); err != nil || string(dst) != "ddbbcc" {
		t.Fatalf("after delete+compact: %q %v", dst, err)
	}
	if err := s.Delete([]int64{9}); !errors.Is(err, zrecord.ErrRange) {
		t.Fatalf("delete out of range: %v", err)
	}
	s.Close()
	a, err := zrecord.OpenReadOnly(p)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := zrecord.OpenReadOnly(p)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !a.ReadOnly() || b.Len() != 3 {
		t.Fatalf("readonly %v len %d", a.ReadOnly(), b.Len())
	}
	// One writer beside the readers (as LMDB), but only one.
	w, err := zrecord.Open(p)
	if err != nil {
		t.Fatalf("writer beside readers: %v", err)
	}
	defer w.Close()
	if _, err := zrecord.Open(p); !errors.Is(err, zrecord.ErrBusy) {
		t.Fatalf("second writer: %v", err)
	}
	if _, err := a.Append([]byte("ee")); !errors.Is(err, zrecord.ErrUnsupported) {
		t.Fatalf("append to read-only: %v", err)
	}
	if _, err := w.Append([]byte("eeff")); err != nil {
		t.Fatal(err)
	}
	// A reader's length changes only on Refresh.
	if a.Len() != 3 {
		t.Fatalf("reader length before refresh: %d", a.Len())
	}
	if n, err := a.Refresh(); err != nil || n != 5 || a.Len() != 5 {
		t.Fatalf("refresh: %d %v", n, err)
	}
	got := make([]byte, 4)
	if err := a.Gather([]int64{3, 4}, got); err != nil || string(got) != "eeff" {
		t.Fatalf("after refresh: %q %v", got, err)
	}
	// delete/compact need the store to themselves.
	if err := w.Compact(); !errors.Is(err, zrecord.ErrBusy) {
		t.Fatalf("compact beside readers: %v", err)
	}
}

func TestDict(t *testing.T) {
	var samples [][]byte
	for i := 0; i < 400; i++ {
		samples = append(samples, []byte(fmt.Sprintf("record %05d: the quick brown fox jumps over the lazy dog %d %s", i, i%13, bytes.Repeat([]byte{byte(65 + i%7)}, 60))))
	}
	dict, err := zrecord.TrainDict(samples, zrecord.DictFast)
	if err != nil {
		t.Fatal(err)
	}
	s, err := zrecord.CreateRaggedDict(tmp(t, "r"), "uint8", dict)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Codec() != "zstd_dict" {
		t.Fatalf("codec %s", s.Codec())
	}
	s.Append(samples[3])
	got, err := s.GatherRecords([]int64{0})
	if err != nil || !bytes.Equal(got[0].Data, samples[3]) {
		t.Fatalf("round trip: %v", err)
	}
	if _, err := zrecord.CreateRaggedDict(tmp(t, "x"), "uint8", nil); !errors.Is(err, zrecord.ErrInvalid) {
		t.Fatalf("zstd_dict without a dictionary: %v", err)
	}
}

func TestOpenRecover(t *testing.T) {
	p := tmp(t, "r")
	s, err := zrecord.CreateDense(p, "uint8", []uint64{2}, "raw")
	if err != nil {
		t.Fatal(err)
	}
	s.Append(bytes.Repeat([]byte("ab"), 10))
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	s.Append(bytes.Repeat([]byte("cd"), 5))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A power loss kept the header (15 records) but only 12 table entries.
	if err := os.Truncate(filepath.Join(p, "0.loc"), 12*16); err != nil {
		t.Fatal(err)
	}
	if _, err := zrecord.Open(p); !errors.Is(err, zrecord.ErrNotStore) || !strings.Contains(err.Error(), "recovery") {
		t.Fatalf("plain open of a store needing recovery: %v", err)
	}
	r, err := zrecord.OpenRecover(p)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 6)
	if r.Len() != 12 || r.Gather([]int64{9, 10, 11}, dst) != nil || string(dst) != "abcdcd" {
		t.Fatalf("after recovery: len %d, %q", r.Len(), dst)
	}
	r.Append([]byte("ef"))
	r.Close()
	ro, err := zrecord.OpenReadOnly(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if ro.Len() != 13 {
		t.Fatalf("reopened: len %d, want 13", ro.Len())
	}
}
