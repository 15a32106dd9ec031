package paramstream

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/nameresolve/names"
)

func TestFileNames(t *testing.T) {
	tests := []struct {
		name    string
		version int64
		epoch   uint64
		ok      bool
	}{
		{fileName(0, 0), 0, 0, true},
		{fileName(12, 0xabc), 12, 0xabc, true},
		{fileName(1<<40, 1<<52), 1 << 40, 1 << 52, true},
		{"v1.params", 0, 0, false},
		{"v-1-0000000000000000.params", 0, 0, false},
		{"v1-000000000000000g.params", 0, 0, false},
		{"v1-0000000000000000.tmp", 0, 0, false},
		{"fetch.lock", 0, 0, false},
		{".tmp-123", 0, 0, false},
	}
	for _, tt := range tests {
		v, e, ok := parseName(tt.name)
		if ok != tt.ok || ok && (v != tt.version || e != tt.epoch) {
			t.Errorf("parseName(%q) = %d, %x, %v; want %d, %x, %v", tt.name, v, e, ok, tt.version, tt.epoch, tt.ok)
		}
	}
}

func TestPathComponent(t *testing.T) {
	for _, s := range []string{"", ".", "..", "...", "a/b", "../x", "ok-name_1"} {
		c := pathComponent(s)
		if c == "" || c == "." || c == ".." || strings.ContainsRune(c, filepath.Separator) {
			t.Errorf("pathComponent(%q) = %q: not one safe component", s, c)
		}
	}
	if c := pathComponent("ok-name_1"); c != "ok-name_1" {
		t.Errorf("pathComponent changed a plain name to %q", c)
	}
}

func TestDefaultCacheDir(t *testing.T) {
	trial := names.NewTrial("exp", "t1")
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1234")
	t.Setenv("SLURMD_NODENAME", "node7")
	if got, want := DefaultCacheDir(trial, "pol"), "/run/user/1234/distrl-params/node7/exp/t1/pol"; got != want {
		t.Errorf("with XDG_RUNTIME_DIR: %q, want %q", got, want)
	}
	// Two nodes never share a directory, hence a lock file.
	t.Setenv("SLURMD_NODENAME", "node8")
	if got, want := DefaultCacheDir(trial, "pol"), "/run/user/1234/distrl-params/node8/exp/t1/pol"; got != want {
		t.Errorf("on another node: %q, want %q", got, want)
	}
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("SLURMD_NODENAME", "")
	host, _ := os.Hostname()
	if got := DefaultCacheDir(trial, "pol"); !strings.HasPrefix(got, os.TempDir()) || !strings.HasSuffix(got, "/"+pathComponent(host)+"/exp/t1/pol") {
		t.Errorf("without XDG_RUNTIME_DIR, on host %s: %q", host, got)
	}
}

func TestCacheWriteReadPrune(t *testing.T) {
	c := &cache{dir: filepath.Join(t.TempDir(), "a", "b")} // created on first write
	const epoch, other = 0x1234, 0x9999
	data := func(v int64) []float32 { return []float32{float32(v), -1.5, 3e38, 0} }
	for _, v := range []int64{1, 2, 3} {
		if err := c.write(v, epoch, data(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.write(9, other, data(9)); err != nil {
		t.Fatal(err)
	}
	// A temporary file a dead writer left long ago, and a fresh one a
	// live writer is still filling.
	old := filepath.Join(c.dir, tmpPrefix+"old")
	fresh := filepath.Join(c.dir, tmpPrefix+"fresh")
	for _, p := range []string{old, fresh} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * tmpMaxAge)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}

	v, path, ok, err := c.lookup(2, epoch)
	if err != nil || !ok || v != 3 {
		t.Fatalf("lookup(2) = %d, %v, %v; want 3", v, ok, err)
	}
	got, err := readFile(path, 3, epoch)
	if err != nil || !slices.Equal(got, data(3)) {
		t.Fatalf("readFile = %v, %v", got, err)
	}
	if _, err := readFile(path, 2, epoch); !errors.Is(err, errCorrupt) {
		t.Errorf("readFile with the wrong version: %v, want errCorrupt", err)
	}
	if _, _, ok, _ := c.lookup(4, epoch); ok {
		t.Error("lookup(4) found a version")
	}

	if err := c.prune(epoch); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(c.dir)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	want := []string{tmpPrefix + "fresh", fileName(2, epoch), fileName(3, epoch)}
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Errorf("after prune: %v, want %v", left, want)
	}
}

func TestLockExcludes(t *testing.T) {
	c := &cache{dir: t.TempDir()}
	a, err := c.tryLock()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.tryLock(); !errors.Is(err, errLocked) {
		t.Fatalf("second tryLock while held: %v, want errLocked", err)
	}
	unlock(a)
	b, err := c.tryLock()
	if err != nil {
		t.Fatalf("tryLock after unlock: %v", err)
	}
	unlock(b)
}
