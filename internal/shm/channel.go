package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/distrl/distrl/internal/pidfile"
	"golang.org/x/sys/unix"
)

var (
	// ErrFull: the ring has no room for the message now.
	ErrFull = errors.New("shm: channel full")
	// ErrTooLarge: the message is larger than the ring.
	ErrTooLarge = errors.New("shm: message larger than the channel")
	// ErrCorrupt: the shared memory holds what no well-behaved peer writes.
	ErrCorrupt = errors.New("shm: channel corrupt")
	// ErrPeerGone: the peer's doorbell has no reader: its process is gone.
	ErrPeerGone = errors.New("shm: peer gone")
	// ErrClosed: the channel was closed on this side.
	ErrClosed = errors.New("shm: channel closed")
)

// Channel file layout. The header's control words sit a cache line apart,
// so the two sides do not write the same line.
const (
	magic       = "distrlC1"
	headerSize  = 4096
	offCapacity = 8
	offPID      = 12 // the client's pid
	offBellLen  = 16
	offBell     = 20 // the client's doorbell path
	maxBellPath = 255
	offToServer = 512 // requests: tail, head, sleeping
	offToClient = 768 // replies
	ctlSize     = 192

	// MinCapacity and MaxCapacity bound a ring's size in bytes.
	MinCapacity = 4096
	MaxCapacity = 1 << 30
	// DefaultCapacity is each direction's ring size of a Dial with 0.
	DefaultCapacity = 1 << 20
)

// Channel is one client's connection to one server: requests flow in one
// ring, replies in the other. It is for one goroutine on each side.
type Channel struct {
	mem     []byte
	out, in ring
	ringer  *Ringer
	peerPID int
}

// Send publishes msg to the peer and rings its doorbell if it is about to
// sleep. ErrFull and ErrTooLarge leave the channel as it was; ErrPeerGone
// means msg was written but nobody will read it.
func (c *Channel) Send(msg []byte) error { return c.SendParts(msg, nil) }

// SendParts is Send of the message head+body, without joining them first.
func (c *Channel) SendParts(head, body []byte) error {
	if c.mem == nil {
		return ErrClosed
	}
	if err := c.out.put(head, body); err != nil {
		return err
	}
	if atomic.LoadUint32(c.out.sleeping) != 0 && atomic.CompareAndSwapUint32(c.out.sleeping, 1, 0) {
		if err := c.ringer.Ring(); err != nil {
			return fmt.Errorf("%w: %w", ErrPeerGone, err)
		}
	}
	return nil
}

// Recv copies the next message from the peer into buf[:0]; nil and no
// error when there is none. After ErrCorrupt the channel is unusable.
func (c *Channel) Recv(buf []byte) ([]byte, error) {
	if c.mem == nil {
		return nil, ErrClosed
	}
	msg, err := c.in.get(buf)
	if msg != nil && atomic.LoadUint32(c.in.sleeping) != 0 {
		// Awake after all: peers need not ring.
		atomic.StoreUint32(c.in.sleeping, 0)
	}
	return msg, err
}

// PrepareWait tells the peer that this side is about to sleep, so its next
// Send rings the doorbell, and reports whether sleeping is safe: false when
// a message is already waiting.
func (c *Channel) PrepareWait() bool {
	if c.mem == nil {
		return true
	}
	atomic.StoreUint32(c.in.sleeping, 1)
	return !c.in.pending()
}

// Pending reports whether a message is waiting, as Recv would find it, but
// without arming anything: two loads from the shared memory, no system call.
func (c *Channel) Pending() bool { return c.mem != nil && c.in.pending() }

// MaxMessage is the largest message Send takes.
func (c *Channel) MaxMessage() int { return c.out.maxMessage() }

// PeerAlive reports whether the peer's process still exists.
func (c *Channel) PeerAlive() bool { return pidfile.Alive(c.peerPID) }

// PeerPID is the peer's process id.
func (c *Channel) PeerPID() int { return c.peerPID }

// Close unmaps the channel; the memory goes once the peer unmaps it too.
// Send and Recv then fail with ErrClosed.
func (c *Channel) Close() error {
	if c.mem == nil {
		return nil
	}
	err := errors.Join(unix.Munmap(c.mem), c.ringer.Close())
	c.mem = nil
	return err
}

// mapChannel maps a channel file of the given ring capacity and builds the
// two rings, out being the one this side produces into.
func mapChannel(f *os.File, capacity int, client bool) (*Channel, error) {
	mem, err := unix.Mmap(int(f.Fd()), 0, headerSize+2*capacity, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: map %s: %w", f.Name(), err)
	}
	toServer := newRing(mem[offToServer:offToServer+ctlSize], mem[headerSize:headerSize+capacity])
	toClient := newRing(mem[offToClient:offToClient+ctlSize], mem[headerSize+capacity:headerSize+2*capacity])
	c := &Channel{mem: mem, out: toClient, in: toServer}
	if client {
		c.out, c.in = toServer, toClient
	}
	return c, nil
}

// createChannel writes a new channel file at path for this process as the
// client, with its doorbell at bell. The file appears under its name
// complete: it is written under a temporary name and renamed.
func createChannel(path string, capacity int, bell string) (*Channel, error) {
	if capacity == 0 {
		capacity = DefaultCapacity
	}
	if capacity < MinCapacity || capacity > MaxCapacity || capacity&(capacity-1) != 0 {
		return nil, fmt.Errorf("shm: capacity %d: want a power of two in [%d, %d]", capacity, MinCapacity, MaxCapacity)
	}
	if len(bell) > maxBellPath {
		return nil, fmt.Errorf("shm: doorbell path %q longer than %d bytes", bell, maxBellPath)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("shm: create channel: %w", err)
	}
	defer f.Close()
	fail := func(err error) (*Channel, error) {
		os.Remove(tmp)
		return nil, err
	}
	if err := f.Truncate(int64(headerSize + 2*capacity)); err != nil {
		return fail(fmt.Errorf("shm: size channel: %w", err))
	}
	c, err := mapChannel(f, capacity, true)
	if err != nil {
		return fail(err)
	}
	copy(c.mem, magic)
	binary.LittleEndian.PutUint32(c.mem[offCapacity:], uint32(capacity))
	binary.LittleEndian.PutUint32(c.mem[offPID:], uint32(os.Getpid()))
	binary.LittleEndian.PutUint16(c.mem[offBellLen:], uint16(len(bell)))
	copy(c.mem[offBell:], bell)
	if err := os.Rename(tmp, path); err != nil {
		unix.Munmap(c.mem)
		return fail(fmt.Errorf("shm: publish channel: %w", err))
	}
	return c, nil
}

// openChannel maps the channel file at path as its server, after checking
// everything its header says, and opens the client's doorbell.
func openChannel(path string) (*Channel, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: open channel: %w", err)
	}
	defer f.Close()
	var hdr [offBell + maxBellPath]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return nil, fmt.Errorf("shm: read channel header: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("shm: channel: %w", err)
	}
	capacity := int(binary.LittleEndian.Uint32(hdr[offCapacity:]))
	pid := int(binary.LittleEndian.Uint32(hdr[offPID:]))
	bellLen := int(binary.LittleEndian.Uint16(hdr[offBellLen:]))
	switch {
	case string(hdr[:len(magic)]) != magic:
		return nil, fmt.Errorf("%w: %s is not a channel file", ErrCorrupt, path)
	case capacity < MinCapacity || capacity > MaxCapacity || capacity&(capacity-1) != 0 || st.Size() != int64(headerSize+2*capacity):
		return nil, fmt.Errorf("%w: %s: capacity %d in a file of %d bytes", ErrCorrupt, path, capacity, st.Size())
	case pid <= 0 || bellLen == 0 || bellLen > maxBellPath:
		return nil, fmt.Errorf("%w: %s: pid %d, doorbell path of %d bytes", ErrCorrupt, path, pid, bellLen)
	}
	ringer, err := openFIFO(string(hdr[offBell : offBell+bellLen]))
	if err != nil {
		return nil, err
	}
	c, err := mapChannel(f, capacity, false)
	if err != nil {
		ringer.Close()
		return nil, err
	}
	c.ringer, c.peerPID = ringer, pid
	// Start from what the client published, not from zero: it may have
	// written requests already.
	c.in.pos, c.out.pos = atomic.LoadUint64(c.in.head), atomic.LoadUint64(c.out.tail)
	return c, nil
}

// openFIFO opens a doorbell a peer named, refusing anything but a FIFO
// (ringing writes into it).
func openFIFO(path string) (*Ringer, error) {
	r, err := OpenRinger(path)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(r.fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		r.Close()
		return nil, fmt.Errorf("%w: doorbell %s is not a FIFO", ErrCorrupt, path)
	}
	return r, nil
}

// ownerPID reads the pid out of a name "x-PID-SEQ[...]"; 0 if it has none.
func ownerPID(name string) int {
	parts := strings.SplitN(filepath.Base(name), "-", 3)
	if len(parts) < 3 {
		return 0
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil {
		return 0
	}
	return pid
}
