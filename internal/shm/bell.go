package shm

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Doorbell is the reading end of a process's doorbell: a FIFO that peers
// write a byte to when they publish a message while this process waits.
// The owner polls Fd and Drains it after waking.
type Doorbell struct {
	fd   int
	path string
	buf  [64]byte
}

// NewDoorbell makes a FIFO at path and opens it. It is opened for reading
// and writing, so that it never reports end-of-file while no peer has it
// open, and non-blocking, so that Drain stops when it is empty.
func NewDoorbell(path string) (*Doorbell, error) {
	if err := unix.Mkfifo(path, 0o600); err != nil {
		return nil, fmt.Errorf("shm: doorbell %s: %w", path, err)
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("shm: open doorbell %s: %w", path, err)
	}
	return &Doorbell{fd: fd, path: path}, nil
}

// Fd is the descriptor to poll for readability.
func (d *Doorbell) Fd() int { return d.fd }

// Path is where peers open the doorbell (OpenRinger).
func (d *Doorbell) Path() string { return d.path }

// Drain reads every ring queued so far.
func (d *Doorbell) Drain() {
	for {
		n, err := unix.Read(d.fd, d.buf[:])
		if n < len(d.buf) || err != nil {
			return
		}
	}
}

// Ring wakes the doorbell's owner from within its own process (a peer in
// another opens a Ringer). It cannot fail while the doorbell is open: a
// full FIFO has rung already.
func (d *Doorbell) Ring() {
	_, _ = unix.Write(d.fd, one)
}

// Close closes the doorbell and removes its FIFO.
func (d *Doorbell) Close() error {
	if d.fd < 0 {
		return nil
	}
	err := errors.Join(unix.Close(d.fd), ignoreNotExist(os.Remove(d.path)))
	d.fd = -1
	return err
}

// Ringer is a peer's doorbell, opened for ringing.
type Ringer struct{ fd int }

// OpenRinger opens the doorbell FIFO at path for writing. It fails with
// ENXIO when the doorbell's owner is gone.
func OpenRinger(path string) (*Ringer, error) {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: open doorbell %s: %w", path, err)
	}
	return &Ringer{fd: fd}, nil
}

var one = []byte{1}

// Ring wakes the doorbell's owner. A full FIFO has rung already, so EAGAIN
// is success; EPIPE means the owner is gone.
func (r *Ringer) Ring() error {
	_, err := unix.Write(r.fd, one)
	if err != nil && err != unix.EAGAIN {
		return fmt.Errorf("shm: ring doorbell: %w", err)
	}
	return nil
}

// Close closes the ringer.
func (r *Ringer) Close() error {
	if r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}

func ignoreNotExist(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
