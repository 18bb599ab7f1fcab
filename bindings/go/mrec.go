package zrecord

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"reflect"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"loaderx.invalid/zrecord/internal/zrcore"
)

// MrecColumn is one column of a molecular record frame: Dtype is a
// collection dtype name ("f64", "i32", "bool", "c128", "string", ...),
// Shape its whole shape (Shape[0] the block's rows). Data holds the
// little-endian bytes of a numeric column; Strings the row-major entries
// of a string column, Null (nil, or one per entry) which entries are null
// (written as JSON null; read back as "" with Null true). Valid is nil
// (every row valid) or one byte 0/1 per row (0: the row is null).
// Precision is an f64 column's declared precision, 0 for none.
type MrecColumn struct {
	Name      string
	Dtype     string
	Shape     []uint64
	Data      []byte
	Strings   []string
	Null      []bool
	Valid     []byte
	Precision float64
}

// MrecBlock is a block of a frame: Count rows, its columns in order, and
// its optional entry fields as JSON text ("" for none): StructuralShape,
// Targets ({column: block}) and Attributes (system frames).
type MrecBlock struct {
	Name            string
	Count           uint64
	Columns         []MrecColumn
	StructuralShape string
	Targets         string
	Attributes      string
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

// MrecBox is a cell in the layout's convention: Vectors is the 3 x 3
// matrix, row-major, whose COLUMNS are the lattice vectors; Origin the
// cell origin; Periodic per axis; CellDefined whether there is a cell (an
// undefined cell is periodic on no axis, its vectors the identity).
type MrecBox struct {
	Vectors     [9]float64
	Origin      [3]float64
	Periodic    [3]bool
	CellDefined bool
}

// MrecFrame is a system frame, a trajectory frame, the index frame or the
// force field, copied out of C. Step and Time are written for trajectory
// frames when HasStep / HasTime (a frame without a step gets the previous
// step + 1). Meta maps keys to values (bool, integers, float64, string,
// []float64, ... or json.RawMessage), each typed by MetaTypes[key] when
// given, else by its Go type (bool, i64, u64, f64, string; json for the
// rest). On read Meta holds the typed-JSON values as json.RawMessage and
// MetaTypes the header's meta_types; Header is the frame header (JSON).
type MrecFrame struct {
	Blocks    []MrecBlock
	Step      int64
	HasStep   bool
	Time      float64
	HasTime   bool
	Box       *MrecBox
	Meta      map[string]any
	MetaTypes map[string]string
	Header    string
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

// MrecRecordInfo is a record's index row.
type MrecRecordInfo struct {
	FirstFrame    uint64
	NFrames       uint64
	NAtoms        uint64
	HasTrajectory bool
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

// RecordInfo is record rec's index row.
func (c *Collection) RecordInfo(rec uint64) (MrecRecordInfo, error) {
	const op = "zrecord.Collection.RecordInfo"
	h, err := c.acquire(op)
	if err != nil {
		return MrecRecordInfo{}, err
	}
	defer c.mu.RUnlock()
	ff, nf, na, tr := []uint64{0}, []uint64{0}, []uint64{0}, []uint64{0}
	err = callAs(op, func() int { return zrcore.Zr_bind_mrec_record_info(h, rec, ff, nf, na, tr) })
	return MrecRecordInfo{FirstFrame: ff[0], NFrames: nf[0], NAtoms: na[0], HasTrajectory: tr[0] != 0}, err
}

// MolrecVersion is collection.molrec_version (1 or 2), 0 when the file
// does not state it.
func (c *Collection) MolrecVersion() int {
	h, err := c.acquire("zrecord.Collection.MolrecVersion")
	if err != nil {
		return 0
	}
	defer c.mu.RUnlock()
	return zrcore.Zmr_molrec_version(h)
}

// System is record rec's system frame, nil (and no error) when it has none.
func (c *Collection) System(rec uint64) (*MrecFrame, error) {
	return c.read("zrecord.Collection.System", "system", rec, 0)
}

// Frame is trajectory frame k of record rec, every block carried forward
// from the record's earlier frames. ErrRange past the end.
func (c *Collection) Frame(rec, k uint64) (*MrecFrame, error) {
	return c.read("zrecord.Collection.Frame", "frame", rec, k)
}

// Update is trajectory update k of record rec as stored: only the blocks
// that changed.
func (c *Collection) Update(rec, k uint64) (*MrecFrame, error) {
	return c.read("zrecord.Collection.Update", "update", rec, k)
}

// FF is the force field frame (its document is Meta), nil when none.
func (c *Collection) FF() (*MrecFrame, error) {
	return c.read("zrecord.Collection.FF", "ff", 0, 0)
}

// Index is the index frame: block "records", the collection's own index
// columns and the binding's four (first_frame, n_frames, n_atoms,
// has_trajectory).
func (c *Collection) Index() (*MrecFrame, error) {
	return c.read("zrecord.Collection.Index", "index", 0, 0)
}

func (c *Collection) read(op, which string, rec, k uint64) (*MrecFrame, error) {
	h, err := c.acquire(op)
	if err != nil {
		return nil, err
	}
	defer c.mu.RUnlock()
	out := []uintptr{0}
	if err := callAs(op, func() int { return zrcore.Zr_bind_mrec_read(h, which, rec, k, out) }); err != nil {
		return nil, err
	}
	if out[0] == 0 {
		return nil, nil
	}
	fh := zrcore.SwigcptrStruct_SS_zmr_frame(out[0])
	defer zrcore.Zmr_frame_free(fh)
	return frameFromC(op, fh)
}

// ValidateCollection checks every rule of the layout over a whole
// collection file (nolock as in OpenCollection): nil, or the first broken
// rule naming the file.
func ValidateCollection(path string, nolock bool) error {
	flags := uint(0)
	if nolock {
		flags = uint(zrcore.ZMR_OPEN_NOLOCK)
	}
	return callAs("zrecord.ValidateCollection", func() int { return zrcore.Zmr_validate(path, flags) })
}

// MrecRoundPrecision is the layout's precision rule on one value (ties to
// even), as the writer applies it to a column with a declared precision.
func MrecRoundPrecision(x, precision float64) float64 {
	return zrcore.Zmr_round_precision(x, precision)
}

// frameHeader is what frameFromC reads of a frame header.
type frameHeader struct {
	Meta      map[string]json.RawMessage `json:"meta"`
	MetaTypes map[string]string          `json:"meta_types"`
	Blocks    map[string]struct {
		StructuralShape json.RawMessage `json:"structural_shape"`
		Targets         json.RawMessage `json:"targets"`
		Attributes      json.RawMessage `json:"attributes"`
	} `json:"blocks"`
}

func frameFromC(op string, f zrcore.Struct_SS_zmr_frame) (*MrecFrame, error) {
	fr := &MrecFrame{Header: zrcore.Zr_bind_mrec_frame_header(f)}
	var hdr frameHeader
	if err := json.Unmarshal([]byte(fr.Header), &hdr); err != nil {
		return nil, opErrorf(op, StatusCorrupt, "frame header: %v", err)
	}
	if len(hdr.Meta) > 0 {
		fr.Meta = map[string]any{}
		for k, v := range hdr.Meta {
			fr.Meta[k] = v
		}
	}
	fr.MetaTypes = hdr.MetaTypes
	flags := zrcore.Zr_bind_mrec_frame_flags(f)
	fr.HasStep, fr.HasTime = flags&1 != 0, flags&2 != 0
	if fr.HasStep {
		fr.Step = zrcore.Zr_bind_mrec_frame_step(f)
	}
	if fr.HasTime {
		fr.Time = zrcore.Zr_bind_mrec_frame_time(f)
	}
	if flags&4 != 0 {
		buf := make([]byte, 96)
		if err := callAs(op, func() int { return zrcore.Zr_bind_mrec_frame_box(f, buf) }); err != nil {
			return nil, err
		}
		box := &MrecBox{CellDefined: flags&8 != 0}
		for k := 0; k < 12; k++ {
			v := math.Float64frombits(binary.LittleEndian.Uint64(buf[8*k:]))
			if k < 9 {
				box.Vectors[k] = v
			} else {
				box.Origin[k-9] = v
			}
		}
		for k := 0; k < 3; k++ {
			box.Periodic[k] = flags&(16<<k) != 0
		}
		fr.Box = box
	}
	for b := int64(0); b < zrcore.Zmr_frame_nblocks(f); b++ {
		blk := MrecBlock{Name: zrcore.Zmr_frame_block_name(f, b), Count: zrcore.Zmr_frame_block_count(f, b)}
		if e, ok := hdr.Blocks[blk.Name]; ok {
			blk.StructuralShape, blk.Targets, blk.Attributes = jsonText(e.StructuralShape), jsonText(e.Targets), jsonText(e.Attributes)
		}
		for c := int64(0); c < zrcore.Zmr_frame_ncolumns(f, b); c++ {
			if err := callAs(op, func() int { return zrcore.Zr_bind_mrec_column_check(f, b, c) }); err != nil {
				return nil, err
			}
			col := MrecColumn{Name: zrcore.Zr_bind_mrec_column_name(f, b, c), Dtype: zrcore.Zr_bind_mrec_column_dtype(f, b, c),
				Precision: zrcore.Zr_bind_mrec_column_precision(f, b, c)}
			for k := int64(0); k < zrcore.Zr_bind_mrec_column_ndim(f, b, c); k++ {
				col.Shape = append(col.Shape, zrcore.Zr_bind_mrec_column_dim(f, b, c, k))
			}
			if col.Dtype == "string" {
				n := zrcore.Zr_bind_mrec_column_nelem(f, b, c)
				col.Strings, col.Null = make([]string, n), make([]bool, n)
				for k := uint64(0); k < n; k++ {
					col.Strings[k] = zrcore.Zr_bind_mrec_column_string(f, b, c, k)
					col.Null[k] = zrcore.Zr_bind_mrec_column_is_null(f, b, c, k) != 0
				}
			} else {
				col.Data = make([]byte, zrcore.Zr_bind_mrec_column_nbytes(f, b, c))
				if err := callAs(op, func() int { return zrcore.Zr_bind_mrec_column_copy(f, b, c, col.Data) }); err != nil {
					return nil, err
				}
			}
			if nv := zrcore.Zr_bind_mrec_column_nvalid(f, b, c); nv > 0 {
				col.Valid = make([]byte, nv)
				if err := callAs(op, func() int { return zrcore.Zr_bind_mrec_column_validity(f, b, c, col.Valid) }); err != nil {
					return nil, err
				}
			}
			blk.Columns = append(blk.Columns, col)
		}
		fr.Blocks = append(fr.Blocks, blk)
	}
	return fr, nil
}

func jsonText(m json.RawMessage) string {
	if len(m) == 0 || string(m) == "null" {
		return ""
	}
	return string(m)
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

// metaValue is a meta value's tag (MetaTypes' when given, else by its Go
// type) and what C takes for it: the text of a string or of JSON (tag
// "json": a string, json.RawMessage, or any value json.Marshal encodes),
// else the values in binary (C writes their typed JSON, the same text
// from every language).
func metaValue(op, key string, v any, tag string) (string, []byte, bool, error) {
	if tag == "" {
		switch v.(type) {
		case bool, []bool:
			tag = "bool"
		case int, int8, int16, int32, int64, uint8, uint16, uint32:
			tag = "i64"
		case uint, uint64:
			tag = "u64"
		case float32, float64:
			tag = "f64"
		case string:
			tag = "string"
		default:
			tag = "json"
		}
	}
	bad := func(format string, args ...any) (string, []byte, bool, error) {
		return "", nil, false, opErrorf(op, StatusInvalid, "meta %s: "+format, append([]any{key}, args...)...)
	}
	if tag == "string" || tag == "json" {
		switch x := v.(type) {
		case string:
			return tag, []byte(x), true, nil
		case json.RawMessage:
			if tag == "json" {
				return tag, x, true, nil
			}
		default:
			if tag == "json" {
				b, err := json.Marshal(x)
				if err != nil {
					return bad("%v", err)
				}
				return tag, b, true, nil
			}
		}
		return bad("tag string needs a Go string, got %T", v)
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		rv = reflect.ValueOf([]any{v})
	}
	var out []byte
	for i := 0; i < rv.Len(); i++ {
		e := reflect.Indirect(rv.Index(i))
		if e.Kind() == reflect.Interface {
			e = e.Elem()
		}
		switch {
		case e.Kind() == reflect.Bool:
			if tag[0] != 'b' {
				return bad("element %d is a bool, the tag is %s", i, tag)
			}
			out = append(out, map[bool]byte{false: 0, true: 1}[e.Bool()])
		case tag[0] == 'b':
			return bad("element %d is a %s, the tag is %s", i, e.Kind(), tag)
		case e.CanFloat() && tag[0] == 'f':
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(e.Float()))
		case e.CanInt() && tag[0] == 'f':
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(float64(e.Int())))
		case e.CanUint() && tag[0] == 'f':
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(float64(e.Uint())))
		case e.CanInt():
			out = binary.LittleEndian.AppendUint64(out, uint64(e.Int()))
		case e.CanUint():
			out = binary.LittleEndian.AppendUint64(out, e.Uint())
		default:
			return bad("element %d is a %s, not a %s value (integers are not rounded from reals)", i, e.Kind(), tag)
		}
	}
	return tag, out, false, nil
}

// stringEntries packs a string column for the shared glue: per entry a
// u32 little-endian length and the bytes, or 0xFFFFFFFF for a null one.
func stringEntries(c *MrecColumn) []byte {
	var out []byte
	for k, s := range c.Strings {
		if k < len(c.Null) && c.Null[k] {
			out = binary.LittleEndian.AppendUint32(out, 0xFFFFFFFF)
			continue
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(len(s)))
		out = append(out, s...)
	}
	return out
}

// cFrame builds a C frame of kind ("system", "update", "index", "ff") from
// f; the caller frees it. document is the force field's JSON ("ff" only).
func cFrame(op, kind string, f *MrecFrame, document string) (zrcore.Struct_SS_zmr_frame, error) {
	out := []uintptr{0}
	if err := callAs(op, func() int { return zrcore.Zr_bind_mrec_frame_create(out, kind) }); err != nil {
		return nil, err
	}
	fh := zrcore.SwigcptrStruct_SS_zmr_frame(out[0])
	do := func(c func() int) error { return callAs(op, c) }
	err := func() error {
		if f.HasStep {
			if err := do(func() int { return zrcore.Zmr_frame_set_step(fh, f.Step) }); err != nil {
				return err
			}
		}
		if f.HasTime {
			if err := do(func() int { return zrcore.Zmr_frame_set_time(fh, f.Time) }); err != nil {
				return err
			}
		}
		if bx := f.Box; bx != nil {
			buf := make([]byte, 0, 96)
			for _, v := range append(bx.Vectors[:], bx.Origin[:]...) {
				buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(v))
			}
			per, def := uint(0), uint(0)
			for k, p := range bx.Periodic {
				if p {
					per |= 1 << k
				}
			}
			if bx.CellDefined {
				def = 1
			}
			if err := do(func() int { return zrcore.Zr_bind_mrec_set_box(fh, buf, per, def) }); err != nil {
				return err
			}
		}
		for _, b := range f.Blocks {
			if err := do(func() int { return zrcore.Zmr_frame_add_block(fh, b.Name, b.Count) }); err != nil {
				return err
			}
			for field, v := range map[string]string{"structural_shape": b.StructuralShape, "targets": b.Targets, "attributes": b.Attributes} {
				if v != "" {
					if err := do(func() int { return zrcore.Zmr_frame_set_block_json(fh, b.Name, field, v) }); err != nil {
						return err
					}
				}
			}
			for _, c := range b.Columns {
				valid := c.Valid
				if len(valid) == 0 {
					valid = nil
				}
				var err error
				if c.Dtype == "string" {
					err = do(func() int {
						return zrcore.Zr_bind_mrec_add_string_column(fh, b.Name, c.Name, c.Shape, stringEntries(&c), valid)
					})
				} else {
					err = do(func() int {
						return zrcore.Zr_bind_mrec_add_column(fh, b.Name, c.Name, c.Dtype, c.Shape, c.Data, valid, c.Precision)
					})
				}
				if err != nil {
					return err
				}
			}
		}
		if kind == "ff" {
			if document != "" {
				return do(func() int { return zrcore.Zmr_frame_set_meta_document(fh, document) })
			}
			return nil
		}
		keys := make([]string, 0, len(f.Meta))
		for k := range f.Meta {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			tag, b, text, err := metaValue(op, k, f.Meta[k], f.MetaTypes[k])
			if err != nil {
				return err
			}
			switch {
			case tag == "string":
				err = do(func() int { return zrcore.Zr_bind_mrec_set_meta_text(fh, k, b) })
			case text:
				err = do(func() int { return zrcore.Zr_bind_mrec_set_meta(fh, k, tag, string(b)) })
			default:
				err = do(func() int { return zrcore.Zr_bind_mrec_set_meta_values(fh, k, tag, b) })
			}
			if err != nil {
				return err
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

// withFrame runs call with a C frame of kind built from f, then frees it.
func (w *CollectionWriter) withFrame(op, kind string, f *MrecFrame, document string,
	call func(zrcore.Struct_SS_zmr_writer, zrcore.Struct_SS_zmr_frame) int) error {
	h, err := w.handle(op)
	if err != nil {
		return err
	}
	fh, err := cFrame(op, kind, f, document)
	if err != nil {
		return err
	}
	defer zrcore.Zmr_frame_free(fh)
	return callAs(op, func() int { return call(h, fh) })
}

// SetFF writes the force field, at most once: document its JSON text (an
// object), blocks optional frame blocks.
func (w *CollectionWriter) SetFF(document string, blocks []MrecBlock) error {
	return w.withFrame("zrecord.CollectionWriter.SetFF", "ff", &MrecFrame{Blocks: blocks}, document,
		func(h zrcore.Struct_SS_zmr_writer, f zrcore.Struct_SS_zmr_frame) int {
			return zrcore.Zmr_writer_set_ff(h, f)
		})
}

// SetIndex sets the collection's own index columns: a block (its name
// is "records" whatever it says) with one row per record, checked at
// Commit. The binding's names (first_frame, n_frames, n_atoms,
// has_trajectory) are refused.
func (w *CollectionWriter) SetIndex(block MrecBlock) error {
	block.Name = "records"
	return w.withFrame("zrecord.CollectionWriter.SetIndex", "index", &MrecFrame{Blocks: []MrecBlock{block}}, "",
		func(h zrcore.Struct_SS_zmr_writer, f zrcore.Struct_SS_zmr_frame) int {
			return zrcore.Zmr_writer_set_index(h, f)
		})
}

// BeginTrajectory marks the current record as having a trajectory, also
// when no frame follows (a trajectory of zero frames).
func (w *CollectionWriter) BeginTrajectory() error {
	const op = "zrecord.CollectionWriter.BeginTrajectory"
	h, err := w.handle(op)
	if err != nil {
		return err
	}
	return callAs(op, func() int { return zrcore.Zmr_writer_begin_trajectory(h) })
}

// BeginRecord starts the next record: metaJSON its meta document ("" for
// {}), system its system frame or nil.
func (w *CollectionWriter) BeginRecord(metaJSON string, system *MrecFrame) error {
	const op = "zrecord.CollectionWriter.BeginRecord"
	if system == nil {
		h, err := w.handle(op)
		if err != nil {
			return err
		}
		return callAs(op, func() int {
			return zrcore.Zr_bind_mrec_begin_record(h, metaJSON, zrcore.SwigcptrStruct_SS_zmr_frame(0))
		})
	}
	return w.withFrame(op, "system", system, "", func(h zrcore.Struct_SS_zmr_writer, f zrcore.Struct_SS_zmr_frame) int {
		return zrcore.Zr_bind_mrec_begin_record(h, metaJSON, f)
	})
}

// AddFrame appends a trajectory frame to the current record.
func (w *CollectionWriter) AddFrame(frame *MrecFrame) error {
	return w.withFrame("zrecord.CollectionWriter.AddFrame", "update", frame, "",
		func(h zrcore.Struct_SS_zmr_writer, f zrcore.Struct_SS_zmr_frame) int {
			return zrcore.Zmr_writer_add_frame(h, f)
		})
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

// ------------------------------------------ collections as loader streams

// MrecOptions selects what MrecStreams and MrecToStores read of a
// collection: Block (default "atoms"), Columns (default x, y, z: one
// column as stored, or several 1-d f64 columns side by side as (n, k)),
// Scalars (default step, pe; nil for the default, an empty non-nil slice
// for none), ExcludeSystems (leave out records without frames), NoLock
// (as OpenCollection) and Codec for MrecToStores ("zstd" default, "raw",
// "auto").
type MrecOptions struct {
	Block          string
	Columns        []string
	Scalars        []string
	ExcludeSystems bool
	NoLock         bool
	Codec          string
}

// mrecHandle owns one C item source (zr_bind_mrec_source), shared by the
// streams of one MrecStreams call. A loader reading it holds it in C, so
// closing it under a loader frees nothing the loader uses (the loader's
// Next then fails with ErrClosed naming the collection).
type mrecHandle struct {
	mu   sync.RWMutex // read: any call; write: close
	h    zrcore.Struct_SS_zr_bind_mrec_source
	path string
	refs int32 // streams not yet finalized
}

func openMrecSource(op, path string, o MrecOptions) (*mrecHandle, error) {
	block := o.Block
	if block == "" {
		block = "atoms"
	}
	cols := o.Columns
	if len(cols) == 0 {
		cols = []string{"x", "y", "z"}
	}
	columns := ""
	for i, c := range cols {
		if i > 0 {
			columns += ","
		}
		columns += c
	}
	scalars := o.Scalars
	if scalars == nil {
		scalars = []string{"step", "pe"}
	}
	set := zrcore.Zr_bind_set_new()
	defer zrcore.Zr_bind_set_free(set)
	for _, s := range scalars {
		s := s
		if err := callAs(op, func() int { return zrcore.Zr_bind_set_add_path(set, s) }); err != nil {
			return nil, err
		}
	}
	flags := uint(0)
	if o.NoLock {
		flags = uint(zrcore.ZMR_OPEN_NOLOCK)
	}
	incl := 1
	if o.ExcludeSystems {
		incl = 0
	}
	out := []uintptr{0}
	if err := callAs(op, func() int {
		return zrcore.Zr_bind_mrec_source_open(out, path, flags, block, columns, set, incl)
	}); err != nil {
		return nil, err
	}
	return &mrecHandle{h: zrcore.SwigcptrStruct_SS_zr_bind_mrec_source(out[0]), path: path}, nil
}

// close lets go of the source (the library frees it once no loader reads
// it). Idempotent.
func (mh *mrecHandle) close() {
	mh.mu.Lock()
	h := mh.h
	mh.h = nil
	mh.mu.Unlock()
	if h != nil {
		zrcore.Zr_bind_mrec_source_free(h)
	}
}

// MrecStream is one stream of a collection read straight from LMDB (see
// MrecStreams). A Loader takes it anywhere it takes a store (NewLoaderOf);
// Flip does not apply to it.
type MrecStream struct {
	in    *mrecHandle
	which int
	name  string
	kind  Kind
	dtype string
	n     uint64
}

// MrecStreams opens a collection as loader streams read directly from
// LMDB, no conversion: "positions" (ragged f64, one (n_atoms, 3) record
// per frame), "record" (dense u64), "step" (dense i64, -1 for none) and
// every other scalar (dense f64, NaN for none), item for item the stores
// MrecToStores writes, so a Loader with the same seed gives the same
// batches over either. The streams share one source: closing any of them
// closes all; a Loader reading them keeps the source until it is closed,
// and its Next fails with ErrClosed naming the collection. ErrInvalid for
// a collection of no items.
func MrecStreams(path string, o MrecOptions) (map[string]*MrecStream, error) {
	const op = "zrecord.MrecStreams"
	mh, err := openMrecSource(op, path, o)
	if err != nil {
		return nil, err
	}
	n := zrcore.Zr_bind_mrec_source_length(mh.h)
	if n == 0 {
		mh.close()
		return nil, opErrorf(op, StatusInvalid, "%s: no frames (and no system holding the column) to stream", path)
	}
	out := map[string]*MrecStream{}
	dtypes := map[string]string{"f64": "<f8", "u64": "<u8", "i64": "<i8"}
	for k := 0; k < int(zrcore.Zr_bind_mrec_source_nstreams(mh.h)); k++ {
		st := &MrecStream{in: mh, which: k, name: zrcore.Zr_bind_mrec_source_stream_name(mh.h, int64(k)),
			kind: Dense, dtype: dtypes[zrcore.Zr_bind_mrec_source_stream_dtype(mh.h, int64(k))], n: n}
		if k == 0 {
			st.kind = Ragged
		}
		out[st.name] = st
	}
	// the GC never frees C handles itself: the last stream dropped closes
	// the source (a Loader keeps the streams it reads reachable)
	mh.refs = int32(len(out))
	for _, st := range out {
		runtime.SetFinalizer(st, func(s *MrecStream) {
			if atomic.AddInt32(&s.in.refs, -1) == 0 {
				s.in.close()
			}
		})
	}
	return out, nil
}

func (s *MrecStream) Name() string  { return s.name }
func (s *MrecStream) Kind() Kind    { return s.kind }
func (s *MrecStream) Dtype() string { return s.dtype }

// Len is the number of items (0 once closed).
func (s *MrecStream) Len() uint64 {
	s.in.mu.RLock()
	defer s.in.mu.RUnlock()
	if s.in.h == nil {
		return 0
	}
	return s.n
}

// Closed tells whether the streams were closed.
func (s *MrecStream) Closed() bool {
	s.in.mu.RLock()
	defer s.in.mu.RUnlock()
	return s.in.h == nil
}

// Close closes every stream of its MrecStreams call, and the loaders
// reading them first. Idempotent.
func (s *MrecStream) Close() { s.in.close() }

func (s *MrecStream) source() streamSource { return s }

func (s *MrecStream) acquire(what string, set zrcore.Struct_SS_zr_bind_set) (zrcore.Struct_SS_zrs_store, Kind, error) {
	s.in.mu.RLock()
	if s.in.h == nil {
		s.in.mu.RUnlock()
		return nil, 0, errorf(StatusClosed, "%s: mrec stream %s of %s is closed", what, s.name, s.in.path)
	}
	if err := call(func() int { return zrcore.Zr_bind_set_add_mrec(set, s.in.h, int64(s.which)) }); err != nil {
		s.in.mu.RUnlock()
		return nil, 0, err
	}
	return nil, s.kind, nil
}

func (s *MrecStream) release() { s.in.mu.RUnlock() }

// MrecToStores converts a collection into stores under outDir (made if
// missing): "positions" (ragged f64), "record" (dense u64) and one dense
// store per scalar, the items MrecStreams reads, and opens them. The
// stores are written under <name>.partial and renamed only once all are
// complete: on an error (a missing column, an unwritable directory, a
// store that exists) none is at its name.
func MrecToStores(path, outDir string, o MrecOptions) (map[string]*Store, error) {
	const op = "zrecord.MrecToStores"
	mh, err := openMrecSource(op, path, o)
	if err != nil {
		return nil, err
	}
	defer mh.close()
	codec := o.Codec
	if codec == "" {
		codec = "zstd"
	}
	if err := callAs(op, func() int { return zrcore.Zr_bind_mrec_to_stores(mh.h, outDir, codec) }); err != nil {
		return nil, err
	}
	out := map[string]*Store{}
	for k := 0; k < int(zrcore.Zr_bind_mrec_source_nstreams(mh.h)); k++ {
		name := zrcore.Zr_bind_mrec_source_stream_name(mh.h, int64(k))
		s, err := Open(outDir + "/" + name)
		if err != nil {
			for _, t := range out {
				t.Close()
			}
			return nil, err
		}
		out[name] = s
	}
	return out, nil
}
