package zrecord_test

import (
	"errors"
	"strings"
	"testing"

	"loaderx.invalid/zrecord"
)

// A zero BatchSize is an error, not a silent 256.
func TestNewLoaderRejectsZeroBatchSize(t *testing.T) {
	s, err := zrecord.CreateDense(tmp(t, "b0"), "uint8", []uint64{1}, "raw")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Append([]byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	_, err = zrecord.NewLoader([]*zrecord.Store{s}, zrecord.LoaderOptions{})
	if !errors.Is(err, zrecord.ErrInvalid) || !strings.HasPrefix(err.Error(), "zrecord.NewLoader: ") ||
		!strings.Contains(err.Error(), "BatchSize") {
		t.Fatalf("BatchSize 0: got %v, want ErrInvalid from zrecord.NewLoader naming BatchSize", err)
	}
	l, err := zrecord.NewLoader([]*zrecord.Store{s}, zrecord.LoaderOptions{BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if b, err := l.Next(); err != nil || len(b.Indices) != 2 {
		t.Fatalf("BatchSize 2: %v %v", b, err)
	}
}

// Errors name the Go function that failed, not the C function under it.
func TestErrorsNameTheGoFunction(t *testing.T) {
	_, err := zrecord.TrainDict([][]byte{[]byte("a")}, zrecord.DictFast)
	if !errors.Is(err, zrecord.ErrInvalid) {
		t.Fatalf("TrainDict on one byte: %v, want ErrInvalid", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "zrecord.TrainDict: ") || strings.Contains(msg, "train_dict") {
		t.Fatalf("TrainDict error %q: want it to start with zrecord.TrainDict and not name the C function", msg)
	}
	_, err = zrecord.Open(tmp(t, "missing"))
	if err == nil || !strings.HasPrefix(err.Error(), "zrecord.Open: ") {
		t.Fatalf("Open of a missing path: %v, want an error from zrecord.Open", err)
	}
	var ze *zrecord.Error
	if !errors.As(err, &ze) || ze.Op != "zrecord.Open" {
		t.Fatalf("Open error %#v: want Op zrecord.Open", err)
	}
}
