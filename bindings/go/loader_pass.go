package zrecord

import (
	"encoding/binary"

	"loaderx.invalid/zrecord/internal/zrcore"
)

// NewPassLoader is NewLoader for one finite pass (opts.Pass set): every
// record exactly once, then Next returns io.EOF; Steps is this rank's
// number of steps. Set Pack and PackLength for a pass of packed rows.
func NewPassLoader(streams []*Store, opts LoaderOptions) (*Loader, error) {
	opts.Pass = true
	return NewLoader(streams, opts)
}

// setPassBucketPack puts the pass, bucketing and packing options into o
// (through the glue shared with the Lua binding). o's bucket lengths are
// freed by zrcore.Zr_bind_options_release.
func setPassBucketPack(o zrcore.Zld_options, opts *LoaderOptions) error {
	b2i := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	o.SetPass(b2i(opts.Pass))
	o.SetShuffle(b2i(opts.Shuffle))
	o.SetDrop_last(b2i(opts.DropLast))
	o.SetEpoch(opts.Epoch)
	o.SetEven_batches(b2i(opts.EvenBatches))
	if opts.BucketLengths != nil {
		if err := callAs("zrecord.NewLoader", func() int {
			return zrcore.Zr_bind_bucket_options(o, opts.BucketLengths, opts.BucketWindow)
		}); err != nil {
			return err
		}
	} else if opts.BucketWindow != 0 {
		return opErrorf("zrecord.NewLoader", StatusInvalid, "BucketWindow applies only with BucketLengths")
	}
	if opts.Pack {
		return callAs("zrecord.NewLoader", func() int {
			return zrcore.Zr_bind_pack_options(o, opts.PackLength, opts.PackWindow, opts.PackPolicy, opts.PackOverlong)
		})
	}
	if opts.PackLength != 0 || opts.PackWindow != 0 || opts.PackPolicy != "" || opts.PackOverlong != "" {
		return opErrorf("zrecord.NewLoader", StatusInvalid, "PackLength, PackPolicy, PackWindow and PackOverlong apply only with Pack")
	}
	return nil
}

// statePassBucketPack copies the pass, bucketing and packing fields of a
// zld_get_state result into st (the bucket lengths are the loader's own
// copy: read while it is open).
func statePassBucketPack(o zrcore.Zld_options, st *LoaderOptions) {
	st.Pass = o.GetPass() != 0
	if st.Pass {
		st.Shuffle = o.GetShuffle() != 0
		st.DropLast = o.GetDrop_last() != 0
		st.Epoch = o.GetEpoch()
		st.EvenBatches = o.GetEven_batches() != 0
	}
	if n := o.GetBucket_count(); n > 0 {
		st.BucketLengths = make([]uint32, n)
		zrcore.Zr_go_options_bucket_lengths(o, st.BucketLengths)
		st.BucketWindow = o.GetBucket_window()
	}
	if o.GetPack() != 0 {
		st.Pack = true
		st.PackLength = o.GetPack_length()
		st.PackWindow = o.GetPack_window()
		st.PackPolicy = zrcore.Zsm_pack_policy_name(o.GetPack_policy())
		st.PackOverlong = zrcore.Zsm_pack_overlong_name(o.GetPack_overlong())
	}
}

// packBatch fills batch from the pack-mode batch b: the streams' packed
// bytes and the layout.
func packBatch(b zrcore.Struct_SS_zld_batch, batch *Batch) error {
	pi := zrcore.NewZld_pack_info()
	defer zrcore.DeleteZld_pack_info(pi)
	if err := callAs("zrecord.Loader.Next", func() int { return zrcore.Zld_batch_pack_info(b, pi) }); err != nil {
		return err
	}
	p := &PackInfo{Rows: pi.GetRows(), Length: pi.GetLength(), Segments: pi.GetSegments(),
		MaxSegments: pi.GetMax_segments(), MaxSeqlen: pi.GetMax_seqlen(), Tokens: pi.GetTokens()}
	ns := len(batch.Data)
	part := func(k int) ([]byte, error) {
		data := make([]byte, zrcore.Zr_go_batch_nbytes(b, int64(k)))
		err := callAs("zrecord.Loader.Next", func() int { return zrcore.Zr_go_batch_copy(b, int64(k), data) })
		return data, err
	}
	for k := 0; k < ns; k++ {
		data, err := part(k)
		if err != nil {
			return err
		}
		batch.Data[k] = data
	}
	batch.Records = nil
	layout := []*[]int32{&p.SegmentIDs, &p.Positions, &p.SeqLens, &p.CuSeqlens}
	for j, dst := range layout {
		data, err := part(ns + j)
		if err != nil {
			return err
		}
		*dst = int32s(data)
	}
	batch.Pack = p
	return nil
}

func int32s(b []byte) []int32 {
	out := make([]int32, len(b)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// Steps is a finite pass's number of steps on this rank; finite is false
// for an endless loader (and after Close).
func (l *Loader) Steps() (steps uint64, finite bool) {
	lh := l.in
	lh.mu.Lock()
	defer lh.mu.Unlock()
	if lh.h == nil {
		return 0, false
	}
	n := zrcore.Zld_steps(lh.h)
	return n, n != ^uint64(0)
}

// Pad stacks ragged records (a ragged stream's Batch.Records, or any
// records of shape (n_i, ...) with one trailing shape) of dtype into one
// dense block (len(records), length, ...) in native code: each record's
// first min(n_i, length) elements (an element is everything after the
// first axis), then copies of padValue (one element's bytes; nil = zero
// bytes). length < 0 pads to the longest record. Returns the block's raw
// little-endian bytes and each n_i (before any cut). ErrInvalid for no
// records, a record of another trailing shape or of the wrong size (named
// by position), or a padValue that is not one element.
func Pad(records []Record, dtype string, length int, padValue []byte) ([]byte, []uint64, error) {
	const op = "zrecord.Pad"
	if len(records) == 0 {
		return nil, nil, opErrorf(op, StatusInvalid, "no records (the batch dimension would be empty)")
	}
	isz, err := Itemsize(dtype)
	if err != nil {
		return nil, nil, err
	}
	inner := records[0].Shape
	if len(inner) < 1 {
		return nil, nil, opErrorf(op, StatusInvalid, "record 0 has no first axis (a scalar)")
	}
	elem := uint64(isz)
	for _, d := range inner[1:] {
		elem *= d
	}
	total := 0
	for i, r := range records {
		same := len(r.Shape) == len(inner)
		for d := 1; same && d < len(inner); d++ {
			same = r.Shape[d] == inner[d]
		}
		if !same {
			return nil, nil, opErrorf(op, StatusInvalid, "record %d has shape %v, another trailing shape than record 0 (%v)", i, r.Shape, inner)
		}
		if uint64(len(r.Data)) != r.Shape[0]*elem {
			return nil, nil, opErrorf(op, StatusInvalid, "record %d of shape %v needs %d bytes of data, got %d", i, r.Shape, r.Shape[0]*elem, len(r.Data))
		}
		total += len(r.Data)
	}
	if padValue == nil {
		padValue = make([]byte, elem)
	}
	if uint64(len(padValue)) != elem || elem == 0 {
		return nil, nil, opErrorf(op, StatusInvalid, "the pad value has %d bytes, an element %d", len(padValue), elem)
	}
	flat := make([]byte, 0, total+1)
	bounds := make([]uint64, len(records)+1)
	longest := uint64(0)
	for i, r := range records {
		flat = append(flat, r.Data...)
		bounds[i+1] = uint64(len(flat))
		if r.Shape[0] > longest {
			longest = r.Shape[0]
		}
	}
	want := uint64(length)
	if length < 0 {
		want = longest
	}
	dst := make([]byte, uint64(len(records))*want*elem+1) // +1: never an empty slice
	lens := make([]uint64, len(records))
	if err := callAs(op, func() int {
		return zrcore.Zr_bind_pad(flat[:cap(flat)], bounds, uint64(len(records)), int64(elem), want, padValue, dst, lens)
	}); err != nil {
		return nil, nil, err
	}
	return dst[:len(dst)-1], lens, nil
}
