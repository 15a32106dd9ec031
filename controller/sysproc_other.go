//go:build !linux

package controller

import "syscall"

// sysProcAttr puts a worker in its own process group, so a Ctrl-C at the
// terminal reaches the controller only. Outside Linux there is no parent
// death signal: workers of a controller that was killed keep running until
// their name server goes or they are stopped.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
