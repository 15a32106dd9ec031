package pidfile

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/distrl/distrl/internal/testsupport/proctest"
)

func TestSweep(t *testing.T) {
	dir := t.TempDir()
	dead := proctest.DeadPID(t)
	names := map[string]bool{ // name -> kept
		strconv.Itoa(dead) + "-1.sock":        false,
		strconv.Itoa(dead) + "-2.sock":        false,
		strconv.Itoa(os.Getpid()) + "-1.sock": true,
		"1-1.sock":                            true, // init: alive
		"notapid.sock":                        true,
	}
	for n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	owner := func(name string) int {
		pid, _ := strconv.Atoi(strings.SplitN(name, "-", 2)[0])
		return pid
	}
	if err := Sweep(dir, owner); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	for n, kept := range names {
		if slices.Contains(left, n) != kept {
			t.Errorf("%s: kept %v, want %v (left: %v)", n, !kept, kept, left)
		}
	}
	if err := Sweep(filepath.Join(dir, "missing"), owner); err == nil {
		t.Error("sweeping a missing directory: no error")
	}
}
