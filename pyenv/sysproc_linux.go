package pyenv

import "syscall"

// sysProcAttr gives the host its own process group, so that killing the
// group also ends what the environment started, and has the kernel kill
// the host when the process that started it dies (SIGKILL included), so no
// host outlives its actor.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
