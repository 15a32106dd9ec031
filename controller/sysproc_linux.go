package controller

import "syscall"

// sysProcAttr puts a worker in its own process group, so a Ctrl-C at the
// terminal reaches the controller only and the controller stops the
// workers in order; and asks the kernel to send the worker SIGTERM if the
// controller dies without stopping it (SIGKILL, crash), so no worker
// outlives its controller by more than its graceful exit.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
