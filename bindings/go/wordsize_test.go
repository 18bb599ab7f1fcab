package zrecord_test

import (
	"testing"

	"loaderx.invalid/zrecord"
)

// 64-bit values cross into C whole on every target. SWIG's typedef of
// int64_t/uint64_t for the wrapper must be the target's own: `long` where
// int64_t is long (Linux on 64-bit CPUs), `long long` on Windows (where
// long has 32 bits) and macOS. With SWIGWORDSIZE64 on Windows the wrapper
// passes a uint64 as a 32-bit `unsigned long`, which would make a
// Sequential sampler's length 2^40 a 0 and its step 2^33+5 a 5 (zig's
// compiler already refuses that wrapper, on its uint64_t* parameters; this
// test guards the values should a compiler let it through). A Sequential
// sampler's batch at step s with batch size 1 is the index s (modulo its
// length).
func TestUint64CrossesWhole(t *testing.T) {
	const length = uint64(1) << 40
	s, err := zrecord.NewSampler(zrecord.SamplerConfig{Length: length, BatchSize: 1, Mode: zrecord.Sequential})
	if err != nil {
		t.Fatalf("sampler over 2^40 indices: %v", err)
	}
	for _, step := range []uint64{5, 1<<32 + 5, 1<<33 + 5, length - 1, length + 7} {
		got, err := s.Indices(step)
		if err != nil {
			t.Fatalf("Indices(%d): %v", step, err)
		}
		if len(got) != 1 || got[0] != step%length {
			t.Fatalf("Indices(%d) = %v, want [%d]", step, got, step%length)
		}
	}
}
