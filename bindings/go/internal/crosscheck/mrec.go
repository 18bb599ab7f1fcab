package main

import (
	"encoding/binary"
	"math"

	"loaderx.invalid/zrecord"
)

// The mrec part of the cross-language test, Go's side: writes the
// collection tests/cross/mrec_write.py describes (the same content),
// which run.sh compares with Python's byte for byte.

func f64s(v ...float64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

func mrecBox(scale float64) *zrecord.MrecBox {
	return &zrecord.MrecBox{Vectors: [9]float64{10 * scale, 0, 0, 0, 11 * scale, 0, 0, 0, 12 * scale},
		Origin: [3]float64{0.5, 0, -0.5}, Periodic: [3]bool{true, true, false}, CellDefined: true}
}

func writeMrec(path string) error {
	const schema = `{"blocks":{"coords":{"columns":{"pos":{"dtype":"f64","trailing":[3]}}}},` +
		`"meta":{"energy":{"dtype":"f64","fill":0.0}}}`
	w, err := zrecord.CreateCollection(path, `{"units":{"length":"angstrom"}}`, schema)
	if err != nil {
		return err
	}
	defer w.Abort()
	if err := w.SetFF(`{"kind":"lj","eps":0.5}`, nil); err != nil {
		return err
	}
	sys := &zrecord.MrecFrame{
		Meta:      map[string]any{"cell3": []float64{1, 2, 3}, "charge": 0, "label": "w\u00e4ter"},
		MetaTypes: map[string]string{"cell3": "f64x3"},
		Box:       mrecBox(1),
		Blocks: []zrecord.MrecBlock{{Name: "atoms", Count: 3, Attributes: `{"note":"water"}`, Columns: []zrecord.MrecColumn{
			{Name: "element", Dtype: "string", Shape: []uint64{3}, Strings: []string{"O", "H", "H"}},
			{Name: "tag", Dtype: "string", Shape: []uint64{3}, Strings: []string{"a", "b\"\\\u00e9", ""},
				Null: []bool{false, false, true}, Valid: []byte{1, 1, 0}},
			{Name: "x", Dtype: "f64", Shape: []uint64{3}, Data: f64s(0.1, -1.25, 3.0), Precision: math.Ldexp(1, -10)},
			{Name: "charge", Dtype: "f64", Shape: []uint64{3}, Data: f64s(-0.8, 0.4, 0.4), Valid: []byte{1, 0, 1}},
		}}},
	}
	if err := w.BeginRecord(`{"name":"water"}`, sys); err != nil {
		return err
	}
	for k := 0; k < 2; k++ {
		pos := make([]float64, 9)
		for i := range pos {
			pos[i] = float64(i) + 10*float64(k)
		}
		fr := &zrecord.MrecFrame{Step: int64(10 * (k + 1)), HasStep: true, Time: 0.5 * float64(k+1), HasTime: true,
			Box:    mrecBox(1 + float64(k)),
			Meta:   map[string]any{"energy": []float64{-1.5, math.NaN()}[k]},
			Blocks: []zrecord.MrecBlock{{Name: "coords", Count: 3, Columns: []zrecord.MrecColumn{{Name: "pos", Dtype: "f64", Shape: []uint64{3, 3}, Data: f64s(pos...)}}}}}
		if err := w.AddFrame(fr); err != nil {
			return err
		}
	}
	if err := w.BeginRecord(`{"i":1}`, nil); err != nil {
		return err
	}
	if err := w.BeginTrajectory(); err != nil {
		return err
	}
	if err := w.SetIndex(zrecord.MrecBlock{Count: 2, Columns: []zrecord.MrecColumn{{Name: "weight", Dtype: "f64", Shape: []uint64{2}, Data: f64s(1, 2)}}}); err != nil {
		return err
	}
	return w.Commit()
}
