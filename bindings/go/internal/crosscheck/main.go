// Command crosscheck is the Go side of the cross-language determinism
// test: for every case of tests/cross/cases.txt, the loader's steps as
// `<step> <indices> <sha256>` lines into OUT/<case>.go (see
// tests/cross/run.sh). Usage: go run ./internal/crosscheck CASES STORES OUT
package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"loaderx.invalid/zrecord"
)

type kase struct {
	name string
	kv   map[string]string
}

func (c kase) num(key string, dflt uint64) uint64 {
	v, ok := c.kv[key]
	if !ok {
		return dflt
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		fail(fmt.Errorf("case %s: %s=%q is not a number", c.name, key, v))
	}
	return n
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "crosscheck:", err)
	os.Exit(1)
}

func parse(path string) []kase {
	f, err := os.Open(path)
	if err != nil {
		fail(err)
	}
	defer f.Close()
	var cases []kase
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		tok := strings.Fields(line)
		c := kase{name: tok[0], kv: map[string]string{}}
		for _, t := range tok[1:] {
			k, v, ok := strings.Cut(t, "=")
			if !ok {
				fail(fmt.Errorf("case %s: %q has no '='", c.name, t))
			}
			c.kv[k] = v
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		fail(err)
	}
	return cases
}

func le32(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func batchLine(b *zrecord.Batch, names []string) string {
	parts := map[string][]byte{}
	for k, n := range names {
		parts[n] = b.Data[k]
	}
	if p := b.Pack; p != nil {
		parts["segment_ids"], parts["positions"] = le32(p.SegmentIDs), le32(p.Positions)
		parts["seq_lens"], parts["cu_seqlens"] = le32(p.SeqLens), le32(p.CuSeqlens)
	}
	keys := make([]string, 0, len(parts))
	for k := range parts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		h.Write(parts[k])
	}
	idx := make([]string, len(b.Indices))
	for i, v := range b.Indices {
		idx[i] = strconv.FormatUint(v, 10)
	}
	return fmt.Sprintf("%d %s %x\n", b.Step, strings.Join(idx, ","), h.Sum(nil))
}

func run(c kase, stores string) string {
	names := strings.Split(c.kv["streams"], ",")
	var streams []zrecord.Source
	var mix *zrecord.Mixture
	var concats []*zrecord.Concat // closed when run returns, after the loader
	defer func() {
		for _, x := range concats {
			x.Close()
		}
	}()
	openConcat := func(paths []string) *zrecord.Concat {
		x, err := zrecord.OpenConcat(paths)
		if err != nil {
			fail(fmt.Errorf("case %s: %w", c.name, err))
		}
		concats = append(concats, x)
		return x
	}
	if spec, ok := c.kv["mixture"]; ok {
		// source:weight,...: stream S of source K is the store K.S
		var sources []zrecord.MixtureSource
		for _, part := range strings.Split(spec, ",") {
			src, w, _ := strings.Cut(part, ":")
			weight, err := strconv.ParseFloat(w, 64)
			if err != nil {
				fail(fmt.Errorf("case %s: weight %q of source %s: %w", c.name, w, src, err))
			}
			ms := zrecord.MixtureSource{Name: src, Weight: weight}
			for _, n := range names {
				ms.Streams = append(ms.Streams, openConcat([]string{filepath.Join(stores, src+"."+n)}))
			}
			sources = append(sources, ms)
		}
		var err error
		if mix, err = zrecord.NewMixture(sources); err != nil {
			fail(fmt.Errorf("case %s: %w", c.name, err))
		}
	} else {
		for _, n := range names {
			if c.num("concat", 0) == 1 {
				var paths []string
				for k := 0; k < 3; k++ {
					paths = append(paths, filepath.Join(stores, fmt.Sprintf("%s.shard%d", n, k)))
				}
				streams = append(streams, openConcat(paths))
				continue
			}
			s, err := zrecord.OpenReadOnly(filepath.Join(stores, n))
			if err != nil {
				fail(err)
			}
			defer s.Close()
			streams = append(streams, s)
		}
	}
	o := zrecord.LoaderOptions{
		BatchSize: c.num("batch_size", 1), Seed: c.num("seed", 0),
		Rank: uint32(c.num("rank", 0)), WorldSize: uint32(c.num("world_size", 1)),
		NumWorkers: uint(c.num("num_workers", 1)),
		Pass:       c.num("pass", 0) == 1, Shuffle: c.num("shuffle", 0) == 1,
		DropLast: c.num("drop_last", 0) == 1, Epoch: c.num("epoch", 0),
		EvenBatches: c.num("even_batches", 0) == 1,
	}
	switch mode := c.kv["mode"]; mode {
	case "", "cyclic":
	case "pack":
		o.Pack, o.PackLength, o.PackWindow = true, c.num("pack_length", 0), c.num("pack_window", 0)
		o.PackPolicy, o.PackOverlong = c.kv["pack_policy"], c.kv["pack_overlong"]
	case "bucket":
		raw, err := os.ReadFile(filepath.Join(stores, "lengths.u32"))
		if err != nil {
			fail(err)
		}
		for k := 0; k+4 <= len(raw); k += 4 {
			o.BucketLengths = append(o.BucketLengths, binary.LittleEndian.Uint32(raw[k:]))
		}
		o.BucketWindow = c.num("window", 0)
	default:
		m, err := zrecord.ParseMode(mode)
		if err != nil {
			fail(err)
		}
		o.Mode, o.UseMode = m, true
	}
	var l *zrecord.Loader
	var err error
	if mix != nil {
		l, err = zrecord.NewMixtureLoader(mix, o)
	} else {
		l, err = zrecord.NewLoaderOf(streams, o)
	}
	if err != nil {
		fail(fmt.Errorf("case %s: %w", c.name, err))
	}
	defer l.Close()
	var out strings.Builder
	for k := uint64(0); o.Pass || k < c.num("steps", 1); k++ {
		b, err := l.Next()
		if err == io.EOF && o.Pass {
			break
		}
		if err != nil {
			fail(fmt.Errorf("case %s: %w", c.name, err))
		}
		out.WriteString(batchLine(b, names))
	}
	return out.String()
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "dict" {
		if err := writeDict(os.Args[2]); err != nil {
			fail(err)
		}
		return
	}
	if len(os.Args) == 3 && os.Args[1] == "mrec" {
		if err := writeMrec(os.Args[2]); err != nil {
			fail(err)
		}
		return
	}
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: crosscheck CASES STORES OUT | crosscheck mrec OUT.mrec.lmdb | crosscheck dict DIR")
		os.Exit(2)
	}
	for _, c := range parse(os.Args[1]) {
		text := run(c, os.Args[2])
		if err := os.WriteFile(filepath.Join(os.Args[3], c.name+".go"), []byte(text), 0o644); err != nil {
			fail(err)
		}
	}
}
