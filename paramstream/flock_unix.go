//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package paramstream

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// flockTry takes an exclusive flock on f without blocking. flock (unlike
// fcntl locks) belongs to the open file description, so two Subscribers
// in one process exclude each other just as two processes do.
func flockTry(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return errLocked
		default:
			return fmt.Errorf("flock %s: %w", f.Name(), err)
		}
	}
}
