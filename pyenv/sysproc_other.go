//go:build !linux

package pyenv

import "syscall"

// sysProcAttr gives the host its own process group. Outside Linux there is
// no parent death signal: a host whose actor was killed notices within
// half a second that its parent is gone, and exits.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
