package zrecord

import (
	"fmt"
	"io"
	"reflect"
	"runtime"
	"sort"
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
	// Flip maps a stream's position in streams to a probability p: each
	// record of that dense stream is flipped along its last axis with
	// probability p (a horizontal flip of (C, H, W) or (H, W) images),
	// natively in the workers. Which records flip is a pure function of
	// (Seed, step, position in the global batch): the same for any
	// NumWorkers and on resume, and streams given the same p flip together
	// (an image and its mask). ErrInvalid for a position out of range, a
	// ragged or scalar stream, a dtype whose itemsize is not 1, 2, 4 or 8,
	// or p outside [0, 1] (NaN included). nil: no flips.
	Flip map[int]float64

	// A finite pass (an evaluation epoch) instead of endless steps: every
	// record exactly once, then Next returns io.EOF. Mode is ignored;
	// Shuffle draws a permutation keyed by (Seed, Epoch), else index
	// order. Over WorldSize ranks each record lands on exactly one rank:
	// the last global batch is split as evenly as possible (no record
	// repeated), or dropped with DropLast. EvenBatches gives every rank the
	// same number of full batches instead, its padding rows repeating a
	// record (Batch.Valid counts the real ones). Steps says how many
	// steps this rank has. See also NewPassLoader.
	Pass        bool
	Shuffle     bool
	DropLast    bool
	Epoch       uint64
	EvenBatches bool

	// Length bucketing: with BucketLengths (one length per record, e.g.
	// its tokens) each batch holds records of similar length: the cyclic
	// order is cut into windows of BucketWindow global batches (0 = 64),
	// each sorted by length. Needs the Cyclic mode; not with Pass.
	BucketLengths []uint32
	BucketWindow  uint64

	// Sequence packing: with Pack every stream is ragged (documents of
	// tokens, and streams aligned with them element by element, such as
	// loss masks) and each batch is BatchSize rows of exactly PackLength
	// elements, documents packed into rows by PackPolicy ("first_fit",
	// "best_fit" (the default) or "concat"), PackWindow documents per
	// window (0 = 1024), documents longer than a row by PackOverlong
	// ("split" (the default), "truncate" or "drop"). Batch.Pack holds the
	// layout; Batch.Data[s] stream s packed, [rows, PackLength, *item] of
	// its dtype, padding 0. Endless packing needs the Cyclic mode (each
	// epoch's documents in a fresh order); with Pass, one epoch.
	Pack         bool
	PackLength   uint64
	PackPolicy   string
	PackWindow   uint64
	PackOverlong string
}

// PackInfo is the layout of a packed batch (LoaderOptions.Pack). A
// segment is one document, or one piece of a split document; segments
// never cross rows.
type PackInfo struct {
	Rows        uint64 // rows in this batch
	Length      uint64 // elements per row (PackLength)
	Segments    uint64 // segments in all rows
	MaxSegments uint64 // the most segments in one row (the width of SeqLens)
	MaxSeqlen   uint64 // the longest segment
	Tokens      uint64 // elements that are not padding
	// SegmentIDs [Rows*Length]: 1, 2, ... for a row's segments, 0 for padding.
	SegmentIDs []int32
	// Positions [Rows*Length]: each element's position in its segment.
	Positions []int32
	// SeqLens [Rows*MaxSegments]: a row's segment lengths, then 0s.
	SeqLens []int32
	// CuSeqlens [Segments+1]: 0, then the running sum of the segment
	// lengths, row after row (flash-attention's varlen cu_seqlens).
	CuSeqlens []int32
}

// Batch is one step of a Loader: the indices and, per stream, the bytes.
type Batch struct {
	Step    uint64
	Indices []uint64
	// Data[s] is stream s's bytes: for a dense stream len(Indices) records
	// of RecordSize bytes back to back; for a ragged stream packed records.
	Data [][]byte
	// Records[s] is stream s's records for a ragged stream, nil for dense
	// (and in pack mode).
	Records [][]Record
	// Valid is the number of leading rows that are real records: len(Indices)
	// except in an EvenBatches pass, whose padding rows follow them.
	Valid uint64
	// Pack is the layout of a packed batch (nil unless LoaderOptions.Pack);
	// Indices then holds each segment's document.
	Pack *PackInfo
}

// Loader is an endless prefetching loader over index-aligned stores.
// Next may be called from one goroutine at a time; Close from any.
//
// The C loader borrows the stores (concatenations, mixture) it reads, so
// they may be closed or finalized in any order: once one is closed, Next
// fails with ErrClosed naming it, and Closed reports true.
type Loader struct {
	in        *loaderHandle
	streams   []Source // keeps the user-facing stores reachable while the Loader is
	mix       *Mixture // the mixture it reads, if any
	mixMode   Mode     // its sources' default mode (the loader's own walks in order)
	kinds     []Kind
	flip      map[int]float64 // the loader's flips (a copy of LoaderOptions.Flip)
	batchSize uint64
	pack      bool
}

// loaderHandle owns the C loader handle and carries no finalizer.
type loaderHandle struct {
	mu      sync.Mutex
	h       zrcore.Struct_SS_zld_loader
	mixture zrcore.Struct_SS_zld_mixture // a mixture loader's own mixture, freed with it
}

// closed reports whether the loader is closed or a store it reads was
// (lh.mu held).
func (lh *loaderHandle) closed() bool {
	return lh.h == nil || zrcore.Zld_is_closed(lh.h) != 0
}

// close stops the workers and frees the C loader (which lets go of its
// stores). Idempotent.
func (lh *loaderHandle) close() {
	lh.mu.Lock()
	h := lh.h
	lh.h = nil
	lh.mu.Unlock()
	if h == nil {
		return
	}
	zrcore.Zld_close(h)
	if lh.mixture != nil {
		zrcore.Zld_mixture_free(lh.mixture)
	}
}

// Closed reports whether the loader is closed: by Close, or because a
// store, concatenation or mixture source it reads was closed (Next then
// fails with ErrClosed naming it).
func (l *Loader) Closed() bool {
	lh := l.in
	lh.mu.Lock()
	defer lh.mu.Unlock()
	return lh.closed()
}

// NewLoader starts a loader over streams (open stores of equal length).
// Closing a store while the loader runs is safe: the loader's Next then
// fails with ErrClosed naming the store, and Delete and Compact on a
// store a loader reads fail with ErrBusy. A nil or closed stream is an
// error naming its position.
func NewLoader(streams []*Store, opts LoaderOptions) (*Loader, error) {
	for i, s := range streams {
		if s == nil {
			return nil, errorf(StatusInvalid, "loader: stream %d of %d is nil (expected an open *Store)", i, len(streams))
		}
	}
	srcs := make([]Source, len(streams))
	for i, s := range streams {
		srcs[i] = s
	}
	return newLoader("zrecord.NewLoader", srcs, nil, opts)
}

// NewLoaderOf is NewLoader over any mix of stores and concatenations
// (*Store, *Concat) of equal length. Concatenations read side by side must
// be sharded alike (shard k of equal length in each), so that index i is
// the same example in all of them: ErrInvalid naming the first shard that
// differs otherwise. Flip works on a dense concatenation as on a store.
func NewLoaderOf(streams []Source, opts LoaderOptions) (*Loader, error) {
	for i, s := range streams {
		if s == nil || reflect.ValueOf(s).IsNil() {
			return nil, errorf(StatusInvalid, "loader: stream %d of %d is nil (expected an open *Store or *Concat)", i, len(streams))
		}
	}
	return newLoader("zrecord.NewLoaderOf", streams, nil, opts)
}

// newLoader starts a loader over streams; with mix non-nil, over that
// mixture's streams instead (streams are then its first source's, for
// their kinds and flips). op names the caller in errors.
func newLoader(op string, streams []Source, mix *Mixture, opts LoaderOptions) (*Loader, error) {
	if len(streams) == 0 {
		return nil, opErrorf(op, StatusInvalid, "no streams")
	}
	if opts.BatchSize == 0 {
		return nil, opErrorf(op, StatusInvalid, "BatchSize is 0, expected >= 1 (records per batch)")
	}
	for k := range opts.Flip {
		if k < 0 || k >= len(streams) {
			return nil, opErrorf(op, StatusInvalid, "Flip names stream %d, expected 0 to %d (a position in streams)", k, len(streams)-1)
		}
	}
	o := zrcore.NewZld_options()
	defer zrcore.DeleteZld_options(o)
	// The defaults of the installed header's options version (zld_options_init).
	if err := call(func() int { return zrcore.Zld_options_init(o, zrcore.ZLD_OPTIONS_VERSION) }); err != nil {
		return nil, err
	}
	defer zrcore.Zr_go_options_free_flips(o)
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
	defer zrcore.Zr_bind_options_release(o)
	if err := setPassBucketPack(o, &opts); err != nil {
		return nil, err
	}

	// handles: a store of each stream, for its flip (a concatenation's
	// shard 0, which has the stream's identity)
	handles := make([]zrcore.Struct_SS_zrs_store, len(streams))
	kinds := make([]Kind, len(streams))
	set := zrcore.Zr_bind_set_new()
	defer func() { zrcore.Zr_bind_set_free(set) }() // the last one made
	for i, s := range streams {
		h, kind, err := s.source().acquire(fmt.Sprintf("loader: stream %d", i), set)
		if err != nil {
			for _, p := range streams[:i] {
				p.source().release()
			}
			return nil, err
		}
		handles[i] = h
		kinds[i] = kind
	}
	var mixture zrcore.Struct_SS_zld_mixture
	mixMode := Cyclic
	if opts.UseMode {
		mixMode = opts.Mode
	}
	if mix != nil {
		// the mixture draws sources and indices; the loader walks its
		// virtual index space in order, over the mixture's streams
		var err error
		var releaseMix func()
		if mixture, releaseMix, err = mix.bind(op, opts, mixMode); err != nil {
			for _, p := range streams {
				p.source().release()
			}
			return nil, err
		}
		defer releaseMix()
		o.SetMode(zrcore.Enum_SS_zsm_mode(Sequential))
		zrcore.Zr_bind_set_free(set)
		set = zrcore.Zr_bind_set_new()
		for i := range streams {
			zrcore.Zr_bind_set_add_mixture(set, mixture, int64(i))
		}
	}
	flip := make(map[int]float64, len(opts.Flip))
	keys := make([]int, 0, len(opts.Flip))
	for k, p := range opts.Flip {
		keys = append(keys, k)
		flip[k] = p
	}
	sort.Ints(keys) // the same error for the same options
	var err error
	for _, k := range keys {
		k := k
		if err = callAs(op, func() int {
			return zrcore.Zr_go_options_add_flip(o, handles[k], int64(k), opts.Flip[k])
		}); err != nil {
			break
		}
	}
	out := []uintptr{0}
	if err == nil {
		err = callAs(op, func() int { return zrcore.Zr_bind_loader_create(out, set, o) })
	}
	var lh *loaderHandle
	if err == nil {
		lh = &loaderHandle{h: zrcore.SwigcptrStruct_SS_zld_loader(out[0]), mixture: mixture}
	}
	for _, s := range streams {
		s.source().release()
	}
	if err != nil {
		if mixture != nil {
			zrcore.Zld_mixture_free(mixture)
		}
		return nil, err
	}
	l := &Loader{in: lh, streams: append([]Source(nil), streams...), mix: mix, mixMode: mixMode, kinds: kinds, flip: flip, batchSize: opts.BatchSize, pack: opts.Pack}
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
	rc := 0
	if err := callAs("zrecord.Loader.Next", func() int { rc = zrcore.Zld_next(lh.h, out); return rc }); err != nil {
		return nil, err
	}
	if rc == zrcore.ZLD_END {
		return nil, io.EOF
	}
	b := zrcore.SwigcptrStruct_SS_zld_batch(out[0])
	defer zrcore.Zld_batch_free(b)
	n := zrcore.Zld_batch_count(b)
	batch := &Batch{
		Step:    zrcore.Zld_batch_step(b),
		Indices: make([]uint64, zrcore.Zr_bind_batch_nindices(b)),
		Data:    make([][]byte, len(l.kinds)),
		Records: make([][]Record, len(l.kinds)),
		Valid:   zrcore.Zld_batch_valid(b),
	}
	zrcore.Zr_go_batch_indices(b, batch.Indices)
	if l.pack {
		return batch, packBatch(b, batch)
	}
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

// Flipped says which records of step `step`'s batch the Flip of stream
// (its position in streams) flips: batch-size booleans, a pure function of
// Seed, step and Rank, so any step may be asked, past or future.
// ErrInvalid for a stream without a Flip, ErrClosed after Close.
func (l *Loader) Flipped(stream int, step uint64) ([]bool, error) {
	p, ok := l.flip[stream]
	if !ok {
		keys := make([]int, 0, len(l.flip))
		for k := range l.flip {
			keys = append(keys, k)
		}
		sort.Ints(keys)
		return nil, opErrorf("zrecord.Loader.Flipped", StatusInvalid, "stream %d has no flip (Flip names streams %v)", stream, keys)
	}
	lh := l.in
	lh.mu.Lock()
	defer lh.mu.Unlock()
	if lh.h == nil {
		return nil, errorf(StatusClosed, "loader is closed")
	}
	mask := make([]byte, l.batchSize)
	if err := callAs("zrecord.Loader.Flipped", func() int { return zrcore.Zr_go_flip_mask(lh.h, step, p, mask) }); err != nil {
		return nil, err
	}
	out := make([]bool, len(mask))
	for i, m := range mask {
		out[i] = m != 0
	}
	return out, nil
}

// State returns the options that resume this loader exactly: StartStep is
// the step the next Next returns, Flip the loader's flips; NewLoader over
// the same streams with them hands out that batch first. ErrClosed after
// Close.
func (l *Loader) State() (LoaderOptions, error) {
	lh := l.in
	lh.mu.Lock()
	defer lh.mu.Unlock()
	if lh.h == nil {
		return LoaderOptions{}, errorf(StatusClosed, "loader is closed")
	}
	o := zrcore.NewZld_options()
	defer zrcore.DeleteZld_options(o)
	if err := callAs("zrecord.Loader.State", func() int { return zrcore.Zld_get_state(lh.h, o) }); err != nil {
		return LoaderOptions{}, err
	}
	st := LoaderOptions{
		BatchSize:  o.GetBatch_size(),
		Mode:       Mode(o.GetMode()),
		UseMode:    true,
		Seed:       o.GetSeed(),
		StartStep:  o.GetStart_step(),
		Rank:       uint32(o.GetRank()),
		WorldSize:  uint32(o.GetWorld_size()),
		NumWorkers: o.GetNum_workers(),
		Prefetch:   o.GetPrefetch(),
	}
	statePassBucketPack(o, &st)
	if l.mix != nil { // the mode its sources default to; the loader's own walks in order
		st.Mode = l.mixMode
	}
	for k := range l.kinds { // the loader's own copy, read while it is open
		if p := zrcore.Zr_go_options_flip_p(o, int64(k)); p >= 0 {
			if st.Flip == nil {
				st.Flip = map[int]float64{}
			}
			st.Flip[k] = p
		}
	}
	return st, nil
}

// Close stops the workers and frees the loader. Idempotent.
func (l *Loader) Close() error {
	runtime.SetFinalizer(l, nil)
	l.in.close()
	return nil
}
