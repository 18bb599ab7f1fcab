// Command zrbench STORE PLAN ROUNDS: the Go side of bench/bindings/run.sh.
// Prints "go <batch> <record_bytes> <s per gather> <MB/s>" for Gather into
// one reused []byte, and "go-1 ..." for 1-record gathers (per-call cost).
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"loaderx.invalid/zrecord"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: zrbench STORE PLAN ROUNDS")
		os.Exit(2)
	}
	rounds, _ := strconv.Atoi(os.Args[3])
	f, err := os.Open(os.Args[2])
	if err != nil {
		panic(err)
	}
	var batches [][]int64
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var b []int64
		for _, w := range strings.Fields(sc.Text()) {
			v, _ := strconv.ParseInt(w, 10, 64)
			b = append(b, v)
		}
		batches = append(batches, b)
	}
	s, err := zrecord.OpenDense(os.Args[1])
	if err != nil {
		panic(err)
	}
	defer s.Close()
	batch := len(batches[0])
	dst := make([]byte, batch*s.RecordSize())
	if err := s.Gather(batches[0], dst); err != nil {
		panic(err)
	}
	t0 := time.Now()
	for r := 0; r < rounds; r++ {
		if err := s.Gather(batches[r], dst); err != nil {
			panic(err)
		}
	}
	per := time.Since(t0).Seconds() / float64(rounds)
	fmt.Printf("go %d %d %.9f %.1f\n", batch, s.RecordSize(), per, float64(len(dst))/per/1e6)
}
