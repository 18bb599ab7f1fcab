package zrecord_test

import (
	"encoding/binary"
	"testing"

	"loaderx.invalid/zrecord"
)

// Readers beside a writer: a loader draws from the length its streams had
// when it was made (the Python suite's test_loader_length_fixed_at_creation).

func int64s(a, b int) []byte {
	out := make([]byte, 0, 8*(b-a))
	for i := a; i < b; i++ {
		out = binary.LittleEndian.AppendUint64(out, uint64(i))
	}
	return out
}

func maxOf(t *testing.T, l *zrecord.Loader) int64 {
	t.Helper()
	b, err := l.Next()
	if err != nil {
		t.Fatal(err)
	}
	m := int64(-1)
	for k := 0; k+8 <= len(b.Data[0]); k += 8 {
		if v := int64(binary.LittleEndian.Uint64(b.Data[0][k:])); v > m {
			m = v
		}
	}
	return m
}

func TestLoaderLengthFixedAtCreation(t *testing.T) {
	p := tmp(t, "l")
	w, err := zrecord.CreateDense(p, "<i8", nil, "zstd")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Append(int64s(0, 100)); err != nil {
		t.Fatal(err)
	}
	r, err := zrecord.OpenReadOnly(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	o := zrecord.LoaderOptions{BatchSize: 16, Mode: zrecord.IID, UseMode: true, Seed: 3, NumWorkers: 2}
	lw, err := zrecord.NewLoader([]*zrecord.Store{w}, o)
	if err != nil {
		t.Fatal(err)
	}
	lr, err := zrecord.NewLoader([]*zrecord.Store{r}, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(int64s(1000, 1100)); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Refresh(); err != nil || n != 200 || w.Len() != 200 {
		t.Fatalf("refresh: %d %v, writer %d", n, err, w.Len())
	}
	for k := 0; k < 30; k++ {
		if maxOf(t, lw) >= 100 || maxOf(t, lr) >= 100 {
			t.Fatal("a loader drew a record appended after it was made")
		}
	}
	lw.Close()
	lr.Close()
	o.BatchSize = 64
	l, err := zrecord.NewLoader([]*zrecord.Store{r}, o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m := int64(-1)
	for k := 0; k < 10; k++ {
		if v := maxOf(t, l); v > m {
			m = v
		}
	}
	if m < 1000 {
		t.Fatalf("a new loader over the refreshed reader never saw the appends (max %d)", m)
	}
}
