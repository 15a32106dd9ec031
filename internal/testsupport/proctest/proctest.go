package proctest

import (
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// DeadPID is the pid of a process that has exited and been reaped. The
// test is skipped in the rare case that the pid was given to a new
// process at once, where "gone" can no longer be tested with it.
func DeadPID(t testing.TB) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if err := unix.Kill(pid, 0); err == nil || err == unix.EPERM {
		t.Skipf("pid %d was reused at once", pid)
	}
	return pid
}
