package zrecord_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"loaderx.invalid/zrecord"
)

// Many stores as one dataset: concatenated shards, loaders over them,
// weighted mixtures (the Python suite's test_shards.py cases).

var shardLens = []int{30, 1, 0, 57, 12} // one empty shard on purpose

// shardImage is record i of the whole dataset: a (3, 4) float32 array
// encoding i.
func shardImage(i int) []byte {
	b := make([]byte, 48)
	for k := 0; k < 12; k++ {
		binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(float32(k)+100*float32(i)))
	}
	return b
}

func shardTokens(i int) zrecord.Record {
	n := i%5 + 1
	b := make([]byte, 4*n)
	for k := 0; k < n; k++ {
		binary.LittleEndian.PutUint32(b[4*k:], uint32(k+10*i))
	}
	return zrecord.Record{Shape: []uint64{uint64(n)}, Data: b}
}

type shardSet struct {
	xs, ys     []string // shard paths
	allX, allY string   // the same records as one store
	n          int
}

// writeShards writes the dataset (records base+0, base+1, ...) as
// len(lens) shards and as one store.
func writeShards(t *testing.T, lens []int, base int) shardSet {
	t.Helper()
	dir := t.TempDir()
	var ds shardSet
	write := func(name string, a, b int) (string, string) {
		codec := "zstd"
		if len(ds.xs)%2 == 1 {
			codec = "raw"
		}
		px, py := filepath.Join(dir, "x-"+name), filepath.Join(dir, "y-"+name)
		x, err := zrecord.CreateDense(px, "<f4", []uint64{3, 4}, codec)
		if err != nil {
			t.Fatal(err)
		}
		y, err := zrecord.CreateRagged(py, "<i4", "zstd")
		if err != nil {
			t.Fatal(err)
		}
		for i := a; i < b; i++ {
			if _, err := x.Append(shardImage(base + i)); err != nil {
				t.Fatal(err)
			}
			if _, err := y.AppendRecords(shardTokens(base + i)); err != nil {
				t.Fatal(err)
			}
		}
		x.Close()
		y.Close()
		return px, py
	}
	start := 0
	for k, n := range lens {
		px, py := write(fmt.Sprintf("%02d", k), start, start+n)
		ds.xs, ds.ys = append(ds.xs, px), append(ds.ys, py)
		start += n
	}
	ds.allX, ds.allY = write("all", 0, start)
	ds.n = start
	return ds
}

func openConcat(t *testing.T, paths []string) *zrecord.Concat {
	t.Helper()
	c, err := zrecord.OpenConcat(paths)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func wantErr(t *testing.T, err error, target error, words ...string) {
	t.Helper()
	if err == nil || (target != nil && !errors.Is(err, target)) {
		t.Fatalf("want %v, got %v", target, err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not say %q", err, w)
		}
	}
}

func TestConcatReadsLikeOneStore(t *testing.T) {
	ds := writeShards(t, shardLens, 0)
	x, y := openConcat(t, ds.xs), openConcat(t, ds.ys)
	if x.Len() != 100 || y.Len() != 100 || ds.n != 100 {
		t.Fatalf("lengths %d %d %d", x.Len(), y.Len(), ds.n)
	}
	if x.Dtype() != "<f4" || x.Kind() != zrecord.Dense || fmt.Sprint(x.ItemShape()) != "[3 4]" || x.RecordSize() != 48 {
		t.Fatalf("identity %s %v %v %d", x.Dtype(), x.Kind(), x.ItemShape(), x.RecordSize())
	}
	if y.Kind() != zrecord.Ragged || y.ItemShape() != nil && len(y.ItemShape()) != 0 {
		t.Fatalf("y: %v %v", y.Kind(), y.ItemShape())
	}
	if off, _ := x.Offsets(); fmt.Sprint(off) != "[0 30 31 31 88 100]" {
		t.Fatalf("offsets %v", off)
	}
	if p, _ := x.Paths(); x.NumShards() != 5 || p[3] != ds.xs[3] {
		t.Fatalf("shards %d %v", x.NumShards(), p)
	}
	for i := 0; i < ds.n; i++ {
		r, err := x.Get(int64(i))
		if err != nil || !bytes.Equal(r, shardImage(i)) {
			t.Fatalf("record %d: %v", i, err)
		}
		rr, err := y.GatherRecords([]int64{int64(i)})
		if err != nil || !bytes.Equal(rr[0].Data, shardTokens(i).Data) || rr[0].Shape[0] != uint64(i%5+1) {
			t.Fatalf("ragged record %d: %v", i, err)
		}
	}
	if r, _ := x.Get(-1); !bytes.Equal(r, shardImage(ds.n-1)) {
		t.Fatal("negative index does not wrap")
	}
	dst := make([]byte, 4*48)
	if err := x.Gather([]int64{5, 99, 30, 31}, dst); err != nil ||
		!bytes.Equal(dst, bytes.Join([][]byte{shardImage(5), shardImage(99), shardImage(30), shardImage(31)}, nil)) {
		t.Fatalf("gather: %v", err)
	}
	_, err := x.Get(int64(ds.n))
	wantErr(t, err, zrecord.ErrRange)
	_, err = x.Get(int64(-ds.n - 1))
	wantErr(t, err, zrecord.ErrRange)
	_, err = y.GatherRecords([]int64{int64(ds.n)})
	wantErr(t, err, zrecord.ErrRange)
}

func TestConcatOfOpenStoresIsBorrowed(t *testing.T) {
	ds := writeShards(t, []int{4, 5}, 0)
	a, err := zrecord.OpenReadOnly(ds.xs[0])
	if err != nil {
		t.Fatal(err)
	}
	b, _ := zrecord.OpenReadOnly(ds.xs[1])
	c, err := zrecord.NewConcat([]*zrecord.Store{a, b})
	if err != nil {
		t.Fatal(err)
	}
	l, err := zrecord.NewLoaderOf([]zrecord.Source{c}, zrecord.LoaderOptions{BatchSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Next(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	_, err = l.Next()
	wantErr(t, err, zrecord.ErrClosed)
	if a.Len() != 4 || b.Len() != 5 {
		t.Fatal("borrowed stores must stay open")
	}
	c, _ = zrecord.NewConcat([]*zrecord.Store{a, b})
	l, _ = zrecord.NewLoaderOf([]zrecord.Source{c}, zrecord.LoaderOptions{BatchSize: 3})
	b.Close() // a borrowed shard going away closes the concatenation and its loader
	_, err = l.Next()
	wantErr(t, err, zrecord.ErrClosed)
	_, err = c.Get(0)
	wantErr(t, err, zrecord.ErrClosed)
	if a.Len() != 4 {
		t.Fatal("the other shard must stay open")
	}
	a.Close()
}

func TestConcatIdentityMismatchNamesBothShards(t *testing.T) {
	dir := t.TempDir()
	s0, s1, t1, u1 := filepath.Join(dir, "s-0"), filepath.Join(dir, "s-1"), filepath.Join(dir, "t-1"), filepath.Join(dir, "u-1")
	for _, c := range []struct {
		p     string
		dt    string
		shape []uint64
	}{{s0, "<f4", []uint64{3, 4}}, {s1, "<f4", []uint64{3, 5}}, {t1, "<i4", []uint64{3, 4}}} {
		s, err := zrecord.CreateDense(c.p, c.dt, c.shape, "zstd")
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	r, _ := zrecord.CreateRagged(u1, "<f4", "zstd")
	r.Close()
	_, err := zrecord.OpenConcat([]string{s0, s1})
	wantErr(t, err, zrecord.ErrInvalid, "item_shape", s0, s1, "(3, 5)")
	_, err = zrecord.OpenConcat([]string{s0, t1})
	wantErr(t, err, zrecord.ErrInvalid, "dtype", "<i4")
	_, err = zrecord.OpenConcat([]string{s0, u1})
	wantErr(t, err, zrecord.ErrInvalid, "kind")
	_, err = zrecord.OpenConcat(nil)
	wantErr(t, err, zrecord.ErrInvalid, "no shards")
	_, err = zrecord.OpenConcat([]string{s0, filepath.Join(dir, "nothing")})
	wantErr(t, err, zrecord.ErrNotStore, "nothing")
	// nothing was left open: a writer can take every shard
	for _, p := range []string{s0, s1} {
		s, err := zrecord.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
}

func TestLoaderOverShardsEqualsLoaderOverOneStore(t *testing.T) {
	ds := writeShards(t, shardLens, 0)
	x, y := openConcat(t, ds.xs), openConcat(t, ds.ys)
	ax, err := zrecord.OpenReadOnly(ds.allX)
	if err != nil {
		t.Fatal(err)
	}
	defer ax.Close()
	ay, _ := zrecord.OpenReadOnly(ds.allY)
	defer ay.Close()
	for _, mode := range []zrecord.Mode{zrecord.Cyclic, zrecord.IID, zrecord.Sequential} {
		o := zrecord.LoaderOptions{BatchSize: 16, Mode: mode, UseMode: true, Seed: 4, NumWorkers: 1}
		one, err := zrecord.NewLoaderOf([]zrecord.Source{ax, ay}, o)
		if err != nil {
			t.Fatal(err)
		}
		o.NumWorkers = 3
		many, err := zrecord.NewLoaderOf([]zrecord.Source{x, y}, o)
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 20; k++ {
			a, _ := one.Next()
			b, err := many.Next()
			if err != nil || !bytes.Equal(a.Data[0], b.Data[0]) || !bytes.Equal(a.Data[1], b.Data[1]) ||
				fmt.Sprint(a.Indices) != fmt.Sprint(b.Indices) {
				t.Fatalf("%v step %d differs: %v", mode, k, err)
			}
		}
		st, _ := many.State()
		many.Close()
		res, err := zrecord.NewLoaderOf([]zrecord.Source{x, y}, st)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := res.Next()
		b, _ := one.Next()
		if !bytes.Equal(a.Data[0], b.Data[0]) {
			t.Fatalf("%v: resumed batch differs", mode)
		}
		res.Close()
		one.Close()
	}
	// a concatenation and a plain store side by side (same total length)
	l, err := zrecord.NewLoaderOf([]zrecord.Source{x, ay}, zrecord.LoaderOptions{BatchSize: 8, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := l.Next()
	for k, i := range b.Indices {
		if !bytes.Equal(b.Data[0][48*k:48*k+48], shardImage(int(i))) || !bytes.Equal(b.Records[1][k].Data, shardTokens(int(i)).Data) {
			t.Fatalf("record %d of the mixed loader", i)
		}
	}
	l.Close()
	// flips reach a concatenation's records as a store's
	f, err := zrecord.NewLoaderOf([]zrecord.Source{x}, zrecord.LoaderOptions{BatchSize: 4, Seed: 2, Flip: map[int]float64{0: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fb, _ := f.Next()
	src := shardImage(int(fb.Indices[0]))
	want := make([]byte, 0, 48)
	for row := 0; row < 3; row++ {
		for col := 3; col >= 0; col-- {
			want = append(want, src[16*row+4*col:16*row+4*col+4]...)
		}
	}
	if !bytes.Equal(fb.Data[0][:48], want) {
		t.Fatal("a flipped record of a concatenation")
	}
}

func TestConcatenatedStreamsMustBeShardedAlike(t *testing.T) {
	ds := writeShards(t, []int{10, 20}, 0)
	zs := writeShards(t, []int{20, 10}, 0)
	x, z := openConcat(t, ds.xs), openConcat(t, zs.xs)
	if x.Len() != 30 || z.Len() != 30 {
		t.Fatal("lengths")
	}
	_, err := zrecord.NewLoaderOf([]zrecord.Source{x, z}, zrecord.LoaderOptions{BatchSize: 4})
	wantErr(t, err, zrecord.ErrInvalid, "shard 0")
}

// mixtureSources: "big" (300 records in 3 shards, images 0..299) and
// "small" (40 records, images 10000..10039), streams x and y.
func mixtureSources(t *testing.T) (big, small []*zrecord.Concat) {
	b := writeShards(t, []int{100, 120, 80}, 0)
	s := writeShards(t, []int{40}, 10000)
	return []*zrecord.Concat{openConcat(t, b.xs), openConcat(t, b.ys)},
		[]*zrecord.Concat{openConcat(t, s.xs), openConcat(t, s.ys)}
}

func TestMixtureRecordsAndShares(t *testing.T) {
	big, small := mixtureSources(t)
	w := map[string]float64{"big": 0.7, "small": 0.3}
	m, err := zrecord.NewMixture([]zrecord.MixtureSource{
		{Name: "big", Weight: 0.7, Streams: big},
		{Name: "small", Weight: 0.3, Mode: "iid", Streams: small},
	})
	if err != nil {
		t.Fatal(err)
	}
	if ln := m.Lengths(); ln["big"] != 300 || ln["small"] != 40 {
		t.Fatalf("lengths %v", ln)
	}
	l, err := zrecord.NewMixtureLoader(m, zrecord.LoaderOptions{BatchSize: 32, Seed: 11, NumWorkers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	counts := map[string]float64{}
	const nbatches = 300
	for s := 0; s < nbatches; s++ {
		b, err := l.Next()
		if err != nil {
			t.Fatal(err)
		}
		src, idx, err := m.Locate(l, b.Indices)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[uint64]bool{}
		for k := 0; k < 32; k++ {
			g := int(idx[k])
			if src[k] == "small" {
				g += 10000
			}
			if !bytes.Equal(b.Data[0][48*k:48*k+48], shardImage(g)) || !bytes.Equal(b.Records[1][k].Data, shardTokens(g).Data) {
				t.Fatalf("step %d record %d (%s %d)", s, k, src[k], idx[k])
			}
			counts[src[k]]++
			if src[k] == "big" {
				if seen[idx[k]] {
					t.Fatal("the cyclic source repeated a record within a batch")
				}
				seen[idx[k]] = true
			}
		}
	}
	// Pearson chi-square, 1 degree of freedom, 9600 draws: P(X > 15.1) =
	// 1e-4 for a correct sampler; the seed is fixed, so the outcome is too.
	n := float64(nbatches * 32)
	chi, wrong := 0.0, 0.0
	for s, p := range w {
		chi += math.Pow(counts[s]-n*p, 2) / (n * p)
	}
	for s, p := range map[string]float64{"big": 0.6, "small": 0.4} {
		wrong += math.Pow(counts[s]-n*p, 2) / (n * p)
	}
	if chi >= 15.1 || wrong <= 15.1 {
		t.Fatalf("chi-square %v (want < 15.1), with wrong weights %v (want > 15.1): %v", chi, wrong, counts)
	}
}

func TestMixtureIsPureInSeedStepRank(t *testing.T) {
	big, small := mixtureSources(t)
	m, err := zrecord.NewMixture([]zrecord.MixtureSource{
		{Name: "0", Weight: 1, Mode: "cyclic", Streams: big},
		{Name: "1", Weight: 1, Mode: "iid", Streams: small},
	})
	if err != nil {
		t.Fatal(err)
	}
	next := func(l *zrecord.Loader) []byte {
		b, err := l.Next()
		if err != nil {
			t.Fatal(err)
		}
		return b.Data[0]
	}
	ref, err := zrecord.NewMixtureLoader(m, zrecord.LoaderOptions{BatchSize: 8, Seed: 5, NumWorkers: 1})
	if err != nil {
		t.Fatal(err)
	}
	var batches [][]byte
	for k := 0; k < 12; k++ {
		batches = append(batches, next(ref))
	}
	st, _ := ref.State()
	following := next(ref)
	ref.Close()
	if st.StartStep != 12 || st.Seed != 5 || st.Mode != zrecord.Cyclic {
		t.Fatalf("state %+v", st)
	}
	st.NumWorkers = 3
	res, err := zrecord.NewMixtureLoader(m, st)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(next(res), following) {
		t.Fatal("resumed from state: another batch")
	}
	res.Close()
	many, _ := zrecord.NewMixtureLoader(m, zrecord.LoaderOptions{BatchSize: 8, Seed: 5, NumWorkers: 4, Prefetch: 7, StartStep: 3})
	for k := 3; k < 12; k++ {
		if !bytes.Equal(next(many), batches[k]) {
			t.Fatalf("step %d differs with 4 workers from step 3", k)
		}
	}
	many.Close()
	r0, _ := zrecord.NewMixtureLoader(m, zrecord.LoaderOptions{BatchSize: 4, Seed: 5, Rank: 0, WorldSize: 2})
	r1, _ := zrecord.NewMixtureLoader(m, zrecord.LoaderOptions{BatchSize: 4, Seed: 5, Rank: 1, WorldSize: 2})
	for k := 0; k < 12; k++ {
		if !bytes.Equal(append(next(r0), next(r1)...), batches[k]) {
			t.Fatalf("ranks of step %d differ from the batch of 8", k)
		}
	}
	r0.Close()
	r1.Close()
	other, _ := zrecord.NewMixtureLoader(m, zrecord.LoaderOptions{BatchSize: 8, Seed: 6})
	if bytes.Equal(next(other), batches[0]) {
		t.Fatal("another seed gave the same batch")
	}
	other.Close()
	// sources without a mode of their own take the loader's, on resume too
	d, _ := zrecord.NewMixture([]zrecord.MixtureSource{{Name: "0", Weight: 1, Streams: big}, {Name: "1", Weight: 1, Streams: small}})
	a, err := zrecord.NewMixtureLoader(d, zrecord.LoaderOptions{BatchSize: 8, Seed: 5, Mode: zrecord.IID, UseMode: true})
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 3; k++ {
		next(a)
	}
	st, _ = a.State()
	want := next(a)
	a.Close()
	if st.Mode != zrecord.IID {
		t.Fatalf("state mode %v, want iid", st.Mode)
	}
	r, err := zrecord.NewMixtureLoader(d, st)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !bytes.Equal(next(r), want) {
		t.Fatal("a mixture of the loader's mode resumed from state: another batch")
	}
}

func TestMixtureErrors(t *testing.T) {
	big, small := mixtureSources(t)
	_, err := zrecord.NewMixture([]zrecord.MixtureSource{{Name: "a", Weight: 1, Streams: big}, {Name: "b", Weight: 1, Streams: small[:1]}})
	wrong := err
	wantErr(t, wrong, zrecord.ErrInvalid, "same streams")
	_, err = zrecord.NewMixture([]zrecord.MixtureSource{{Name: "a", Weight: 1, Streams: big}, {Name: "b", Weight: 0, Streams: small}})
	wantErr(t, err, zrecord.ErrInvalid, "finite number > 0")
	_, err = zrecord.NewMixture([]zrecord.MixtureSource{{Name: "a", Weight: math.Inf(1), Streams: big}})
	wantErr(t, err, zrecord.ErrInvalid, "finite number > 0")
	m, _ := zrecord.NewMixture([]zrecord.MixtureSource{{Name: "a", Weight: 1, Streams: big}, {Name: "b", Weight: 1, Streams: small}})
	_, err = zrecord.NewMixtureLoader(m, zrecord.LoaderOptions{BatchSize: 64}) // small is cyclic by default
	wantErr(t, err, zrecord.ErrInvalid, "iid")
	swapped := []*zrecord.Concat{small[1], small[0]} // kinds swapped against the first source
	m, _ = zrecord.NewMixture([]zrecord.MixtureSource{{Name: "a", Weight: 1, Mode: "iid", Streams: big}, {Name: "b", Weight: 1, Mode: "iid", Streams: swapped}})
	_, err = zrecord.NewMixtureLoader(m, zrecord.LoaderOptions{BatchSize: 4})
	wantErr(t, err, zrecord.ErrInvalid, "identity in every source")
	m, _ = zrecord.NewMixture([]zrecord.MixtureSource{{Name: "a", Weight: 1, Mode: "often", Streams: big}})
	_, err = zrecord.NewMixtureLoader(m, zrecord.LoaderOptions{BatchSize: 4})
	wantErr(t, err, zrecord.ErrInvalid, "unknown sampler mode")
}

func TestClosingASourceClosesTheMixtureLoader(t *testing.T) {
	big, small := mixtureSources(t)
	m, _ := zrecord.NewMixture([]zrecord.MixtureSource{{Name: "a", Weight: 2, Streams: big}, {Name: "b", Weight: 1, Streams: small}})
	l, err := zrecord.NewMixtureLoader(m, zrecord.LoaderOptions{BatchSize: 4, Mode: zrecord.IID, UseMode: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Next(); err != nil {
		t.Fatal(err)
	}
	small[0].Close() // a stream of the second source
	_, err = l.Next()
	wantErr(t, err, zrecord.ErrClosed)
	_, _, err = m.Locate(l, []uint64{0})
	wantErr(t, err, zrecord.ErrClosed)
}
