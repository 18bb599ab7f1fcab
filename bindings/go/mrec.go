package zrecord

import (
	"runtime"
	"sync"

	"loaderx.invalid/zrecord/internal/zrcore"
)

// MrecColumn is one column of a molecular record frame: Dtype is a
// collection dtype name ("f64", "i32", "bool", "c128", "string", ...),
// Shape its whole shape (Shape[0] the block's rows). Data holds the
// little-endian bytes of a numeric column; Strings the row-major entries
// of a string column (a null entry is "").
type MrecColumn struct {
	Name    string
	Dtype   string
	Shape   []uint64
	Data    []byte
	Strings []string
}

// MrecBlock is a block of a frame: Count rows, its columns in order.
type MrecBlock struct {
	Name    string
	Count   uint64
	Columns []MrecColumn
}

// Column returns the column called name, or nil.
func (b *MrecBlock) Column(name string) *MrecColumn {
	for k := range b.Columns {
		if b.Columns[k].Name == name {
			return &b.Columns[k]
		}
	}
	return nil
}

// MrecFrame is a system frame or a trajectory frame, copied out of C.
// Step is written for trajectory frames when HasStep (else the previous
// step + 1).
type MrecFrame struct {
	Blocks  []MrecBlock
	Step    int64
	HasStep bool
}

// Block returns the block called name, or nil.
func (f *MrecFrame) Block(name string) *MrecBlock {
	for k := range f.Blocks {
		if f.Blocks[k].Name == name {
			return &f.Blocks[k]
		}
	}
	return nil
}

// Collection is a molecular record collection (one LMDB file) open for
// reading. Its methods may be called from several goroutines; Close
// waits for calls under way.
type Collection struct {
	mu   sync.RWMutex
	h    zrcore.Struct_SS_zmr_reader
	path string
}

// OpenCollection opens a collection read-only; nolock opens without a lock
// file (read-only media; no writer may run). ErrIO for a missing path,
// ErrNotStore for a file that is not a collection, ErrCorrupt for a
// damaged one.
func OpenCollection(path string, nolock bool) (*Collection, error) {
	out := []uintptr{0}
	flags := uint(0)
	if nolock {
		flags = uint(zrcore.ZMR_OPEN_NOLOCK)
	}
	if err := callAs("zrecord.OpenCollection", func() int { return zrcore.Zmr_open(out, path, flags) }); err != nil {
		return nil, err
	}
	c := &Collection{h: zrcore.SwigcptrStruct_SS_zmr_reader(out[0]), path: path}
	runtime.SetFinalizer(c, (*Collection).Close) // the GC never frees C handles itself
	return c, nil
}

// Path is the path the collection was opened from.
func (c *Collection) Path() string { return c.path }

func (c *Collection) acquire(op string) (zrcore.Struct_SS_zmr_reader, error) {
	c.mu.RLock()
	if c.h == nil {
		c.mu.RUnlock()
		return nil, opErrorf(op, StatusClosed, "collection %s is closed", c.path)
	}
	return c.h, nil
}

// Len is the number of records (0 once closed).
func (c *Collection) Len() uint64 {
	h, err := c.acquire("zrecord.Collection.Len")
	if err != nil {
		return 0
	}
	defer c.mu.RUnlock()
	return zrcore.Zmr_n_records(h)
}

// NFrames is the number of trajectory frames over every record.
func (c *Collection) NFrames() uint64 {
	h, err := c.acquire("zrecord.Collection.NFrames")
	if err != nil {
		return 0
	}
	defer c.mu.RUnlock()
	return zrcore.Zmr_n_frames(h)
}

// MetaJSON is the collection document (JSON text).
func (c *Collection) MetaJSON() (string, error) {
	h, err := c.acquire("zrecord.Collection.MetaJSON")
	if err != nil {
		return "", err
	}
	defer c.mu.RUnlock()
	return zrcore.Zmr_meta_json(h), nil
}

// RecordMeta is record rec's meta document (JSON text).
func (c *Collection) RecordMeta(rec uint64) (string, error) {
	const op = "zrecord.Collection.RecordMeta"
	h, err := c.acquire(op)
	if err != nil {
		return "", err
	}
	defer c.mu.RUnlock()
	buf := make([]byte, 512)
	size := []uint64{0}
	for {
		if err := callAs(op, func() int { return zrcore.Zr_bind_mrec_record_meta(h, rec, buf, size) }); err != nil {
			return "", err
		}
		if size[0] <= uint64(len(buf)) {
			return string(buf[:size[0]]), nil
		}
		buf = make([]byte, size[0])
	}
}

// RecordInfo is record rec's number of trajectory frames and atoms.
func (c *Collection) RecordInfo(rec uint64) (nFrames, nAtoms uint64, err error) {
	const op = "zrecord.Collection.RecordInfo"
	h, err := c.acquire(op)
	if err != nil {
		return 0, 0, err
	}
	defer c.mu.RUnlock()
	nf, na := []uint64{0}, []uint64{0}
	err = callAs(op, func() int { return zrcore.Zr_bind_mrec_record_info(h, rec, nf, na) })
	return nf[0], na[0], err
}

// System is record rec's system frame, nil (and no error) when it has none.
func (c *Collection) System(rec uint64) (*MrecFrame, error) {
	return c.read("zrecord.Collection.System", func(h zrcore.Struct_SS_zmr_reader, out []uintptr) int {
		return zrcore.Zmr_read_system(h, rec, out)
	})
}

// Frame is trajectory frame k of record rec, every block carried forward
// from the record's earlier frames. ErrRange past the end.
func (c *Collection) Frame(rec, k uint64) (*MrecFrame, error) {
	return c.read("zrecord.Collection.Frame", func(h zrcore.Struct_SS_zmr_reader, out []uintptr) int {
		return zrcore.Zmr_read_frame(h, rec, k, out)
	})
}

func (c *Collection) read(op string, f func(zrcore.Struct_SS_zmr_reader, []uintptr) int) (*MrecFrame, error) {
	h, err := c.acquire(op)
	if err != nil {
		return nil, err
	}
	defer c.mu.RUnlock()
	out := []uintptr{0}
	if err := callAs(op, func() int { return f(h, out) }); err != nil {
		return nil, err
	}
	if out[0] == 0 {
		return nil, nil
	}
	fh := zrcore.SwigcptrStruct_SS_zmr_frame(out[0])
	defer zrcore.Zmr_frame_free(fh)
	return frameFromC(op, fh)
}

func frameFromC(op string, f zrcore.Struct_SS_zmr_frame) (*MrecFrame, error) {
	fr := &MrecFrame{}
	for b := int64(0); b < zrcore.Zmr_frame_nblocks(f); b++ {
		blk := MrecBlock{Name: zrcore.Zmr_frame_block_name(f, b), Count: zrcore.Zmr_frame_block_count(f, b)}
		for c := int64(0); c < zrcore.Zmr_frame_ncolumns(f, b); c++ {
			if err := callAs(op, func() int { return zrcore.Zr_bind_mrec_column_check(f, b, c) }); err != nil {
				return nil, err
			}
			col := MrecColumn{Name: zrcore.Zr_bind_mrec_column_name(f, b, c), Dtype: zrcore.Zr_bind_mrec_column_dtype(f, b, c)}
			for k := int64(0); k < zrcore.Zr_bind_mrec_column_ndim(f, b, c); k++ {
				col.Shape = append(col.Shape, zrcore.Zr_bind_mrec_column_dim(f, b, c, k))
			}
			if col.Dtype == "string" {
				n := zrcore.Zr_bind_mrec_column_nelem(f, b, c)
				for k := uint64(0); k < n; k++ {
					col.Strings = append(col.Strings, zrcore.Zr_bind_mrec_column_string(f, b, c, k))
				}
			} else {
				col.Data = make([]byte, zrcore.Zr_bind_mrec_column_nbytes(f, b, c))
				if err := callAs(op, func() int { return zrcore.Zr_bind_mrec_column_copy(f, b, c, col.Data) }); err != nil {
					return nil, err
				}
			}
			blk.Columns = append(blk.Columns, col)
		}
		fr.Blocks = append(fr.Blocks, blk)
	}
	return fr, nil
}

// Close releases the collection; later calls give ErrClosed.
func (c *Collection) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.h != nil {
		zrcore.Zmr_close(c.h)
		c.h = nil
	}
}

// CollectionWriter writes a new collection, one record and frame at a
// time; it is a collection only once Commit returns nil. One goroutine at
// a time.
type CollectionWriter struct {
	h    zrcore.Struct_SS_zmr_writer
	path string
}

// CreateCollection creates a collection at path (ErrExist if the path
// exists). collectionJSON is the collection document ("" for {}),
// schemaJSON the sequence schema ("" for none).
func CreateCollection(path, collectionJSON, schemaJSON string) (*CollectionWriter, error) {
	if collectionJSON == "" {
		collectionJSON = "{}"
	}
	if schemaJSON == "" {
		schemaJSON = "{}"
	}
	out := []uintptr{0}
	if err := callAs("zrecord.CreateCollection", func() int {
		return zrcore.Zmr_writer_create(out, path, collectionJSON, schemaJSON)
	}); err != nil {
		return nil, err
	}
	w := &CollectionWriter{h: zrcore.SwigcptrStruct_SS_zmr_writer(out[0]), path: path}
	runtime.SetFinalizer(w, (*CollectionWriter).Abort) // unreachable and never committed
	return w, nil
}

func (w *CollectionWriter) handle(op string) (zrcore.Struct_SS_zmr_writer, error) {
	if w.h == nil {
		return nil, opErrorf(op, StatusClosed, "collection writer %s is closed", w.path)
	}
	return w.h, nil
}

// cFrame builds a C frame of kind ("system" or "update") from f; the
// caller frees it.
func cFrame(op, kind string, f *MrecFrame) (zrcore.Struct_SS_zmr_frame, error) {
	out := []uintptr{0}
	if err := callAs(op, func() int { return zrcore.Zr_bind_mrec_frame_create(out, kind) }); err != nil {
		return nil, err
	}
	fh := zrcore.SwigcptrStruct_SS_zmr_frame(out[0])
	err := func() error {
		if f.HasStep {
			if err := callAs(op, func() int { return zrcore.Zmr_frame_set_step(fh, f.Step) }); err != nil {
				return err
			}
		}
		for _, b := range f.Blocks {
			if err := callAs(op, func() int { return zrcore.Zmr_frame_add_block(fh, b.Name, b.Count) }); err != nil {
				return err
			}
			for _, c := range b.Columns {
				if err := callAs(op, func() int {
					return zrcore.Zr_bind_mrec_add_column(fh, b.Name, c.Name, c.Dtype, c.Shape, c.Data)
				}); err != nil {
					return err
				}
			}
		}
		return nil
	}()
	if err != nil {
		zrcore.Zmr_frame_free(fh)
		return nil, err
	}
	return fh, nil
}

// BeginRecord starts the next record: metaJSON its meta document ("" for
// {}), system its system frame or nil.
func (w *CollectionWriter) BeginRecord(metaJSON string, system *MrecFrame) error {
	const op = "zrecord.CollectionWriter.BeginRecord"
	h, err := w.handle(op)
	if err != nil {
		return err
	}
	fh := zrcore.SwigcptrStruct_SS_zmr_frame(0)
	if system != nil {
		f, err := cFrame(op, "system", system)
		if err != nil {
			return err
		}
		defer zrcore.Zmr_frame_free(f)
		fh = f.(zrcore.SwigcptrStruct_SS_zmr_frame)
	}
	return callAs(op, func() int { return zrcore.Zr_bind_mrec_begin_record(h, metaJSON, fh) })
}

// AddFrame appends a trajectory frame to the current record.
func (w *CollectionWriter) AddFrame(frame *MrecFrame) error {
	const op = "zrecord.CollectionWriter.AddFrame"
	h, err := w.handle(op)
	if err != nil {
		return err
	}
	f, err := cFrame(op, "update", frame)
	if err != nil {
		return err
	}
	defer zrcore.Zmr_frame_free(f)
	return callAs(op, func() int { return zrcore.Zmr_writer_add_frame(h, f) })
}

// Commit writes the index and the collection document and closes the
// writer, whatever the outcome.
func (w *CollectionWriter) Commit() error {
	const op = "zrecord.CollectionWriter.Commit"
	h, err := w.handle(op)
	if err != nil {
		return err
	}
	w.h = nil
	return callAs(op, func() int { return zrcore.Zmr_writer_commit(h) })
}

// Abort closes the writer without committing (the file is not a
// collection). A no-op after Commit or Abort.
func (w *CollectionWriter) Abort() {
	if w.h != nil {
		zrcore.Zmr_writer_abort(w.h)
		w.h = nil
	}
}
