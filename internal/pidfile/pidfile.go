package pidfile

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Alive reports whether a process pid exists (it may be another user's).
func Alive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || err == unix.EPERM
}

// Sweep removes every entry of dir whose owner, the pid that owner reads
// out of its name (0: none), is not a running process. A pid reused by a
// new process keeps its entries until that one is gone too.
func Sweep(dir string, owner func(name string) int) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("pidfile: %w", err)
	}
	for _, e := range entries {
		if pid := owner(e.Name()); pid > 0 && pid != os.Getpid() && !Alive(pid) {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	return nil
}
