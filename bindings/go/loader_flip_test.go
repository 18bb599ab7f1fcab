package zrecord_test

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"loaderx.invalid/zrecord"
)

// (3, 8, 5) uint8 records: an odd width along the flipped axis.
const flipN, flipW, flipRS = 20, 5, 3 * 8 * 5

func flipSource(i uint64) []byte {
	r := make([]byte, flipRS)
	for j := range r {
		r[j] = byte(int(i)*37 + j*11)
	}
	return r
}

// r reversed along its last axis (every row of flipW bytes).
func flipReversed(r []byte) []byte {
	out := make([]byte, len(r))
	for row := 0; row < len(r)/flipW; row++ {
		for j := 0; j < flipW; j++ {
			out[row*flipW+j] = r[row*flipW+flipW-1-j]
		}
	}
	return out
}

func flipStore(t *testing.T, name string) *zrecord.Store {
	t.Helper()
	s, err := zrecord.CreateDense(tmp(t, name), "uint8", []uint64{3, 8, flipW}, "raw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for i := uint64(0); i < flipN; i++ {
		if _, err := s.Append(flipSource(i)); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func flipLoader(t *testing.T, streams []*zrecord.Store, o zrecord.LoaderOptions) *zrecord.Loader {
	t.Helper()
	l, err := zrecord.NewLoader(streams, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// checkFlips checks every record of stream k of b against its source,
// reversed exactly where the loader's mask says; returns how many flipped.
func checkFlips(t *testing.T, l *zrecord.Loader, b *zrecord.Batch, k int) int {
	t.Helper()
	mask, err := l.Flipped(k, b.Step)
	if err != nil {
		t.Fatal(err)
	}
	if len(mask) != len(b.Indices) {
		t.Fatalf("mask of %d entries for %d records", len(mask), len(b.Indices))
	}
	n := 0
	for r, i := range b.Indices {
		want := flipSource(i)
		if mask[r] {
			want = flipReversed(want)
			n++
		}
		if !bytes.Equal(b.Data[k][r*flipRS:(r+1)*flipRS], want) {
			t.Fatalf("step %d record %d (index %d, flipped %v) differs from its source", b.Step, r, i, mask[r])
		}
	}
	return n
}

func TestLoaderFlipHalf(t *testing.T) {
	s := flipStore(t, "img")
	o := zrecord.LoaderOptions{BatchSize: 4, Seed: 5, NumWorkers: 1, Flip: map[int]float64{0: 0.5}}
	a := flipLoader(t, []*zrecord.Store{s}, o)
	o.NumWorkers = 2
	b := flipLoader(t, []*zrecord.Store{s}, o)
	flipped, total := 0, 0
	for step := 0; step < 10; step++ {
		ba, err := a.Next()
		if err != nil {
			t.Fatal(err)
		}
		bb, err := b.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ba.Data[0], bb.Data[0]) {
			t.Fatalf("step %d: 1 and 2 workers differ", ba.Step)
		}
		flipped += checkFlips(t, a, ba, 0)
		total += len(ba.Indices)
	}
	if flipped == 0 || flipped == total {
		t.Fatalf("p = 0.5 flipped %d of %d records", flipped, total)
	}
}

func TestLoaderFlipAlwaysAndTogether(t *testing.T) {
	img, seg, plain := flipStore(t, "img"), flipStore(t, "seg"), flipStore(t, "plain")
	l := flipLoader(t, []*zrecord.Store{img, seg, plain},
		zrecord.LoaderOptions{BatchSize: 5, Seed: 1, Flip: map[int]float64{0: 1.0, 1: 1.0}})
	for step := 0; step < 4; step++ {
		b, err := l.Next()
		if err != nil {
			t.Fatal(err)
		}
		if n := checkFlips(t, l, b, 0); n != 5 {
			t.Fatalf("p = 1 flipped %d of 5", n)
		}
		if !bytes.Equal(b.Data[0], b.Data[1]) {
			t.Fatalf("step %d: streams with the same p did not flip together", b.Step)
		}
		for r, i := range b.Indices {
			if !bytes.Equal(b.Data[2][r*flipRS:(r+1)*flipRS], flipSource(i)) {
				t.Fatalf("step %d: the stream without a flip changed", b.Step)
			}
		}
	}
}

func TestLoaderFlipState(t *testing.T) {
	s := flipStore(t, "img")
	l := flipLoader(t, []*zrecord.Store{s}, zrecord.LoaderOptions{BatchSize: 4, Seed: 3, Flip: map[int]float64{0: 0.5}})
	for k := 0; k < 2; k++ {
		if _, err := l.Next(); err != nil {
			t.Fatal(err)
		}
	}
	st, err := l.State()
	if err != nil {
		t.Fatal(err)
	}
	if st.StartStep != 2 || st.BatchSize != 4 || st.Seed != 3 || len(st.Flip) != 1 || st.Flip[0] != 0.5 {
		t.Fatalf("state: %+v", st)
	}
	r := flipLoader(t, []*zrecord.Store{s}, st)
	for k := 0; k < 4; k++ {
		want, err := l.Next()
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if got.Step != want.Step || !bytes.Equal(got.Data[0], want.Data[0]) {
			t.Fatalf("resumed step %d differs from step %d", got.Step, want.Step)
		}
		checkFlips(t, r, got, 0)
	}
	plain := flipLoader(t, []*zrecord.Store{s}, zrecord.LoaderOptions{BatchSize: 4})
	if st, err := plain.State(); err != nil || st.Flip != nil {
		t.Fatalf("state without flips: %+v %v", st, err)
	}
	plain.Close()
	if _, err := plain.State(); !errors.Is(err, zrecord.ErrClosed) {
		t.Fatalf("State after Close: %v", err)
	}
}

func TestLoaderFlipErrors(t *testing.T) {
	s := flipStore(t, "img")
	rg, err := zrecord.CreateRagged(tmp(t, "r"), "uint8", "raw")
	if err != nil {
		t.Fatal(err)
	}
	defer rg.Close()
	sc, err := zrecord.CreateDense(tmp(t, "sc"), "float32", nil, "raw")
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for i := 0; i < flipN; i++ {
		if _, err := rg.AppendRecords(zrecord.Record{Shape: []uint64{1}, Data: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := sc.Append(make([]byte, 4)); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		streams []*zrecord.Store
		flip    map[int]float64
		want    string
	}{
		{[]*zrecord.Store{s}, map[int]float64{0: 1.5}, "flip: the probability of stream 0 must be in [0, 1], got 1.5"},
		{[]*zrecord.Store{s}, map[int]float64{0: -0.1}, "flip: the probability of stream 0 must be in [0, 1], got -0.1"},
		{[]*zrecord.Store{s}, map[int]float64{0: math.NaN()}, "flip: the probability of stream 0 must be in [0, 1]"},
		{[]*zrecord.Store{s}, map[int]float64{1: 0.5}, "Flip names stream 1, expected 0 to 0"},
		{[]*zrecord.Store{s}, map[int]float64{-1: 0.5}, "Flip names stream -1"},
		{[]*zrecord.Store{s, rg}, map[int]float64{1: 0.5}, "flip: stream 1 is ragged; only dense records can be flipped"},
		{[]*zrecord.Store{s, sc}, map[int]float64{1: 0.5}, "flip: stream 1 holds scalar records (no axis to flip)"},
	}
	for _, c := range cases {
		l, err := zrecord.NewLoader(c.streams, zrecord.LoaderOptions{BatchSize: 4, Flip: c.flip})
		if l != nil {
			l.Close()
		}
		if !errors.Is(err, zrecord.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Flip %v: got %v, want ErrInvalid with %q", c.flip, err, c.want)
		}
	}
	l := flipLoader(t, []*zrecord.Store{s, sc}, zrecord.LoaderOptions{BatchSize: 4, Flip: map[int]float64{0: 0.5}})
	if _, err := l.Flipped(1, 0); !errors.Is(err, zrecord.ErrInvalid) || !strings.Contains(err.Error(), "stream 1 has no flip") {
		t.Errorf("Flipped of a stream without a flip: %v", err)
	}
	l.Close()
	if _, err := l.Flipped(0, 0); !errors.Is(err, zrecord.ErrClosed) {
		t.Errorf("Flipped after Close: %v", err)
	}
}
