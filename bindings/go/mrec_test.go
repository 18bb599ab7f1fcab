package zrecord

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func f64Bytes(v ...float64) []byte {
	b := make([]byte, 8*len(v))
	for k, x := range v {
		binary.LittleEndian.PutUint64(b[8*k:], math.Float64bits(x))
	}
	return b
}

func i32Bytes(v ...int32) []byte {
	b := make([]byte, 4*len(v))
	for k, x := range v {
		binary.LittleEndian.PutUint32(b[4*k:], uint32(x))
	}
	return b
}

var mrecX = f64Bytes(0.5, -1.25, 3.0)
var mrecPairs = i32Bytes(8, 1, 1, 2, 3, 4)

func mrecCoords(k int) []byte {
	v := make([]float64, 9)
	for i := range v {
		v[i] = 10*float64(k) + float64(i)/4
	}
	return f64Bytes(v...)
}

// Two records: a system of three atoms with a trajectory of two frames,
// then a system alone (the Lua suite's collection).
func writeCollection(t *testing.T, path string) {
	t.Helper()
	w, err := CreateCollection(path, `{"units": {"length": "angstrom"}}`, "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	sys := &MrecFrame{Blocks: []MrecBlock{{Name: "atoms", Count: 3, Columns: []MrecColumn{
		{Name: "x", Dtype: "f64", Shape: []uint64{3}, Data: mrecX},
		{Name: "pairs", Dtype: "i32", Shape: []uint64{3, 2}, Data: mrecPairs},
	}}}}
	if err := w.BeginRecord(`{"name": "water", "charge": 0}`, sys); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 2; k++ {
		f := &MrecFrame{Step: int64(10 * (k + 1)), HasStep: true, Blocks: []MrecBlock{{Name: "coords", Count: 3,
			Columns: []MrecColumn{{Name: "pos", Dtype: "f64", Shape: []uint64{3, 3}, Data: mrecCoords(k)}}}}}
		if err := w.AddFrame(f); err != nil {
			t.Fatal(err)
		}
	}
	one := &MrecFrame{Blocks: []MrecBlock{{Name: "atoms", Count: 1, Columns: []MrecColumn{
		{Name: "x", Dtype: "f64", Shape: []uint64{1}, Data: f64Bytes(7)}}}}}
	if err := w.BeginRecord("", one); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

func TestMrecWriteThenReadBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.mrec.lmdb")
	writeCollection(t, path)
	c, err := OpenCollection(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Len() != 2 || c.NFrames() != 2 {
		t.Fatalf("records %d frames %d, want 2 and 2", c.Len(), c.NFrames())
	}
	if m, err := c.MetaJSON(); err != nil || !strings.Contains(m, `"angstrom"`) {
		t.Fatalf("collection document %q, %v", m, err)
	}
	if m, err := c.RecordMeta(0); err != nil || !strings.Contains(m, `"water"`) {
		t.Fatalf("record 0 meta %q, %v", m, err)
	}
	if ri, err := c.RecordInfo(0); err != nil || ri.NFrames != 2 || ri.NAtoms != 3 || !ri.HasTrajectory || ri.FirstFrame != 0 {
		t.Fatalf("record 0 info %+v, %v", ri, err)
	}
	s, err := c.System(0)
	if err != nil {
		t.Fatal(err)
	}
	atoms := s.Block("atoms")
	if atoms == nil || atoms.Count != 3 || len(atoms.Columns) != 2 || atoms.Columns[0].Name != "x" {
		t.Fatalf("atoms block %+v", atoms)
	}
	x, pairs := atoms.Column("x"), atoms.Column("pairs")
	if x.Dtype != "f64" || len(x.Shape) != 1 || !bytes.Equal(x.Data, mrecX) {
		t.Fatalf("x %+v", x)
	}
	if pairs.Dtype != "i32" || len(pairs.Shape) != 2 || pairs.Shape[0] != 3 || pairs.Shape[1] != 2 ||
		!bytes.Equal(pairs.Data, mrecPairs) {
		t.Fatalf("pairs %+v", pairs)
	}
	for k := 0; k < 2; k++ {
		f, err := c.Frame(0, uint64(k))
		if err != nil {
			t.Fatal(err)
		}
		pos := f.Block("coords").Column("pos")
		if !bytes.Equal(pos.Data, mrecCoords(k)) || pos.Shape[1] != 3 {
			t.Fatalf("frame %d pos %+v", k, pos)
		}
	}
	if _, err := c.Frame(0, 2); !errors.Is(err, ErrRange) {
		t.Fatalf("frame past the end: %v, want ErrRange", err)
	}
	if _, err := c.System(2); !errors.Is(err, ErrRange) {
		t.Fatalf("record past the end: %v, want ErrRange", err)
	}
	c.Close()
	if _, err := c.RecordMeta(0); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
}

func TestMrecLongRecordMetaReadsWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.mrec.lmdb")
	note := strings.Repeat("abcdefghij", 100)
	w, err := CreateCollection(path, "", "")
	if err != nil {
		t.Fatal(err)
	}
	one := &MrecFrame{Blocks: []MrecBlock{{Name: "atoms", Count: 1, Columns: []MrecColumn{
		{Name: "x", Dtype: "f64", Shape: []uint64{1}, Data: f64Bytes(1)}}}}}
	if err := w.BeginRecord(`{"note": "`+note+`"}`, one); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	c, err := OpenCollection(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m, err := c.RecordMeta(0)
	if err != nil || len(m) <= 1000 || !strings.Contains(m, `"`+note+`"`) || !strings.HasSuffix(m, "}") {
		t.Fatalf("long meta %q, %v", m, err)
	}
}

func TestMrecCreateRefusesExistingPathAndBadColumns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "e.mrec.lmdb")
	writeCollection(t, path)
	if _, err := CreateCollection(path, "", ""); !errors.Is(err, ErrExist) {
		t.Fatalf("create over a collection: %v, want ErrExist", err)
	}
	w, err := CreateCollection(filepath.Join(t.TempDir(), "b.mrec.lmdb"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	bad := &MrecFrame{Blocks: []MrecBlock{{Name: "atoms", Count: 1, Columns: []MrecColumn{
		{Name: "x", Dtype: "f32", Shape: []uint64{1}, Data: []byte("abcd")}}}}}
	if err := w.BeginRecord("", bad); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "f32") {
		t.Fatalf("f32 column: %v, want ErrInvalid naming f32", err)
	}
	short := &MrecFrame{Blocks: []MrecBlock{{Name: "atoms", Count: 2, Columns: []MrecColumn{
		{Name: "x", Dtype: "f64", Shape: []uint64{2}, Data: f64Bytes(1)}}}}}
	if err := w.BeginRecord("", short); !errors.Is(err, ErrInvalid) {
		t.Fatalf("8 bytes for 2 f64: %v, want ErrInvalid", err)
	}
}

func TestMrecMissingJunkAndTruncatedFiles(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenCollection(filepath.Join(dir, "nothing-here"), false); !errors.Is(err, ErrIO) ||
		!strings.Contains(err.Error(), "nothing-here") {
		t.Fatalf("missing file: %v, want ErrIO naming it", err)
	}
	aborted := filepath.Join(dir, "a.mrec.lmdb")
	w, err := CreateCollection(aborted, "", "")
	if err != nil {
		t.Fatal(err)
	}
	one := &MrecFrame{Blocks: []MrecBlock{{Name: "atoms", Count: 1, Columns: []MrecColumn{
		{Name: "x", Dtype: "f64", Shape: []uint64{1}, Data: f64Bytes(1)}}}}}
	if err := w.BeginRecord(`{"i": 1}`, one); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	if _, err := OpenCollection(aborted, false); !errors.Is(err, ErrNotStore) || !strings.Contains(err.Error(), "meta") {
		t.Fatalf("never committed: %v, want ErrNotStore naming meta", err)
	}
	junk := filepath.Join(dir, "junk")
	if err := os.WriteFile(junk, make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenCollection(junk, false); !errors.Is(err, ErrNotStore) {
		t.Fatalf("zeros: %v, want ErrNotStore", err)
	}
	src := filepath.Join(dir, "t.mrec.lmdb")
	writeCollection(t, src)
	data, err := os.ReadFile(src)
	if err != nil || len(data) <= 8192 {
		t.Fatalf("collection of %d bytes, %v", len(data), err)
	}
	cut := filepath.Join(dir, "cut.mrec.lmdb")
	if err := os.WriteFile(cut, data[:8292], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenCollection(cut, false); !errors.Is(err, ErrCorrupt) ||
		!strings.Contains(err.Error(), "file truncated: 8292 bytes") {
		t.Fatalf("truncated: %v, want ErrCorrupt 'file truncated: 8292 bytes'", err)
	}
}

// A collection and a writer dropped without Close / Abort are released by
// their finalizers: the GC runs them without a crash, and an abandoned
// writer leaves no collection behind (its file is not one).
func TestMrecFinalizersReleaseDroppedHandles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.mrec")
	writeCollection(t, good)
	for i := 0; i < 4; i++ {
		c, err := OpenCollection(good, false)
		if err != nil {
			t.Fatal(err)
		}
		if c.Len() != 2 {
			t.Fatalf("Len %d", c.Len())
		}
	}
	dropped := filepath.Join(dir, "dropped.mrec")
	if _, err := CreateCollection(dropped, "", ""); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if c, err := OpenCollection(dropped, false); err == nil {
		c.Close()
		t.Fatal("an abandoned writer's file opened as a collection")
	}
	c, err := OpenCollection(good, false)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// Every kind of content the layout holds (the Lua suite's
// every_kind_of_content_round_trips; tests/cross/run.sh checks the bytes
// against Python's writer).
const mrecSchema = `{"blocks":{"coords":{"columns":{"pos":{"dtype":"f64","trailing":[3]}}}},` +
	`"meta":{"energy":{"dtype":"f64","fill":0.0}}}`

func writeFullCollection(t *testing.T, path string) {
	t.Helper()
	w, err := CreateCollection(path, `{"units":{"length":"angstrom"}}`, mrecSchema)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.SetFF(`{"kind":"lj","eps":0.5}`, nil); err != nil {
		t.Fatal(err)
	}
	sys := &MrecFrame{
		Meta:      map[string]any{"cell3": []float64{1, 2, 3}, "charge": 0, "label": "w\u00e4ter", "big": uint64(1) << 60},
		MetaTypes: map[string]string{"cell3": "f64x3"},
		Box: &MrecBox{Vectors: [9]float64{10, 0, 0, 0, 11, 0, 0, 0, 12}, Origin: [3]float64{0.5, 0, -0.5},
			Periodic: [3]bool{true, true, false}, CellDefined: true},
		Blocks: []MrecBlock{{Name: "atoms", Count: 3, Attributes: `{"note":"water"}`, Columns: []MrecColumn{
			{Name: "element", Dtype: "string", Shape: []uint64{3}, Strings: []string{"O", "H", "H"}},
			{Name: "tag", Dtype: "string", Shape: []uint64{3}, Strings: []string{"a", `b"\`, ""},
				Null: []bool{false, false, true}, Valid: []byte{1, 1, 0}},
			{Name: "x", Dtype: "f64", Shape: []uint64{3}, Data: f64Bytes(0.1, -1.25, 3.0), Precision: math.Ldexp(1, -10)},
			{Name: "charge", Dtype: "f64", Shape: []uint64{3}, Data: f64Bytes(-0.8, 0.4, 0.4), Valid: []byte{1, 0, 1}},
		}}},
	}
	if err := w.BeginRecord(`{"name":"water"}`, sys); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 2; k++ {
		f := &MrecFrame{Step: int64(10 * (k + 1)), HasStep: true, Time: 0.5 * float64(k+1), HasTime: true,
			Meta: map[string]any{"energy": -1.5 * float64(k+1)},
			Blocks: []MrecBlock{{Name: "coords", Count: 3,
				Columns: []MrecColumn{{Name: "pos", Dtype: "f64", Shape: []uint64{3, 3}, Data: mrecCoords(k)}}}}}
		if err := w.AddFrame(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.BeginRecord(`{"i":1}`, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.BeginTrajectory(); err != nil {
		t.Fatal(err)
	}
	if err := w.SetIndex(MrecBlock{Count: 2, Columns: []MrecColumn{{Name: "weight", Dtype: "f64", Shape: []uint64{2}, Data: f64Bytes(1, 2)}}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

func TestMrecEveryKindOfContentRoundTrips(t *testing.T) {
	path := filepath.Join(t.TempDir(), "full.mrec.lmdb")
	writeFullCollection(t, path)
	if err := ValidateCollection(path, false); err != nil {
		t.Fatal(err)
	}
	c, err := OpenCollection(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v := c.MolrecVersion(); v != 2 {
		t.Fatalf("molrec_version %d", v)
	}
	s, err := c.System(0)
	if err != nil {
		t.Fatal(err)
	}
	atoms := s.Block("atoms")
	tag := atoms.Column("tag")
	if tag.Strings[1] != `b"\` || !tag.Null[2] || tag.Null[1] || !bytes.Equal(tag.Valid, []byte{1, 1, 0}) {
		t.Fatalf("tag column %+v", tag)
	}
	if ch := atoms.Column("charge"); !bytes.Equal(ch.Valid, []byte{1, 0, 1}) || !bytes.Equal(ch.Data, f64Bytes(-0.8, 0.4, 0.4)) {
		t.Fatalf("charge column %+v", ch)
	}
	if x := atoms.Column("x"); x.Precision != math.Ldexp(1, -10) || !bytes.Equal(x.Data, f64Bytes(0.099609375, -1.25, 3.0)) {
		t.Fatalf("x column %+v", x)
	}
	if r := MrecRoundPrecision(0.1, math.Ldexp(1, -10)); r != 0.099609375 {
		t.Fatalf("round_precision(0.1) = %v", r)
	}
	if atoms.Column("element").Valid != nil || atoms.Attributes != `{"note":"water"}` {
		t.Fatalf("element mask %v, attributes %q", atoms.Column("element").Valid, atoms.Attributes)
	}
	if b := s.Box; b == nil || b.Vectors[4] != 11 || b.Origin[2] != -0.5 || b.Periodic != [3]bool{true, true, false} || !b.CellDefined {
		t.Fatalf("box %+v", s.Box)
	}
	if fmt := string(s.Meta["cell3"].(json.RawMessage)); fmt != "[1.0,2.0,3.0]" {
		t.Fatalf("cell3 written as %s, Python writes [1.0,2.0,3.0]", fmt)
	}
	if big := string(s.Meta["big"].(json.RawMessage)); big != `"1152921504606846976"` || s.MetaTypes["big"] != "u64" {
		t.Fatalf("big written as %s (%s)", big, s.MetaTypes["big"])
	}
	f, err := c.Frame(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !f.HasStep || f.Step != 20 || !f.HasTime || f.Time != 1.0 || string(f.Meta["energy"].(json.RawMessage)) != "-3.0" {
		t.Fatalf("frame 1: step %d time %v meta %s", f.Step, f.Time, f.Header)
	}
	if u, err := c.Update(0, 1); err != nil || !bytes.Equal(u.Block("coords").Column("pos").Data, mrecCoords(1)) {
		t.Fatalf("update 1: %v", err)
	}
	if ff, err := c.FF(); err != nil || string(ff.Meta["kind"].(json.RawMessage)) != `"lj"` {
		t.Fatalf("force field %+v, %v", ff, err)
	}
	idx, err := c.Index()
	if err != nil || !bytes.Equal(idx.Block("records").Column("weight").Data, f64Bytes(1, 2)) {
		t.Fatalf("index %v", err)
	}
	if ri, err := c.RecordInfo(1); err != nil || ri != (MrecRecordInfo{FirstFrame: 2, NFrames: 0, NAtoms: 0, HasTrajectory: true}) {
		t.Fatalf("record 1 %+v, %v", ri, err)
	}
}

func TestMrecBadContentGivesNamedErrors(t *testing.T) {
	dir := t.TempDir()
	w, err := CreateCollection(filepath.Join(dir, "bad.mrec.lmdb"), "", mrecSchema)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	one := func(c MrecColumn, rows uint64) error {
		return w.BeginRecord("", &MrecFrame{Blocks: []MrecBlock{{Name: "atoms", Count: rows, Columns: []MrecColumn{c}}}})
	}
	cases := []struct {
		err  error
		want string
	}{
		{one(MrecColumn{Name: "x", Dtype: "f64", Shape: []uint64{2}, Data: f64Bytes(1)}, 2), "atoms/x"},
		{one(MrecColumn{Name: "x", Dtype: "f32", Shape: []uint64{2}, Data: make([]byte, 8)}, 2), "f32"},
		{one(MrecColumn{Name: "s", Dtype: "string", Shape: []uint64{2}, Strings: []string{"ok", "\xff"}}, 2), "atoms/s: entry 1 is not UTF-8 text"},
		{one(MrecColumn{Name: "s", Dtype: "string", Shape: []uint64{2}, Strings: []string{"ok", "a\x00b"}}, 2), "entry 1 is not UTF-8 text"},
		{one(MrecColumn{Name: "s", Dtype: "string", Shape: []uint64{2}, Strings: []string{"a"}}, 2), "the shape holds 2 strings"},
		{one(MrecColumn{Name: "x", Dtype: "f64", Shape: []uint64{2}, Data: f64Bytes(1, 2), Valid: []byte{1, 1, 1}}, 2), "validity has 3 bytes, the column has 2 rows"},
		{one(MrecColumn{Name: "x", Dtype: "f64", Shape: []uint64{2}, Data: f64Bytes(1, 2), Valid: []byte{1, 2}}, 2), "validity byte 1 is 2"},
		{w.BeginRecord("", &MrecFrame{Meta: map[string]any{"cell3": []float64{1, 2}}, MetaTypes: map[string]string{"cell3": "f64x3"}}), "cell3"},
		{w.BeginRecord("", &MrecFrame{Meta: map[string]any{"n": 1.5}, MetaTypes: map[string]string{"n": "i64"}}), "not a i64 value"},
		{w.BeginRecord("", &MrecFrame{Meta: map[string]any{"label": "\xc3"}}), "not UTF-8"},
		{w.BeginRecord("", &MrecFrame{Box: &MrecBox{Periodic: [3]bool{true, false, false}}}), "periodic"},
	}
	for k, c := range cases {
		if !errors.Is(c.err, ErrInvalid) || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("case %d: %v, want ErrInvalid naming %q", k, c.err, c.want)
		}
	}
	if err := w.BeginRecord("", &MrecFrame{Blocks: []MrecBlock{{Name: "atoms", Count: 1, Columns: []MrecColumn{
		{Name: "x", Dtype: "f64", Shape: []uint64{1}, Data: f64Bytes(1)}}}}}); err != nil {
		t.Fatal(err)
	}
	err = w.AddFrame(&MrecFrame{Meta: map[string]any{"other": 1.0}, Blocks: []MrecBlock{{Name: "coords", Count: 1,
		Columns: []MrecColumn{{Name: "pos", Dtype: "f64", Shape: []uint64{1, 3}, Data: f64Bytes(1, 2, 3)}}}}})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "meta key 'other' is not declared") {
		t.Fatalf("undeclared update meta: %v", err)
	}
}

func TestMrecValidateNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "v.mrec.lmdb")
	w, err := CreateCollection(p, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.BeginRecord("", &MrecFrame{Blocks: []MrecBlock{{Name: "atoms", Count: 1, Columns: []MrecColumn{
		{Name: "x", Dtype: "f64", Shape: []uint64{1}, Data: f64Bytes(1)}}}}}); err != nil {
		t.Fatal(err)
	}
	w.Abort() // a writer aborted mid-way leaves no readable collection
	if err := ValidateCollection(p, false); !errors.Is(err, ErrNotStore) || !strings.Contains(err.Error(), p+`: key "meta" is missing`) {
		t.Fatalf("aborted: %v", err)
	}
	if err := ValidateCollection(filepath.Join(dir, "nothing"), false); !errors.Is(err, ErrIO) {
		t.Fatalf("missing: %v", err)
	}
	ok := filepath.Join(dir, "ok.mrec.lmdb")
	writeCollection(t, ok)
	if err := ValidateCollection(ok, false); err != nil {
		t.Fatal(err)
	}
}

// Six records of three frames (frame 1 carries frame 0's atoms forward,
// frame 2 has no pe), then a system-only record holding x y z (the Lua
// and Python suites' shape of collection).
func writeStreamCollection(t *testing.T, path string) {
	t.Helper()
	w, err := CreateCollection(path, "", `{"meta": {"pe": {"dtype": "f64", "fill": "NaN"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	for r := 0; r < 6; r++ {
		n := 2 + r%3
		if err := w.BeginRecord("", nil); err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 3; k++ {
			f := &MrecFrame{Step: int64(10*r + k), HasStep: true}
			if k != 2 {
				f.Meta = map[string]any{"pe": -1.0*float64(k) - float64(r)}
				f.MetaTypes = map[string]string{"pe": "f64"}
			}
			if k != 1 {
				var cols []MrecColumn
				for j, c := range []string{"x", "y", "z"} {
					v := make([]float64, n)
					for a := range v {
						v[a] = float64(r) + float64(k)/10 + float64(j+1) + float64(a+1)/100
					}
					cols = append(cols, MrecColumn{Name: c, Dtype: "f64", Shape: []uint64{uint64(n)}, Data: f64Bytes(v...)})
				}
				f.Blocks = []MrecBlock{{Name: "atoms", Count: uint64(n), Columns: cols}}
			}
			if err := w.AddFrame(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	sys := &MrecFrame{Meta: map[string]any{"pe": 2.5}, Blocks: []MrecBlock{{Name: "atoms", Count: 2, Columns: []MrecColumn{
		{Name: "x", Dtype: "f64", Shape: []uint64{2}, Data: f64Bytes(1, 2)},
		{Name: "y", Dtype: "f64", Shape: []uint64{2}, Data: f64Bytes(3, 4)},
		{Name: "z", Dtype: "f64", Shape: []uint64{2}, Data: f64Bytes(5, 6)}}}}}
	if err := w.BeginRecord("", sys); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

func TestMrecStreamsGiveTheBatchesOfTheConvertedStores(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.mrec.lmdb")
	writeStreamCollection(t, path)
	streams, err := MrecStreams(path, MrecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stores, err := MrecToStores(path, filepath.Join(dir, "z"), MrecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, s := range stores {
			s.Close()
		}
	}()
	names := []string{"positions", "record", "step", "pe"}
	if len(streams) != 4 || len(stores) != 4 || streams["positions"].Len() != 19 || stores["positions"].Len() != 19 {
		t.Fatalf("streams %d, stores %d, items %d", len(streams), len(stores), streams["positions"].Len())
	}
	if streams["step"].Dtype() != "<i8" || streams["positions"].Kind() != Ragged {
		t.Fatalf("step dtype %s, positions kind %v", streams["step"].Dtype(), streams["positions"].Kind())
	}
	a := make([]Source, len(names))
	b := make([]Source, len(names))
	for i, n := range names {
		a[i], b[i] = streams[n], stores[n]
	}
	for _, o := range []LoaderOptions{{BatchSize: 5, Seed: 11}, {BatchSize: 4, Seed: 3, Mode: IID, UseMode: true, NumWorkers: 2}} {
		la, err := NewLoaderOf(a, o)
		if err != nil {
			t.Fatal(err)
		}
		lb, err := NewLoaderOf(b, o)
		if err != nil {
			t.Fatal(err)
		}
		for step := 0; step < 12; step++ {
			x, err1 := la.Next()
			y, err2 := lb.Next()
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if len(x.Indices) != len(y.Indices) {
				t.Fatalf("step %d: batch sizes differ", step)
			}
			for i := range x.Indices {
				if x.Indices[i] != y.Indices[i] {
					t.Fatalf("step %d: indices differ", step)
				}
			}
			for s := range names {
				if !bytes.Equal(x.Data[s], y.Data[s]) || len(x.Records[s]) != len(y.Records[s]) {
					t.Fatalf("step %d: stream %s differs", step, names[s])
				}
				for i := range x.Records[s] {
					if !bytes.Equal(x.Records[s][i].Data, y.Records[s][i].Data) ||
						len(x.Records[s][i].Shape) != len(y.Records[s][i].Shape) {
						t.Fatalf("step %d: %s record %d differs", step, names[s], i)
					}
				}
			}
		}
		la.Close()
		lb.Close()
	}
	// the values: carry-forward, x y z side by side, the system-only item
	whole, err := NewLoaderOf(a, LoaderOptions{BatchSize: 19, Mode: Sequential, UseMode: true})
	if err != nil {
		t.Fatal(err)
	}
	bt, err := whole.Next()
	if err != nil {
		t.Fatal(err)
	}
	whole.Close()
	p := bt.Records[0]
	if !bytes.Equal(p[1].Data, p[0].Data) || len(p[0].Shape) != 2 || p[0].Shape[1] != 3 {
		t.Fatalf("frame 1 does not carry frame 0's atoms: %v %v", p[0].Shape, p[1].Shape)
	}
	pe := math.Float64frombits(binary.LittleEndian.Uint64(bt.Data[3][8*2:]))
	sysPe := math.Float64frombits(binary.LittleEndian.Uint64(bt.Data[3][8*18:]))
	sysStep := int64(binary.LittleEndian.Uint64(bt.Data[2][8*18:]))
	if !math.IsNaN(pe) || sysPe != 2.5 || sysStep != -1 || binary.LittleEndian.Uint64(bt.Data[1][8*18:]) != 6 {
		t.Fatalf("pe %v, system pe %v step %d", pe, sysPe, sysStep)
	}
	// closing a stream closes every stream of the call; a loader reading
	// them holds the source in C and stops with ErrClosed naming it
	l, err := NewLoaderOf(a, LoaderOptions{BatchSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Next(); err != nil {
		t.Fatal(err)
	}
	streams["pe"].Close()
	for i := 0; i < 3; i++ {
		if _, err := l.Next(); !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "mrec source") ||
			!streams["positions"].Closed() || !l.Closed() {
			t.Fatalf("after close: %v", err)
		}
	}
	if _, err := NewLoaderOf(a, LoaderOptions{BatchSize: 3}); !errors.Is(err, ErrClosed) {
		t.Fatalf("a loader over closed streams: %v", err)
	}
}

func TestMrecToStoresFailureLeavesNoStore(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.mrec.lmdb")
	writeStreamCollection(t, path)
	out := filepath.Join(dir, "out")
	_, err := MrecToStores(path, out, MrecOptions{Columns: []string{"x", "q"}})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "atoms/q is missing") {
		t.Fatalf("a missing column: %v", err)
	}
	if names, _ := os.ReadDir(out); len(names) != 0 {
		t.Fatalf("left behind: %v", names)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := MrecToStores(path, filepath.Join(file, "z"), MrecOptions{}); !errors.Is(err, ErrIO) {
		t.Fatalf("an output under a file: %v", err)
	}
	stores, err := MrecToStores(path, out, MrecOptions{Scalars: []string{}})
	if err != nil || len(stores) != 2 {
		t.Fatalf("no scalars: %v %d", err, len(stores))
	}
	for _, s := range stores {
		s.Close()
	}
	if _, err := MrecToStores(path, out, MrecOptions{Scalars: []string{}}); !errors.Is(err, ErrExist) {
		t.Fatalf("an existing store: %v", err)
	}
}
