package zrecord_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"loaderx.invalid/zrecord"
)

// A Go string may hold a NUL that C would cut at: Open("a\x00/x") used to
// open "a", and CreateRagged("new\x00evil") created "new".
func TestPathWithNULRefused(t *testing.T) {
	// (not "nul": a device name on Windows, which os.Stat finds in every directory)
	p := tmp(t, "nulpath")
	if _, err := zrecord.CreateRagged(p+"\x00evil", "uint8", "raw"); err == nil ||
		!errors.Is(err, zrecord.ErrInvalid) || !strings.Contains(err.Error(), "embedded NUL") {
		t.Fatalf("CreateRagged with a NUL: %v", err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("CreateRagged with a NUL made %s", p)
	}
	s, err := zrecord.CreateRagged(p, "uint8", "raw")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := zrecord.Open(p + "\x00/x"); err == nil || !strings.Contains(err.Error(), "embedded NUL") {
		t.Fatalf("Open with a NUL: %v", err)
	}
}
