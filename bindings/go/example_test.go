package zrecord_test

import (
	"fmt"
	"os"
	"path/filepath"

	"loaderx.invalid/zrecord"
)

func Example() {
	dir, _ := os.MkdirTemp("", "zrecord-example")
	defer os.RemoveAll(dir)

	// A dense store of 2x2 uint8 images.
	s, err := zrecord.CreateDense(filepath.Join(dir, "images"), "uint8", []uint64{2, 2}, "zstd")
	if err != nil {
		panic(err)
	}
	defer s.Close()
	for i := byte(0); i < 6; i++ {
		if _, err := s.Append([]byte{i, i, i, i}); err != nil {
			panic(err)
		}
	}
	dst := make([]byte, 2*s.RecordSize())
	if err := s.Gather([]int64{5, -6}, dst); err != nil {
		panic(err)
	}
	fmt.Println(s.Len(), dst)

	// Errors carry the library's message.
	err = s.Gather([]int64{6}, dst)
	fmt.Println(err != nil)

	// An endless loader over the store.
	l, err := zrecord.NewLoader([]*zrecord.Store{s}, zrecord.LoaderOptions{BatchSize: 3, Seed: 1})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	b, _ := l.Next()
	fmt.Println(b.Step, len(b.Indices), len(b.Data[0]))
	// Output:
	// 6 [5 5 5 5 0 0 0 0]
	// true
	// 0 3 12
}
