package main

import (
	"os"
	"path/filepath"

	"loaderx.invalid/zrecord"
)

// writeDict is the dictionary step of the cross-language test: the records
// of DIR/src (written by tests/cross/dict.py) through TrainDict (tier
// fast) into DIR/go.
func writeDict(dir string) error {
	s, err := zrecord.OpenReadOnly(filepath.Join(dir, "src"))
	if err != nil {
		return err
	}
	defer s.Close()
	records := make([][]byte, s.Len())
	for i := range records {
		if records[i], err = s.Get(int64(i)); err != nil {
			return err
		}
	}
	d, err := zrecord.TrainDict(records, zrecord.DictFast)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "go"), d, 0o644)
}
