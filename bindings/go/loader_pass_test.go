package zrecord_test

// Finite evaluation passes, length bucketing, sequence packing and Pad
// from Go (the same behaviour as Python's PassLoader, mode='bucket',
// mode='pack' and pad()).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	"loaderx.invalid/zrecord"
)

const passN = 23

func passLabels(t *testing.T) *zrecord.Store {
	t.Helper()
	s, err := zrecord.CreateDense(tmp(t, "label"), "int64", nil, "raw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	buf := make([]byte, 8*passN)
	for i := 0; i < passN; i++ {
		binary.LittleEndian.PutUint64(buf[8*i:], uint64(i*10))
	}
	if _, err := s.Append(buf); err != nil {
		t.Fatal(err)
	}
	return s
}

// eachBatch calls fn on every batch of a finite pass, then checks that
// Next stays at io.EOF.
func eachBatch(t *testing.T, l *zrecord.Loader, fn func(b *zrecord.Batch)) {
	t.Helper()
	for {
		b, err := l.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		fn(b)
	}
	if _, err := l.Next(); err != io.EOF {
		t.Fatalf("Next after the end: %v, want io.EOF", err)
	}
}

// drainPass reads a pass to its end, checking each record's bytes;
// returns the indices in order and the batch sizes.
func drainPass(t *testing.T, l *zrecord.Loader) (seen []uint64, sizes []int) {
	t.Helper()
	eachBatch(t, l, func(b *zrecord.Batch) {
		sizes = append(sizes, len(b.Indices))
		for k, i := range b.Indices {
			if got := binary.LittleEndian.Uint64(b.Data[0][8*k:]); got != i*10 {
				t.Fatalf("step %d record %d: %d, want %d", b.Step, k, got, i*10)
			}
		}
		seen = append(seen, b.Indices...)
	})
	return seen, sizes
}

// passLoader is flipLoader for a finite pass.
func passLoader(t *testing.T, streams []*zrecord.Store, o zrecord.LoaderOptions) *zrecord.Loader {
	t.Helper()
	o.Pass = true
	return flipLoader(t, streams, o)
}

func TestPassIndexOrderDropLastShuffle(t *testing.T) {
	s := passLabels(t)
	l, err := zrecord.NewPassLoader([]*zrecord.Store{s}, zrecord.LoaderOptions{BatchSize: 5, NumWorkers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if n, finite := l.Steps(); n != 5 || !finite {
		t.Fatalf("Steps = %d, %v; want 5, true", n, finite)
	}
	seen, sizes := drainPass(t, l)
	if len(seen) != passN || sizes[4] != 3 {
		t.Fatalf("pass: %d records, sizes %v", len(seen), sizes)
	}
	for k, i := range seen {
		if i != uint64(k) {
			t.Fatalf("position %d: index %d", k, i)
		}
	}
	d := passLoader(t, []*zrecord.Store{s}, zrecord.LoaderOptions{BatchSize: 5, DropLast: true})
	if _, sizes := drainPass(t, d); len(sizes) != 4 {
		t.Fatalf("drop_last: %d steps, want 4", len(sizes))
	}
	order := func(seed, epoch uint64) string {
		l := passLoader(t, []*zrecord.Store{s}, zrecord.LoaderOptions{BatchSize: 4, Shuffle: true, Seed: seed, Epoch: epoch})
		seen, _ := drainPass(t, l)
		sorted := append([]uint64(nil), seen...)
		sort.Slice(sorted, func(a, b int) bool { return sorted[a] < sorted[b] })
		for k, i := range sorted {
			if i != uint64(k) {
				t.Fatalf("shuffle: not a permutation: %v", seen)
			}
		}
		return fmt.Sprint(seen)
	}
	if order(3, 0) != order(3, 0) || order(3, 0) == order(3, 1) || order(3, 0) == order(4, 0) {
		t.Fatal("shuffle: the order must be a function of (seed, epoch)")
	}
	e := flipLoader(t, []*zrecord.Store{s}, zrecord.LoaderOptions{BatchSize: 4})
	if _, finite := e.Steps(); finite {
		t.Fatal("an endless loader has finite steps")
	}
}

func TestPassRanksAndEvenBatches(t *testing.T) {
	s := passLabels(t)
	for _, drop := range []bool{false, true} {
		count := map[uint64]int{}
		for r := uint32(0); r < 3; r++ {
			l := passLoader(t, []*zrecord.Store{s}, zrecord.LoaderOptions{BatchSize: 2, Rank: r, WorldSize: 3, DropLast: drop, Shuffle: true})
			seen, _ := drainPass(t, l)
			for _, i := range seen {
				count[i]++
			}
		}
		want := passN
		if drop {
			want = 18
		}
		if len(count) != want {
			t.Fatalf("drop_last %v: %d records over the ranks, want %d", drop, len(count), want)
		}
		for i, c := range count {
			if c != 1 {
				t.Fatalf("record %d on %d ranks", i, c)
			}
		}
	}
	// 23 records, global batch 12: the last global batch's 11 go 3, 4, 4
	real := map[uint64]int{}
	var valid []uint64
	for r := uint32(0); r < 3; r++ {
		l := passLoader(t, []*zrecord.Store{s}, zrecord.LoaderOptions{BatchSize: 4, Rank: r, WorldSize: 3, EvenBatches: true})
		if n, _ := l.Steps(); n != 2 {
			t.Fatalf("rank %d: %d steps, want 2", r, n)
		}
		v := uint64(0)
		eachBatch(t, l, func(b *zrecord.Batch) {
			if len(b.Indices) != 4 {
				t.Fatalf("rank %d: a batch of %d rows", r, len(b.Indices))
			}
			v += b.Valid
			for _, i := range b.Indices[:b.Valid] {
				real[i]++
			}
		})
		valid = append(valid, v)
	}
	if fmt.Sprint(valid) != "[7 8 8]" || len(real) != passN {
		t.Fatalf("even_batches: real rows %v over %d records", valid, len(real))
	}
}

func TestPassResumeFromState(t *testing.T) {
	s := passLabels(t)
	o := zrecord.LoaderOptions{BatchSize: 3, Shuffle: true, Seed: 7, Epoch: 2}
	all, _ := drainPass(t, passLoader(t, []*zrecord.Store{s}, o))
	b := passLoader(t, []*zrecord.Store{s}, o)
	var head []uint64
	for k := 0; k < 3; k++ {
		bt, err := b.Next()
		if err != nil {
			t.Fatal(err)
		}
		head = append(head, bt.Indices...)
	}
	st, err := b.State()
	if err != nil {
		t.Fatal(err)
	}
	if !st.Pass || !st.Shuffle || st.Epoch != 2 || st.StartStep != 3 {
		t.Fatalf("state: %+v", st)
	}
	rest, _ := drainPass(t, flipLoader(t, []*zrecord.Store{s}, st))
	if fmt.Sprint(append(head, rest...)) != fmt.Sprint(all) {
		t.Fatalf("resumed pass %v, want %v", append(head, rest...), all)
	}
}

func TestBucketSimilarLengthsResume(t *testing.T) {
	const n = 64
	s, err := zrecord.CreateDense(tmp(t, "b"), "int32", nil, "raw")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	buf := make([]byte, 4*n)
	lengths := make([]uint32, n)
	for i := range lengths {
		lengths[i] = uint32(i*37) % 61
		binary.LittleEndian.PutUint32(buf[4*i:], uint32(i))
	}
	if _, err := s.Append(buf); err != nil {
		t.Fatal(err)
	}
	o := zrecord.LoaderOptions{BatchSize: 4, Seed: 2, BucketLengths: lengths, BucketWindow: 4}
	l := flipLoader(t, []*zrecord.Store{s}, o)
	seen := map[uint64]bool{}
	spread := 0
	ref := map[uint64]string{}
	for step := 0; step < n/4; step++ {
		b, err := l.Next()
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := uint32(1<<31), uint32(0)
		for _, i := range b.Indices {
			if seen[i] {
				t.Fatalf("record %d twice in a cycle", i)
			}
			seen[i] = true
			if lengths[i] < lo {
				lo = lengths[i]
			}
			if lengths[i] > hi {
				hi = lengths[i]
			}
		}
		spread += int(hi - lo)
		ref[b.Step] = fmt.Sprint(b.Indices)
	}
	if spread/(n/4) >= 25 {
		t.Fatalf("mean spread %d: not bucketed", spread/(n/4))
	}
	o.StartStep = 5
	r := flipLoader(t, []*zrecord.Store{s}, o)
	st, err := r.State()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.BucketLengths) != n || st.BucketWindow != 4 {
		t.Fatalf("state: %d lengths, window %d", len(st.BucketLengths), st.BucketWindow)
	}
	again := flipLoader(t, []*zrecord.Store{s}, st)
	if b, _ := again.Next(); fmt.Sprint(b.Indices) != ref[5] {
		t.Fatalf("resumed step 5: %v, want %s", b.Indices, ref[5])
	}
	if _, err := zrecord.NewLoader([]*zrecord.Store{s}, zrecord.LoaderOptions{BatchSize: 4, BucketLengths: []uint32{1, 2}}); !errors.Is(err, zrecord.ErrInvalid) {
		t.Fatalf("2 lengths for 64 records: %v", err)
	}
	if _, err := zrecord.NewLoader([]*zrecord.Store{s}, zrecord.LoaderOptions{BatchSize: 4, BucketWindow: 4}); !errors.Is(err, zrecord.ErrInvalid) {
		t.Fatalf("a window without lengths: %v", err)
	}
}

func TestPad(t *testing.T) {
	i16 := func(v ...int16) []byte {
		b := make([]byte, 2*len(v))
		for k, x := range v {
			binary.LittleEndian.PutUint16(b[2*k:], uint16(x))
		}
		return b
	}
	recs := []zrecord.Record{
		{Shape: []uint64{2, 2}, Data: i16(1, 2, 3, 4)},
		{Shape: []uint64{0, 2}, Data: nil},
		{Shape: []uint64{3, 2}, Data: i16(5, 6, 7, 8, 9, 10)},
	}
	out, lens, err := zrecord.Pad(recs, "int16", -1, i16(-1, -1))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, i16(1, 2, 3, 4, -1, -1, -1, -1, -1, -1, -1, -1, 5, 6, 7, 8, 9, 10)) || fmt.Sprint(lens) != "[2 0 3]" {
		t.Fatalf("pad: %v %v", out, lens)
	}
	cut, _, err := zrecord.Pad(recs, "int16", 1, nil)
	if err != nil || !bytes.Equal(cut, i16(1, 2, 0, 0, 5, 6)) {
		t.Fatalf("cut to 1: %v %v", cut, err)
	}
	bad := []zrecord.Record{recs[0], {Shape: []uint64{1, 3}, Data: make([]byte, 6)}}
	if _, _, err := zrecord.Pad(bad, "int16", -1, nil); !errors.Is(err, zrecord.ErrInvalid) || !strings.Contains(err.Error(), "record 1") {
		t.Fatalf("another trailing shape: %v", err)
	}
	if _, _, err := zrecord.Pad(recs, "int16", -1, []byte{1}); !errors.Is(err, zrecord.ErrInvalid) {
		t.Fatalf("a 1-byte pad value: %v", err)
	}
	if _, _, err := zrecord.Pad(nil, "int16", -1, nil); !errors.Is(err, zrecord.ErrInvalid) {
		t.Fatalf("no records: %v", err)
	}
}

// ---------------------------------------------------------------- packing

const packL, packND = 40, 150

func packDocLen(d int) int {
	r := (d * 2654435761) % 1000
	if d == 7 {
		return 0
	}
	if r%9 == 0 {
		return 45 + r%90
	}
	return 1 + r%30
}

func packToken(d, j int) int32 { return int32(d*4096 + j) }

func packCorpus(t *testing.T) (tokens, mask *zrecord.Store) {
	t.Helper()
	var err error
	if tokens, err = zrecord.CreateRagged(tmp(t, "tokens"), "int32", "zstd"); err != nil {
		t.Fatal(err)
	}
	if mask, err = zrecord.CreateRagged(tmp(t, "mask"), "uint8", "raw"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tokens.Close(); mask.Close() })
	var tr, mr [][]byte
	for d := 0; d < packND; d++ {
		n := packDocLen(d)
		tb, mb := make([]byte, 4*n), make([]byte, n)
		for j := 0; j < n; j++ {
			binary.LittleEndian.PutUint32(tb[4*j:], uint32(packToken(d, j)))
			mb[j] = byte((d + j) % 251)
		}
		tr, mr = append(tr, tb), append(mr, mb)
	}
	if _, err := tokens.Append(tr...); err != nil {
		t.Fatal(err)
	}
	if _, err := mask.Append(mr...); err != nil {
		t.Fatal(err)
	}
	return tokens, mask
}

func packPlaced(n int, overlong string) int {
	if n <= packL || overlong == "split" {
		return n
	}
	if overlong == "truncate" {
		return packL
	}
	return 0
}

// checkPack runs the acceptance checks on one packed batch (streams
// tokens, then mask if withMask); adds to covered what each document got
// and returns the batch's rows.
func checkPack(t *testing.T, b *zrecord.Batch, covered map[int]int, policy, overlong string, withMask bool) int {
	t.Helper()
	p := b.Pack
	rows := int(p.Rows)
	tok := b.Data[0]
	if len(tok) != rows*packL*4 || len(p.SegmentIDs) != rows*packL || len(p.Positions) != rows*packL ||
		len(p.SeqLens) != rows*int(p.MaxSegments) || len(p.CuSeqlens) != int(p.Segments)+1 || len(b.Indices) != int(p.Segments) {
		t.Fatalf("step %d: layout sizes", b.Step)
	}
	tokAt := func(e int) int32 { return int32(binary.LittleEndian.Uint32(tok[4*e:])) }
	if p.CuSeqlens[0] != 0 {
		t.Fatal("cu_seqlens[0] != 0")
	}
	segNo, tokens := 0, 0
	for r := 0; r < rows; r++ {
		start := 0
		for k := 0; k < int(p.MaxSegments); k++ {
			n := int(p.SeqLens[r*int(p.MaxSegments)+k])
			if n == 0 {
				break
			}
			segNo++
			first := int(tokAt(r*packL + start))
			d, off := first/4096, first%4096
			if uint64(d) != b.Indices[segNo-1] {
				t.Fatalf("segment %d: document %d, indices say %d", segNo, d, b.Indices[segNo-1])
			}
			for j := 0; j < n; j++ {
				e := r*packL + start + j
				if p.SegmentIDs[e] != int32(k+1) || p.Positions[e] != int32(j) || tokAt(e) != packToken(d, off+j) {
					t.Fatalf("step %d row %d element %d: segment %d position %d token %d", b.Step, r, start+j, p.SegmentIDs[e], p.Positions[e], tokAt(e))
				}
				if withMask && b.Data[1][e] != byte((d+off+j)%251) {
					t.Fatalf("mask not aligned at row %d element %d", r, start+j)
				}
			}
			if policy == "concat" && off != covered[d] {
				t.Fatalf("concat: document %d continues at %d, want %d", d, off, covered[d])
			}
			if policy != "concat" && n < packL && off != packPlaced(packDocLen(d), overlong)/packL*packL {
				t.Fatalf("document %d: a short piece at offset %d", d, off)
			}
			covered[d] += n
			start += n
			tokens += n
			if int(p.CuSeqlens[segNo]) != tokens {
				t.Fatalf("cu_seqlens[%d] = %d, want %d", segNo, p.CuSeqlens[segNo], tokens)
			}
		}
		for e := start; e < packL; e++ {
			if p.SegmentIDs[r*packL+e] != 0 || tokAt(r*packL+e) != 0 {
				t.Fatalf("row %d element %d: padding not 0", r, e)
			}
		}
	}
	if segNo != int(p.Segments) || tokens != int(p.Tokens) {
		t.Fatalf("segments %d (info %d), tokens %d (info %d)", segNo, p.Segments, tokens, p.Tokens)
	}
	return rows
}

func TestPackOnePassEveryPolicy(t *testing.T) {
	tokens, mask := packCorpus(t)
	for _, policy := range []string{"first_fit", "best_fit", "concat"} {
		for _, overlong := range []string{"split", "truncate", "drop"} {
			l := passLoader(t, []*zrecord.Store{tokens, mask}, zrecord.LoaderOptions{
				BatchSize: 4, Shuffle: true, Seed: 3, Epoch: 1, Pack: true, PackLength: packL,
				PackPolicy: policy, PackWindow: 32, PackOverlong: overlong, NumWorkers: 2})
			covered := map[int]int{}
			rows, steps := 0, uint64(0)
			eachBatch(t, l, func(b *zrecord.Batch) {
				rows += checkPack(t, b, covered, policy, overlong, true)
				steps++
			})
			if n, _ := l.Steps(); n != steps {
				t.Fatalf("Steps %d, ran %d", n, steps)
			}
			total := 0
			for d := 0; d < packND; d++ {
				want := packPlaced(packDocLen(d), overlong)
				if covered[d] != want {
					t.Fatalf("%s/%s: document %d placed %d elements, want %d", policy, overlong, d, covered[d], want)
				}
				total += want
			}
			if policy == "concat" && rows != (total+packL-1)/packL {
				t.Fatalf("concat: %d rows for %d elements", rows, total)
			}
		}
	}
}

func packKey(b *zrecord.Batch) string {
	return fmt.Sprint(b.Data, b.Pack.SegmentIDs, b.Pack.Positions, b.Pack.SeqLens, b.Pack.CuSeqlens, b.Indices)
}

func TestPackWorkersSeekAndState(t *testing.T) {
	tokens, mask := packCorpus(t)
	streams := []*zrecord.Store{tokens, mask}
	o := zrecord.LoaderOptions{BatchSize: 6, Pack: true, PackLength: packL, PackPolicy: "best_fit", PackWindow: 24, Seed: 9, NumWorkers: 1}
	a := flipLoader(t, streams, o)
	ref := map[uint64]string{}
	for s := 0; s < 20; s++ {
		b, err := a.Next()
		if err != nil {
			t.Fatal(err)
		}
		ref[b.Step] = packKey(b)
	}
	o.NumWorkers = 3
	w := flipLoader(t, streams, o)
	for s := uint64(0); s < 20; s++ {
		if b, _ := w.Next(); packKey(b) != ref[s] {
			t.Fatalf("3 workers: step %d differs", s)
		}
	}
	o.NumWorkers, o.StartStep = 2, 11
	c := flipLoader(t, streams, o)
	for s := uint64(11); s < 15; s++ {
		if b, _ := c.Next(); packKey(b) != ref[s] {
			t.Fatalf("seek: step %d differs", s)
		}
	}
	st, err := c.State()
	if err != nil {
		t.Fatal(err)
	}
	if !st.Pack || st.PackLength != packL || st.PackPolicy != "best_fit" || st.PackWindow != 24 || st.PackOverlong != "split" || st.StartStep != 15 {
		t.Fatalf("state: %+v", st)
	}
	d := flipLoader(t, streams, st)
	for s := uint64(15); s < 20; s++ {
		if b, _ := d.Next(); packKey(b) != ref[s] {
			t.Fatalf("resumed: step %d differs", s)
		}
	}
}

func TestPackRanksAndRefusals(t *testing.T) {
	tokens, _ := packCorpus(t)
	one := []*zrecord.Store{tokens}
	const B, W = 2, 3
	g := flipLoader(t, one, zrecord.LoaderOptions{BatchSize: B * W, Pack: true, PackLength: packL, Seed: 4})
	var ranks []*zrecord.Loader
	for r := uint32(0); r < W; r++ {
		ranks = append(ranks, flipLoader(t, one, zrecord.LoaderOptions{BatchSize: B, Rank: r, WorldSize: W, Pack: true, PackLength: packL, Seed: 4}))
	}
	for step := 0; step < 6; step++ {
		glob, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		var parts []byte
		for _, r := range ranks {
			b, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, b.Data[0]...)
		}
		if !bytes.Equal(parts, glob.Data[0]) {
			t.Fatalf("step %d: the ranks' rows are not the global batch", step)
		}
	}
	for _, c := range []struct {
		o    zrecord.LoaderOptions
		want string
	}{
		{zrecord.LoaderOptions{BatchSize: 2, Pack: true}, "pack_length"},
		{zrecord.LoaderOptions{BatchSize: 2, Pack: true, PackLength: packL, PackPolicy: "worst_fit"}, "unknown pack_policy 'worst_fit'"},
		{zrecord.LoaderOptions{BatchSize: 2, Pack: true, PackLength: packL, PackOverlong: "fold"}, "unknown pack_overlong 'fold'"},
		{zrecord.LoaderOptions{BatchSize: 2, PackLength: packL}, "apply only with Pack"},
	} {
		_, err := zrecord.NewLoader(one, c.o)
		if !errors.Is(err, zrecord.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%+v: %v, want ErrInvalid containing %q", c.o, err, c.want)
		}
	}
	lbl, err := zrecord.CreateDense(tmp(t, "lbl"), "int64", nil, "raw")
	if err != nil {
		t.Fatal(err)
	}
	defer lbl.Close()
	if _, err := lbl.Append(make([]byte, 8*packND)); err != nil {
		t.Fatal(err)
	}
	if _, err := zrecord.NewLoader([]*zrecord.Store{tokens, lbl}, zrecord.LoaderOptions{BatchSize: 2, Pack: true, PackLength: packL}); !errors.Is(err, zrecord.ErrInvalid) || !strings.Contains(err.Error(), "dense") {
		t.Fatalf("a dense stream in pack mode: %v", err)
	}
}
