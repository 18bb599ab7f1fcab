package zrecord

import (
	"fmt"
	"runtime"
	"sync"

	"loaderx.invalid/zrecord/internal/zrcore"
)

// LoaderOptions configures a Loader. BatchSize is required (>= 1; 0 is
// an error). Other zero values mean the C defaults (mode Cyclic, all CPUs,
// prefetch 2 * workers) except Mode: set UseMode to pick Sequential
// (whose value is 0).
type LoaderOptions struct {
	BatchSize  uint64
	Mode       Mode
	UseMode    bool // Mode is meaningful (otherwise Cyclic)
	Seed       uint64
	StartStep  uint64
	Rank       uint32
	WorldSize  uint32 // 0 means 1
	NumWorkers uint   // 0 = CPU count
	Prefetch   uint   // 0 = 2 * NumWorkers
}

// Batch is one step of a Loader: the indices and, per stream, the bytes.
type Batch struct {
	Step    uint64
	Indices []uint64
	// Data[s] is stream s's bytes: for a dense stream len(Indices) records
	// of RecordSize bytes back to back; for a ragged stream packed records.
	Data [][]byte
	// Records[s] is stream s's records for a ragged stream, nil for dense.
	Records [][]Record
}

// Loader is an endless prefetching loader over index-aligned stores.
// Next may be called from one goroutine at a time; Close from any.
//
// A Loader keeps its Stores reachable (a dropped Loader is finalized
// before its stores); the C handle lives in the inner loaderHandle, which
// the stores' inner handles know about so that closing a store closes
// the loaders reading it first (see Store for why the split).
type Loader struct {
	in     *loaderHandle
	stores []*Store // keeps the user-facing stores reachable while the Loader is
	kinds  []Kind
}

// loaderHandle owns the C loader handle. It references the stores' inner
// handles (never a Store or a Loader) and carries no finalizer.
type loaderHandle struct {
	mu      sync.Mutex
	h       zrcore.Struct_SS_zld_loader
	streams []*storeHandle
}

// close stops the workers, frees the C loader and unregisters it from
// its stores. Idempotent.
func (lh *loaderHandle) close() {
	lh.mu.Lock()
	h := lh.h
	lh.h = nil
	lh.mu.Unlock()
	if h == nil {
		return
	}
	zrcore.Zld_close(h)
	for _, sh := range lh.streams {
		sh.lmu.Lock()
		delete(sh.loaders, lh)
		sh.lmu.Unlock()
	}
}

// NewLoader starts a loader over streams (open stores of equal length).
// The stores must stay open while it runs; closing a store closes the
// loaders reading it first. A nil or closed stream is an error naming
// its position.
func NewLoader(streams []*Store, opts LoaderOptions) (*Loader, error) {
	if len(streams) == 0 {
		return nil, opErrorf("zrecord.NewLoader", StatusInvalid, "no streams")
	}
	if opts.BatchSize == 0 {
		return nil, opErrorf("zrecord.NewLoader", StatusInvalid, "BatchSize is 0, expected >= 1 (records per batch)")
	}
	for i, s := range streams {
		if s == nil {
			return nil, errorf(StatusInvalid, "loader: stream %d of %d is nil (expected an open *Store)", i, len(streams))
		}
	}
	o := zrcore.NewZld_options()
	defer zrcore.DeleteZld_options(o)
	zrcore.Zr_go_options_init(o)
	o.SetBatch_size(opts.BatchSize)
	mode := Cyclic
	if opts.UseMode {
		mode = opts.Mode
	}
	o.SetMode(zrcore.Enum_SS_zsm_mode(mode))
	o.SetSeed(opts.Seed)
	o.SetStart_step(opts.StartStep)
	o.SetRank(uint(opts.Rank))
	ws := opts.WorldSize
	if ws == 0 {
		ws = 1
	}
	o.SetWorld_size(uint(ws))
	o.SetNum_workers(opts.NumWorkers)
	o.SetPrefetch(opts.Prefetch)

	ptrs := make([]uintptr, len(streams))
	kinds := make([]Kind, len(streams))
	for i, s := range streams {
		h, err := s.acquire(fmt.Sprintf("loader: stream %d", i))
		if err != nil {
			for _, p := range streams[:i] {
				p.release()
			}
			return nil, err
		}
		ptrs[i] = h.Swigcptr()
		kinds[i] = s.kind
	}
	out := []uintptr{0}
	err := callAs("zrecord.NewLoader", func() int { return zrcore.Zld_create(out, ptrs, o) })
	for _, s := range streams {
		s.release()
	}
	if err != nil {
		return nil, err
	}
	lh := &loaderHandle{h: zrcore.SwigcptrStruct_SS_zld_loader(out[0]), streams: make([]*storeHandle, len(streams))}
	for i, s := range streams {
		lh.streams[i] = s.in
		s.in.lmu.Lock()
		s.in.loaders[lh] = struct{}{}
		s.in.lmu.Unlock()
	}
	l := &Loader{in: lh, stores: append([]*Store(nil), streams...), kinds: kinds}
	runtime.SetFinalizer(l, func(l *Loader) { l.in.close() })
	return l, nil
}

// Next blocks until the next step's batch is ready and returns it (a
// fresh copy owned by the caller). ErrState if a worker failed (the
// message names the step), ErrClosed after Close.
func (l *Loader) Next() (*Batch, error) {
	lh := l.in
	lh.mu.Lock()
	defer lh.mu.Unlock()
	if lh.h == nil {
		return nil, errorf(StatusClosed, "loader is closed")
	}
	out := []uintptr{0}
	if err := callAs("zrecord.Loader.Next", func() int { return zrcore.Zld_next(lh.h, out) }); err != nil {
		return nil, err
	}
	b := zrcore.SwigcptrStruct_SS_zld_batch(out[0])
	defer zrcore.Zld_batch_free(b)
	n := zrcore.Zld_batch_count(b)
	batch := &Batch{
		Step:    zrcore.Zld_batch_step(b),
		Indices: make([]uint64, n),
		Data:    make([][]byte, len(l.kinds)),
		Records: make([][]Record, len(l.kinds)),
	}
	zrcore.Zr_go_batch_indices(b, batch.Indices)
	for k := range l.kinds {
		data := make([]byte, zrcore.Zr_go_batch_nbytes(b, int64(k)))
		if err := callAs("zrecord.Loader.Next", func() int { return zrcore.Zr_go_batch_copy(b, int64(k), data) }); err != nil {
			return nil, err
		}
		batch.Data[k] = data
		if l.kinds[k] == Ragged {
			bounds := make([]uint64, n+1)
			zrcore.Zr_go_batch_bounds(b, int64(k), bounds)
			recs, err := unpackRagged(data, bounds)
			if err != nil {
				return nil, err
			}
			batch.Records[k] = recs
		}
	}
	return batch, nil
}

// Step is the step the next call to Next returns.
func (l *Loader) Step() uint64 {
	lh := l.in
	lh.mu.Lock()
	defer lh.mu.Unlock()
	if lh.h == nil {
		return 0
	}
	return zrcore.Zld_next_step(lh.h)
}

// Close stops the workers and frees the loader. Idempotent.
func (l *Loader) Close() error {
	runtime.SetFinalizer(l, nil)
	l.in.close()
	return nil
}
