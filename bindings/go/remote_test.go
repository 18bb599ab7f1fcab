package zrecord_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"loaderx.invalid/zrecord"
)

// Stores and shard sets at URLs, against the Python suite's real servers
// on 127.0.0.1 (tests/remote_servers.sh starts nginx and SeaweedFS's S3
// through tests/python/remote_servers.py). Every gathered byte is
// compared with the same store read locally, or the call must fail with
// an error naming the object.

const remoteN = 600

func remoteImage(i int) []byte {
	b := make([]byte, 28*28)
	for r := 0; r < 28; r++ {
		for c := 0; c < 28; c++ {
			b[28*r+c] = byte((r + c + i + (i*7+r*3+c)%4) % 256)
		}
	}
	return b
}

// startRemote runs tests/remote_servers.sh around a shell that prints its
// environment and waits; the servers' variables are set for the test
// (t.Setenv) and the servers stop when it ends. Skips where the wrapper
// skips (no nginx), as the Python suite does.
func startRemote(t *testing.T) {
	t.Helper()
	if !zrecord.RemoteSupported() {
		t.Skip("this build of the libraries has no remote store support (built without libcurl, as the cross builds are)")
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "tests", "remote_servers.sh"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script, "sh", "-c", "env; echo ZR_REMOTE_READY; read x")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	env := map[string]string{}
	sc := bufio.NewScanner(stdout)
	ready := false
	var first string
	for sc.Scan() {
		line := sc.Text()
		if first == "" {
			first = line
		}
		if line == "ZR_REMOTE_READY" {
			ready = true
			break
		}
		if k, v, ok := strings.Cut(line, "="); ok && (strings.HasPrefix(k, "ZR_") || strings.HasPrefix(k, "AWS_")) {
			env[k] = v
		}
	}
	if !ready {
		go io.Copy(io.Discard, stdout)
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 77 {
			t.Skipf("%s", strings.TrimSpace(first))
		}
		t.Fatalf("tests/remote_servers.sh: %v\n%s", err, stderr.String())
	}
	go io.Copy(io.Discard, stdout)
	for k, v := range env {
		t.Setenv(k, v)
	}
	if _, ok := env["AWS_ENDPOINT_URL"]; ok {
		t.Setenv("AWS_PROFILE", "")
		os.Unsetenv("AWS_PROFILE")
	}
}

func writeRemoteImages(t *testing.T, path string, a, b int) {
	t.Helper()
	s, err := zrecord.CreateDense(path, "uint8", []uint64{28, 28}, "zstd")
	if err != nil {
		t.Fatal(err)
	}
	for i := a; i < b; i++ {
		if _, err := s.Append(remoteImage(i)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
}

func gatherAll(t *testing.T, g func([]int64, []byte) error, idx []int64) []byte {
	t.Helper()
	dst := make([]byte, len(idx)*28*28)
	if err := g(idx, dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestRemote(t *testing.T) {
	startRemote(t)
	root, url := os.Getenv("ZR_TEST_HTTP_ROOT"), os.Getenv("ZR_TEST_HTTP_URL")
	writeRemoteImages(t, filepath.Join(root, "images"), 0, remoteN)
	tok, err := zrecord.CreateRagged(filepath.Join(root, "tokens"), "<i4", "zstd")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < remoteN; i++ {
		if _, err := tok.AppendRecords(shardTokens(i)); err != nil {
			t.Fatal(err)
		}
	}
	tok.Close()
	parts := []string{}
	for k, r := range [][2]int{{0, 200}, {200, 440}, {440, remoteN}} {
		p := filepath.Join(root, "set", fmt.Sprintf("part-%d", k))
		os.MkdirAll(filepath.Dir(p), 0o755)
		writeRemoteImages(t, p, r[0], r[1])
		parts = append(parts, p)
	}
	local, err := zrecord.OpenReadOnly(filepath.Join(root, "images"))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	rng := rand.New(rand.NewSource(1))
	idx := make([]int64, 200)
	for k := range idx {
		idx[k] = rng.Int63n(remoteN)
	}

	t.Run("dense and ragged stores over http match local", func(t *testing.T) {
		r, err := zrecord.OpenReadOnly(url + "/images")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if r.Len() != remoteN || r.Dtype() != local.Dtype() || fmt.Sprint(r.ItemShape()) != "[28 28]" || r.Path() != url+"/images" || !r.ReadOnly() {
			t.Fatalf("remote store: %d %s %v %s", r.Len(), r.Dtype(), r.ItemShape(), r.Path())
		}
		if !bytes.Equal(gatherAll(t, r.Gather, idx), gatherAll(t, local.Gather, idx)) {
			t.Fatal("remote records differ from local ones")
		}
		rt, err := zrecord.OpenReadOnly(url + "/tokens")
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		recs, err := rt.GatherRecords(idx)
		if err != nil {
			t.Fatal(err)
		}
		for k, i := range idx {
			if !bytes.Equal(recs[k].Data, shardTokens(int(i)).Data) {
				t.Fatalf("tokens of %d", i)
			}
		}
	})

	t.Run("a writable open of a URL is refused", func(t *testing.T) {
		_, err := zrecord.Open(url + "/images")
		wantErr(t, err, zrecord.ErrUnsupported, "read-only")
	})

	t.Run("a missing store is named", func(t *testing.T) {
		_, err := zrecord.OpenReadOnly(url + "/nothing-here")
		wantErr(t, err, zrecord.ErrNotStore, "nothing-here", "meta.zr is missing", "404")
		_, err = zrecord.OpenConcat([]string{url + "/set/part-0", url + "/nothing-here"})
		wantErr(t, err, nil, "nothing-here")
	})

	t.Run("a concatenation of URLs and its loader match local", func(t *testing.T) {
		c, err := zrecord.OpenConcat([]string{url + "/set/part-0", url + "/set/part-1", url + "/set/part-2"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if c.Len() != remoteN || c.NumShards() != 3 {
			t.Fatalf("concat of URLs: %d records, %d shards", c.Len(), c.NumShards())
		}
		if !bytes.Equal(gatherAll(t, c.Gather, idx), gatherAll(t, local.Gather, idx)) {
			t.Fatal("remote concatenation differs from the local store")
		}
		o := zrecord.LoaderOptions{BatchSize: 32, Seed: 3, NumWorkers: 2}
		a, err := zrecord.NewLoaderOf([]zrecord.Source{c}, o)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, _ := zrecord.NewLoader([]*zrecord.Store{local}, o)
		defer b.Close()
		for k := 0; k < 10; k++ {
			x, err := a.Next()
			y, _ := b.Next()
			if err != nil || !bytes.Equal(x.Data[0], y.Data[0]) {
				t.Fatalf("step %d: %v", k, err)
			}
		}
	})

	t.Run("s3: push, open, and a shard set", func(t *testing.T) {
		if os.Getenv("AWS_ENDPOINT_URL") == "" {
			t.Skip("SeaweedFS is not available (scripts/setup.sh --tests builds it)")
		}
		u := "s3://zrtest/go/images"
		if err := zrecord.Push(filepath.Join(root, "images"), u); err != nil {
			t.Fatal(err)
		}
		s, err := zrecord.OpenReadOnly(u)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if s.Len() != remoteN || !bytes.Equal(gatherAll(t, s.Gather, idx), gatherAll(t, local.Gather, idx)) {
			t.Fatal("the pushed store differs from the local one")
		}
		err = zrecord.Push(filepath.Join(root, "images"), u)
		wantErr(t, err, zrecord.ErrExist, "already holds a store")
		if err := zrecord.PushShards(parts, "s3://zrtest/go/set"); err != nil {
			t.Fatal(err)
		}
		c, err := zrecord.OpenConcat([]string{"s3://zrtest/go/set"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		all := make([]int64, remoteN)
		for i := range all {
			all[i] = int64(i)
		}
		if c.Len() != remoteN || c.NumShards() != 3 || !bytes.Equal(gatherAll(t, c.Gather, all), gatherAll(t, local.Gather, all)) {
			t.Fatalf("the shard set (%d records, %d shards) differs from the local store", c.Len(), c.NumShards())
		}
	})
}
