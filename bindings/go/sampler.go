package zrecord

import (
	"strings"

	"loaderx.invalid/zrecord/internal/zrcore"
)

// Mode is how a sampler draws indices.
type Mode int

const (
	Sequential Mode = 0 // the window [step*G, step*G+G) modulo length
	IID        Mode = 1 // uniform with replacement
	Cyclic     Mode = 2 // without replacement, a fresh permutation per cycle
)

// ParseMode parses "sequential", "iid" or "cyclic" (any case).
func ParseMode(name string) (Mode, error) {
	switch strings.ToLower(name) {
	case "sequential":
		return Sequential, nil
	case "iid":
		return IID, nil
	case "cyclic":
		return Cyclic, nil
	}
	return 0, errorf(StatusInvalid, "unknown sampler mode %q (expected sequential, iid or cyclic)", name)
}

func (m Mode) String() string {
	switch m {
	case Sequential:
		return "sequential"
	case IID:
		return "iid"
	case Cyclic:
		return "cyclic"
	}
	return "unknown"
}

// SamplerConfig configures a Sampler. WorldSize 0 means 1.
type SamplerConfig struct {
	Length    uint64 // size of the index space, >= 1
	BatchSize uint64 // indices per rank per step, >= 1
	Seed      uint64
	Mode      Mode
	Rank      uint32 // < WorldSize
	WorldSize uint32 // ranks sharing each global batch
}

// Sampler yields batches of indices as a pure function of (seed, step):
// Indices(step) needs no earlier step, so resuming is Seek. It holds no C
// resources.
type Sampler struct {
	cfg  SamplerConfig
	step uint64
}

// NewSampler validates cfg (ErrInvalid naming the rule otherwise).
func NewSampler(cfg SamplerConfig) (*Sampler, error) {
	if cfg.WorldSize == 0 {
		cfg.WorldSize = 1
	}
	s := &Sampler{cfg: cfg}
	if _, err := s.Indices(0); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Sampler) Config() SamplerConfig { return s.cfg }

// Indices returns this rank's BatchSize indices for step.
func (s *Sampler) Indices(step uint64) ([]uint64, error) {
	c := zrcore.NewZsm_config()
	defer zrcore.DeleteZsm_config(c)
	c.SetLength(s.cfg.Length)
	c.SetBatch_size(s.cfg.BatchSize)
	c.SetSeed(s.cfg.Seed)
	c.SetMode(zrcore.Enum_SS_zsm_mode(s.cfg.Mode))
	c.SetRank(uint(s.cfg.Rank))
	c.SetWorld_size(uint(s.cfg.WorldSize))
	// The C library's detail names the parameter and its value.
	if err := callAs("zrecord.Sampler.Indices", func() int { return zrcore.Zsm_validate(c) }); err != nil {
		return nil, err
	}
	out := make([]uint64, s.cfg.BatchSize)
	if err := callAs("zrecord.Sampler.Indices", func() int { return zrcore.Zsm_indices(c, step, out) }); err != nil {
		return nil, err
	}
	return out, nil
}

// Next returns the current step's indices and advances.
func (s *Sampler) Next() ([]uint64, error) {
	idx, err := s.Indices(s.step)
	if err == nil {
		s.step++
	}
	return idx, err
}

// Step is the step Next returns next; Seek sets it.
func (s *Sampler) Step() uint64     { return s.step }
func (s *Sampler) Seek(step uint64) { s.step = step }
