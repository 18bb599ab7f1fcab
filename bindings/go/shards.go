package zrecord

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"loaderx.invalid/zrecord/internal/zrcore"
)

// Source is a stream a Loader reads: a *Store or a *Concat.
type Source interface {
	source() streamSource
}

// streamSource is what newLoader needs of a stream: its handle added to
// the C list (and a store of its identity, for flips) under its read
// lock; the C loader borrows what it reads.
type streamSource interface {
	acquire(what string, set zrcore.Struct_SS_zr_bind_set) (zrcore.Struct_SS_zrs_store, Kind, error)
	release()
}

type storeSource struct{ s *Store }

func (s *Store) source() streamSource { return storeSource{s} }

func (ss storeSource) acquire(what string, set zrcore.Struct_SS_zr_bind_set) (zrcore.Struct_SS_zrs_store, Kind, error) {
	h, err := ss.s.acquire(what)
	if err != nil {
		return nil, 0, err
	}
	zrcore.Zr_bind_set_add_store(set, h)
	return h, ss.s.kind, nil
}

func (ss storeSource) release() { ss.s.release() }

// ---------------------------------------------------------------- Concat

// Concat is shards of one identity (the same dtype and item shape, or
// the same ragged dtype; codecs may differ) read as one store: Len is the
// sum, index i is located by prefix sums, and a gather is one native call
// whose records land straight in the result, threaded like one store's.
// A Loader takes it anywhere it takes a store (NewLoaderOf).
//
// Like Store, the user-facing Concat carries the finalizer and the C
// handle lives in the inner concatHandle.
type Concat struct {
	in       *concatHandle
	kind     Kind
	dtype    string
	path     string
	recsize  uint64
	shape    []uint64
	nshards  int
	borrowed []*Store // kept reachable while the Concat is
}

type concatHandle struct {
	mu   sync.RWMutex // read: any call; write: close
	h    zrcore.Struct_SS_zrs_concat
	path string
}

// OpenConcat opens the stores at paths as readers and concatenates them,
// in order. A path may be a URL (http://, https://, s3://bucket/prefix);
// one URL holding a shard set (PushShards) opens every shard it lists.
// Nothing stays open on failure; the error names the failing path, or
// both shards and what differs for an identity mismatch (ErrInvalid).
func OpenConcat(paths []string) (*Concat, error) {
	return openConcat("zrecord.OpenConcat", paths, uint(zrcore.ZRE_OPEN_READONLY))
}

func openConcat(op string, paths []string, flags uint) (*Concat, error) {
	if len(paths) == 0 {
		return nil, opErrorf(op, StatusInvalid, "no shards (expected at least one path)")
	}
	set := zrcore.Zr_bind_set_new()
	defer zrcore.Zr_bind_set_free(set)
	for _, p := range paths {
		p := p
		if err := callAs(op, func() int { return zrcore.Zr_bind_set_add_path(set, p) }); err != nil {
			return nil, err
		}
	}
	out := []uintptr{0}
	if err := callAs(op, func() int { return zrcore.Zr_bind_concat_open(out, set, flags) }); err != nil {
		return nil, err
	}
	return wrapConcat(out[0], nil), nil
}

// NewConcat concatenates open stores (borrowed: they stay yours; closing
// one closes the Concat, and the loaders reading it fail with ErrClosed).
func NewConcat(stores []*Store) (*Concat, error) {
	const op = "zrecord.NewConcat"
	if len(stores) == 0 {
		return nil, opErrorf(op, StatusInvalid, "no shards (expected at least one store)")
	}
	set := zrcore.Zr_bind_set_new()
	defer zrcore.Zr_bind_set_free(set)
	for i, s := range stores {
		if s == nil {
			return nil, opErrorf(op, StatusInvalid, "shard %d of %d is nil (expected an open *Store)", i, len(stores))
		}
		h, err := s.acquire(fmt.Sprintf("concat: shard %d", i))
		if err != nil {
			for _, p := range stores[:i] {
				p.release()
			}
			return nil, err
		}
		zrcore.Zr_bind_set_add_store(set, h)
	}
	out := []uintptr{0}
	err := callAs(op, func() int { return zrcore.Zr_bind_concat_create(out, set) })
	for _, s := range stores {
		s.release()
	}
	if err != nil {
		return nil, err
	}
	return wrapConcat(out[0], stores), nil
}

func wrapConcat(ptr uintptr, borrowed []*Store) *Concat {
	h := zrcore.SwigcptrStruct_SS_zrs_concat(ptr)
	c := &Concat{in: &concatHandle{h: h}}
	c.kind = Kind(zrcore.Zrs_concat_kind(h))
	c.dtype = zrcore.Zrs_dtype_str(zrcore.Zrs_concat_dtype(h))
	c.path = zrcore.Zrs_path(zrcore.Zrs_concat_shard(h, 0))
	c.in.path = c.path
	c.nshards = int(zrcore.Zrs_concat_count(h))
	if c.kind == Dense {
		nd := int(zrcore.Zrs_concat_item_ndim(h))
		c.shape = make([]uint64, nd)
		for k := range c.shape {
			c.shape[k] = zrcore.Zr_bind_concat_dim(h, int64(k))
		}
		c.recsize = zrcore.Zrs_concat_record_size(h)
	}
	c.borrowed = append([]*Store(nil), borrowed...)
	runtime.SetFinalizer(c, func(c *Concat) { c.in.close() })
	return c
}

func (c *Concat) source() streamSource { return c }

func (c *Concat) acquire(what string, set zrcore.Struct_SS_zr_bind_set) (zrcore.Struct_SS_zrs_store, Kind, error) {
	h, err := c.in.acquire(what)
	if err != nil {
		return nil, 0, err
	}
	zrcore.Zr_bind_set_add_concat(set, h)
	return zrcore.Zrs_concat_shard(h, 0), c.kind, nil
}

func (c *Concat) release() { c.in.mu.RUnlock() }

// acquire takes the read lock and returns the handle, or ErrClosed once
// the concatenation or one of the stores it borrows was closed.
func (ch *concatHandle) acquire(op string) (zrcore.Struct_SS_zrs_concat, error) {
	ch.mu.RLock()
	if ch.h == nil || zrcore.Zrs_concat_is_closed(ch.h) != 0 {
		ch.mu.RUnlock()
		return nil, errorf(StatusClosed, "%s: concatenation %s is closed", op, ch.path)
	}
	return ch.h, nil
}

// close closes the concatenation (and the stores it opened); loaders
// still reading it keep the library's handle and fail with ErrClosed.
// Idempotent.
func (ch *concatHandle) close() error {
	ch.mu.Lock()
	h := ch.h
	ch.h = nil
	ch.mu.Unlock()
	if h == nil {
		return nil
	}
	return callAs("zrecord.Concat.Close", func() int { return zrcore.Zrs_concat_close(h) })
}

func (c *Concat) Kind() Kind          { return c.kind }
func (c *Concat) Dtype() string       { return c.dtype }
func (c *Concat) Path() string        { return c.path } // shard 0's
func (c *Concat) ItemShape() []uint64 { return append([]uint64(nil), c.shape...) }
func (c *Concat) RecordSize() int     { return int(c.recsize) }
func (c *Concat) NumShards() int      { return c.nshards }

// Len is the total number of records (0 once closed).
func (c *Concat) Len() int {
	h, err := c.in.acquire("len")
	if err != nil {
		return 0
	}
	defer c.release()
	return int(zrcore.Zrs_concat_length(h))
}

// Paths are the shards' paths (or URLs), in order.
func (c *Concat) Paths() ([]string, error) {
	h, err := c.in.acquire("paths")
	if err != nil {
		return nil, err
	}
	defer c.release()
	out := make([]string, c.nshards)
	for k := range out {
		out[k] = zrcore.Zrs_path(zrcore.Zrs_concat_shard(h, int64(k)))
	}
	return out, nil
}

// Offsets are the first global index of each shard, then the total
// (NumShards() + 1 values).
func (c *Concat) Offsets() ([]uint64, error) {
	h, err := c.in.acquire("offsets")
	if err != nil {
		return nil, err
	}
	defer c.release()
	out := make([]uint64, c.nshards+1)
	for k := range out {
		out[k] = zrcore.Zrs_concat_offset(h, int64(k))
	}
	return out, nil
}

// Gather reads dense records at global indices (negatives wrap) into dst,
// record i at dst[i*RecordSize():], as Store.Gather.
func (c *Concat) Gather(indices []int64, dst []byte) error {
	if c.kind != Dense {
		return errorf(StatusInvalid, "gather: %s is a ragged concatenation; use GatherRecords", c.path)
	}
	h, err := c.in.acquire("gather")
	if err != nil {
		return err
	}
	defer c.release()
	return callAs("zrecord.Concat.Gather", func() int { return zrcore.Zrs_concat_gather_dense(h, indices, dst) })
}

// Get returns a fresh copy of dense record i.
func (c *Concat) Get(i int64) ([]byte, error) {
	dst := make([]byte, c.recsize)
	return dst, c.Gather([]int64{i}, dst)
}

// GatherRecords reads ragged records at global indices, as
// Store.GatherRecords.
func (c *Concat) GatherRecords(indices []int64) ([]Record, error) {
	const op = "zrecord.Concat.GatherRecords"
	if c.kind != Ragged {
		return nil, errorf(StatusInvalid, "gather: %s is a dense concatenation; use Gather", c.path)
	}
	h, err := c.in.acquire("gather")
	if err != nil {
		return nil, err
	}
	defer c.release()
	return gatherRagged(op, len(indices),
		func(sizes []uint64) int { return zrcore.Zrs_concat_ragged_sizes(h, indices, sizes) },
		func(buf []byte, bounds []uint64) int {
			return zrcore.Zr_go_concat_gather_ragged(h, indices, buf, bounds)
		})
}

// Close closes the concatenation (loaders reading it fail with ErrClosed
// from then on) and the shards it opened (OpenConcat); borrowed stores
// (NewConcat) stay open. Idempotent.
func (c *Concat) Close() error {
	runtime.SetFinalizer(c, nil)
	return c.in.close()
}

// ------------------------------------------------------------------ push

// RemoteSupported reports whether the libraries open stores at URLs
// (built with libcurl); without, a URL is ErrUnsupported.
func RemoteSupported() bool { return zrcore.Zre_remote_supported() != 0 }

// Push uploads the local store at path to url (http(s):// PUT or
// s3://bucket/prefix), meta.zr last, so OpenReadOnly(url) opens it only
// once it is complete. ErrExist when the URL already holds a store.
func Push(path, url string) error {
	return callAs("zrecord.Push", func() int { return zrcore.Zr_bind_push(path, url) })
}

// PushShards uploads local shards to url as a shard set: each shard to
// url/<its folder name>, then the manifest last, so OpenConcat([]string{url})
// opens the whole set only once it is complete.
func PushShards(paths []string, url string) error {
	const op = "zrecord.PushShards"
	set := zrcore.Zr_bind_set_new()
	defer zrcore.Zr_bind_set_free(set)
	for _, p := range paths {
		p := p
		if err := callAs(op, func() int { return zrcore.Zr_bind_set_add_path(set, p) }); err != nil {
			return err
		}
	}
	return callAs(op, func() int { return zrcore.Zr_bind_push_shards(set, url) })
}

// --------------------------------------------------------------- Mixture

// MixtureSource is one dataset of a Mixture: its streams (the same
// number, kinds and identities in every source, in the same order; a
// single store is a Concat of one), its relative Weight (finite, > 0) and
// its Mode ("" for the loader's mode; "iid" for a source smaller than the
// global batch).
type MixtureSource struct {
	Name    string
	Weight  float64
	Mode    string
	Streams []*Concat
}

// Mixture samples several datasets by weight. A Loader over it
// (NewMixtureLoader) draws each batch position's source by weight and its
// index inside the source by that source's mode, as a pure function of
// (Seed, step, Rank): resume with State is exact and batch k is the same
// whatever NumWorkers. The Concats are borrowed: once one is closed, the
// loaders reading the mixture fail with ErrClosed.
type Mixture struct {
	sources []MixtureSource
}

// NewMixture checks the sources' weights and stream counts; the streams'
// identities and modes are checked when a loader binds it.
func NewMixture(sources []MixtureSource) (*Mixture, error) {
	const op = "zrecord.NewMixture"
	if len(sources) == 0 {
		return nil, opErrorf(op, StatusInvalid, "a mixture needs at least one source")
	}
	for _, s := range sources {
		if !(s.Weight > 0) || math.IsInf(s.Weight, 0) {
			return nil, opErrorf(op, StatusInvalid, "weight of source %q is %v, expected a finite number > 0", s.Name, s.Weight)
		}
		if len(s.Streams) != len(sources[0].Streams) || len(s.Streams) == 0 {
			return nil, opErrorf(op, StatusInvalid, "source %q has %d streams, the first source has %d: every source needs the same streams", s.Name, len(s.Streams), len(sources[0].Streams))
		}
		for j, c := range s.Streams {
			if c == nil {
				return nil, opErrorf(op, StatusInvalid, "stream %d of source %q is nil (expected an open *Concat)", j, s.Name)
			}
		}
	}
	return &Mixture{sources: append([]MixtureSource(nil), sources...)}, nil
}

// Lengths are the records per source, by name.
func (m *Mixture) Lengths() map[string]int {
	out := make(map[string]int, len(m.sources))
	for _, s := range m.sources {
		out[s.Name] = s.Streams[0].Len()
	}
	return out
}

// NewMixtureLoader starts a loader over the mixture's streams (in the
// sources' stream order). Batch.Indices are then positions in a virtual
// index space: Mixture.Locate turns them into sources and indices.
// ErrInvalid for streams whose identity differs between sources, a
// cyclic source shorter than BatchSize * WorldSize, or an unknown mode.
func NewMixtureLoader(m *Mixture, opts LoaderOptions) (*Loader, error) {
	if m == nil {
		return nil, opErrorf("zrecord.NewMixtureLoader", StatusInvalid, "the mixture is nil")
	}
	first := make([]Source, len(m.sources[0].Streams))
	for i, c := range m.sources[0].Streams {
		first[i] = c
	}
	return newLoader("zrecord.NewMixtureLoader", first, m, opts)
}

// bind makes the native mixture for one loader's options (mode: the
// loader's, for sources without their own). The caller holds the first
// source's streams (newLoader's acquire); bind takes the others' read
// locks and returns their release, to call once the loader is made.
func (m *Mixture) bind(op string, opts LoaderOptions, mode Mode) (zrcore.Struct_SS_zld_mixture, func(), error) {
	cset := zrcore.Zr_bind_set_new()
	defer zrcore.Zr_bind_set_free(cset)
	wset := zrcore.Zr_bind_set_new()
	defer zrcore.Zr_bind_set_free(wset)
	var held []*concatHandle
	release := func() {
		for _, ch := range held {
			ch.mu.RUnlock()
		}
		held = nil
	}
	fail := func(err error) (zrcore.Struct_SS_zld_mixture, func(), error) {
		release()
		return nil, nil, err
	}
	for k, s := range m.sources {
		md := s.Mode
		if md == "" {
			md = mode.String()
		}
		if err := callAs(op, func() int { return zrcore.Zr_bind_set_add_weight(wset, s.Weight, md) }); err != nil {
			return fail(err)
		}
		for j, c := range s.Streams {
			h := c.in.h // source 0: held by the caller
			if k > 0 {
				var err error
				if h, err = c.in.acquire(fmt.Sprintf("mixture: stream %d of source %q", j, s.Name)); err != nil {
					return fail(err)
				}
				held = append(held, c.in)
			}
			zrcore.Zr_bind_set_add_concat(cset, h)
		}
	}
	ws := opts.WorldSize
	if ws == 0 {
		ws = 1
	}
	out := []uintptr{0}
	if err := callAs(op, func() int {
		return zrcore.Zr_bind_mixture_create(out, cset, wset, int64(len(m.sources[0].Streams)), opts.Seed, opts.BatchSize, uint(ws))
	}); err != nil {
		return fail(err)
	}
	return zrcore.SwigcptrStruct_SS_zld_mixture(out[0]), release, nil
}

// Locate gives, for virtual indices of loader l's batches (Batch.Indices),
// each record's source name and its index inside that source. ErrInvalid
// for a loader that does not read this mixture, ErrClosed after its Close.
func (m *Mixture) Locate(l *Loader, indices []uint64) ([]string, []uint64, error) {
	const op = "zrecord.Mixture.Locate"
	if l == nil || l.mix != m {
		return nil, nil, opErrorf(op, StatusInvalid, "this loader does not read this mixture")
	}
	lh := l.in
	lh.mu.Lock()
	defer lh.mu.Unlock()
	if lh.closed() {
		return nil, nil, errorf(StatusClosed, "loader is closed")
	}
	names := make([]string, len(indices))
	idx := make([]uint64, len(indices))
	src, at := []uint64{0}, []uint64{0}
	for k, v := range indices {
		v := v
		if err := callAs(op, func() int { return zrcore.Zr_bind_mixture_locate(lh.mixture, v, src, at) }); err != nil {
			return nil, nil, err
		}
		names[k] = m.sources[src[0]].Name
		idx[k] = at[0]
	}
	return names, idx, nil
}
