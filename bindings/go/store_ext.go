package zrecord

import "loaderx.invalid/zrecord/internal/zrcore"

// OpenReadOnly opens an existing store for reading: any number of
// read-only handles coexist with each other and with one writable handle,
// in any processes (ErrBusy only while a Delete or Compact runs). The
// handle sees the records committed when it opened; Refresh shows later
// commits. Append, Delete and Compact return ErrUnsupported on it.
func OpenReadOnly(path string) (*Store, error) {
	out := []uintptr{0}
	if err := callAs("zrecord.OpenReadOnly", func() int { return zrcore.Zrs_open_ex(out, path, uint(zrcore.ZRE_OPEN_READONLY)) }); err != nil {
		return nil, err
	}
	return wrapStore(out[0]), nil
}

// OpenRecover opens an existing store for writing after a crash or power
// loss lost appends that were never synced: every record that reached the
// disk (every record whose Sync returned) is kept and the header is
// rewritten to them. A plain Open refuses such a store with ErrNotStore,
// naming recovery. On a store that needs none it is the same as Open.
func OpenRecover(path string) (*Store, error) {
	out := []uintptr{0}
	if err := callAs("zrecord.OpenRecover", func() int { return zrcore.Zrs_open_ex(out, path, uint(zrcore.ZRE_OPEN_RECOVER)) }); err != nil {
		return nil, err
	}
	return wrapStore(out[0]), nil
}

// Refresh moves a read-only handle to the latest commit and returns the
// new Len: a reader's length changes only here, growing to the writer's
// committed length, never past it. On a writable handle (which sees its own
// appends at once) it only returns Len.
func (s *Store) Refresh() (int, error) {
	h, err := s.acquire("refresh")
	if err != nil {
		return 0, err
	}
	defer s.release()
	if err := call(func() int { return zrcore.Zrs_refresh(h) }); err != nil {
		return 0, err
	}
	return int(zrcore.Zrs_length(h)), nil
}

// ReadOnly reports whether the handle was opened with OpenReadOnly.
func (s *Store) ReadOnly() bool {
	h, err := s.acquire("readonly")
	if err != nil {
		return false
	}
	defer s.release()
	return zrcore.Zrs_is_readonly(h) == 1
}

// Delete removes the records at indices (negatives wrap, duplicates count
// once) by swap-last: the last records move into the holes. Atomic:
// ErrRange deletes nothing.
func (s *Store) Delete(indices []int64) error {
	h, err := s.acquire("delete")
	if err != nil {
		return err
	}
	defer s.release()
	return callAs("zrecord.Store.Delete", func() int { return zrcore.Zrs_delete(h, indices) })
}

// Compact reclaims the bytes of deleted records in place.
func (s *Store) Compact() error {
	h, err := s.acquire("compact")
	if err != nil {
		return err
	}
	defer s.release()
	return callAs("zrecord.Store.Compact", func() int { return zrcore.Zrs_compact(h) })
}

// DictTier picks a dictionary size for TrainDict.
type DictTier int

const (
	DictFast     DictTier = 0 // 32 KiB dictionary, 4 MiB sample
	DictBalanced DictTier = 1 // 128 KiB dictionary, 16 MiB sample
	DictMax      DictTier = 2 // 1 MiB dictionary, 64 MiB sample
)

// TrainDict trains a zstd dictionary of at most the tier's size on
// samples (record bytes, in index order), for CreateDenseDict /
// CreateRaggedDict. The library's one sample rule (as in Python, Lua and
// zr) picks the records: those whose index is a multiple of a stride that
// doubles from 1 until they fit the tier's sample bytes.
func TrainDict(samples [][]byte, tier DictTier) ([]byte, error) {
	db, sb := []uint64{0}, []uint64{0}
	if err := callAs("zrecord.TrainDict", func() int { return zrcore.Zrs_dict_tier_sizes(zrcore.Enum_SS_zrs_dict_tier(tier), db, sb) }); err != nil {
		return nil, err
	}
	sizes := make([]uint64, len(samples))
	n := 0
	for i, r := range samples {
		sizes[i] = uint64(len(r))
		n += len(r)
	}
	joined := make([]byte, 0, n)
	for _, r := range samples {
		joined = append(joined, r...)
	}
	dict := make([]byte, db[0])
	size := []uint64{0}
	if err := callAs("zrecord.TrainDict", func() int { return zrcore.Zr_go_train_dict(joined, sizes, uint64(len(samples)), int(tier), dict, size) }); err != nil {
		return nil, err
	}
	return dict[:size[0]], nil
}

// CreateDenseDict creates a dense store with codec "zstd_dict" and the
// dictionary dict (from TrainDict).
func CreateDenseDict(path, dtype string, itemShape []uint64, dict []byte) (*Store, error) {
	dt, err := dtypeID(dtype)
	if err != nil {
		return nil, err
	}
	out := []uintptr{0}
	if err := callAs("zrecord.CreateDenseDict", func() int {
		return zrcore.Zrs_create_dense_dict(out, path, dt, itemShape, zrcore.ZRE_CODEC_ZSTD_DICT, dict)
	}); err != nil {
		return nil, err
	}
	return wrapStore(out[0]), nil
}

// CreateRaggedDict creates a ragged store with codec "zstd_dict".
func CreateRaggedDict(path, dtype string, dict []byte) (*Store, error) {
	dt, err := dtypeID(dtype)
	if err != nil {
		return nil, err
	}
	out := []uintptr{0}
	if err := callAs("zrecord.CreateRaggedDict", func() int {
		return zrcore.Zrs_create_ragged_dict(out, path, dt, zrcore.ZRE_CODEC_ZSTD_DICT, dict)
	}); err != nil {
		return nil, err
	}
	return wrapStore(out[0]), nil
}
