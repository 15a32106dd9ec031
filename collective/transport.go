package collective

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"time"

	"github.com/distrl/distrl/internal/shm"
	"github.com/distrl/distrl/internal/zsock"
	zmq "github.com/pebbe/zmq4"
	"golang.org/x/sys/unix"
)

// A member's links: it sends to its right neighbour and receives from its
// left. Between members on one node the link is a shared-memory channel
// (internal/shm: a ring in /dev/shm, a doorbell rung only when the reader
// sleeps), which costs no thread wake-up while both are busy and no copy
// through a ZeroMQ I/O thread; between nodes, or with DISTRL_SHM=0, it is
// ZeroMQ (PUSH to the right neighbour's PULL). A member's record advertises
// both; the sender picks, and the receiver reads both.
const (
	// shmCapacity is a channel's ring: room for a few fragments.
	shmCapacity = 4 << 20
	// fragment bounds one shared-memory message's payload; longer payloads
	// (chunks of large vectors, broadcast states) go as several, flagged
	// "more". ZeroMQ takes them whole.
	fragment = 1 << 20
	// shmSendPoll is how long a sender whose ring is full sleeps before
	// it looks again (a reader frees room without ringing).
	shmSendPoll = 50 * time.Microsecond
	// shmSpin is how long a receiver looks in shared memory before it
	// sleeps on the doorbell.
	shmSpin = 100 * time.Microsecond
)

// links holds a member's shared-memory ends; zero when shared memory is off.
type links struct {
	lis  *shm.Listener // where the left neighbour dials in
	cli  *shm.Client   // how this member dials its right neighbour
	in   []*shm.Channel
	out  *shm.Channel // to the right neighbour, when on this node
	rbuf []byte       // the last shared-memory message received
}

// openLinks starts listening in shared memory where it is available; a
// failure there is logged and leaves ZeroMQ alone in use.
func (g *Group) openLinks() string {
	dir := shm.DefaultDir()
	if dir == "" {
		return ""
	}
	lis, err := shm.Listen(dir)
	if err == nil {
		g.links.cli, err = shm.NewClient(dir)
		if err != nil {
			lis.Close()
		}
	}
	if err != nil {
		g.log.Warn("collective: no shared memory; members on this node use ZeroMQ", "err", err)
		return ""
	}
	g.links.lis = lis
	return lis.Dir()
}

// errNeighbourAway: the right neighbour's shared-memory listener is gone
// (it exited, and its record goes with its lease) though its record is
// still in the view; formation waits for the view to change.
var errNeighbourAway = errors.New("collective: the right neighbour is not listening")

// dialRight points the shared-memory link at the right neighbour's
// listener dir, or drops it ("": the neighbour is elsewhere).
func (g *Group) dialRight(dir string) error {
	if g.links.out != nil {
		g.links.out.Close()
		g.links.out = nil
	}
	if dir == "" || g.links.cli == nil {
		return nil
	}
	ch, err := g.links.cli.Dial(dir, shmCapacity)
	// Gone (its files removed), or its process gone with them still there
	// (no reader at the doorbell).
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENXIO) || errors.Is(err, shm.ErrPeerGone) {
		return fmt.Errorf("%w: rank %d's shared memory: %w", errNeighbourAway, (g.o.Rank+1)%g.o.Size, err)
	}
	if err != nil {
		return fmt.Errorf("collective: dial rank %d in shared memory: %w", (g.o.Rank+1)%g.o.Size, err)
	}
	g.links.out = ch
	return nil
}

// sendRaw sends one message to the right neighbour without waiting:
// false when its queue has no room now.
func (g *Group) sendRaw(hdr, payload []byte) (bool, error) {
	if out := g.links.out; out != nil {
		err := out.SendParts(hdr, payload)
		if errors.Is(err, shm.ErrFull) {
			return false, nil
		}
		return err == nil, err
	}
	_, err := g.push.SendMessageDontwait(hdr, payload)
	if zsock.IsEAGAIN(err) {
		return false, nil
	}
	return err == nil, err
}

// next takes the next message: a stashed one first, else tryRecv's.
func (g *Group) next() ([][]byte, bool, error) {
	if len(g.stash) > 0 {
		frames := g.stash[0]
		g.stash[0] = nil
		g.stash = g.stash[1:]
		return frames, true, nil
	}
	return g.tryRecv()
}

// stashIncoming takes in, copied, every message waiting, so that the left
// neighbour has room to go on while this member waits to send.
func (g *Group) stashIncoming() error {
	for {
		frames, ok, err := g.tryRecv()
		if err != nil || !ok {
			return err
		}
		g.stash = append(g.stash, [][]byte{bytes.Clone(frames[0]), bytes.Clone(frames[1])})
	}
}

// tryRecv takes one message if one is waiting, from shared memory or
// ZeroMQ, as its two frames (header, payload). A shared-memory message's
// frames alias a buffer the next tryRecv reuses.
func (g *Group) tryRecv() ([][]byte, bool, error) {
	l := &g.links
	if l.lis != nil {
		chans, err := l.lis.Accept()
		if err != nil {
			g.log.Warn("collective: accepting a shared-memory channel", "err", err)
		}
		l.in = append(l.in, chans...)
	}
	for i := 0; i < len(l.in); i++ {
		msg, err := l.in[i].Recv(l.rbuf)
		// A channel of an earlier left neighbour (it restarted, or the
		// ring changed) is dropped once its writer is gone; the one in
		// use is never asked, which would cost a system call a look.
		if err != nil || msg == nil && len(l.in) > 1 && !l.in[i].PeerAlive() {
			l.in[i].Close()
			l.in = append(l.in[:i], l.in[i+1:]...)
			i--
			continue
		}
		if msg != nil {
			l.rbuf = msg[:0]
			if len(msg) < headerLen {
				return nil, false, fmt.Errorf("a shared-memory message of %d bytes", len(msg))
			}
			return [][]byte{msg[:headerLen], msg[headerLen:]}, true, nil
		}
	}
	frames, err := g.pull.RecvMessageBytes(zmq.DONTWAIT)
	switch {
	case err == nil:
		return frames, true, nil
	case zsock.IsEAGAIN(err):
		return nil, false, nil
	default:
		return nil, false, fmt.Errorf("collective: receive: %w", err)
	}
}

// waitIn waits up to d for a message from the left, on the ZeroMQ socket
// or the shared-memory doorbell.
func (g *Group) waitIn(d time.Duration) error {
	// A neighbour in shared memory is usually microseconds away from its
	// next message: look for it a moment, yielding, before paying for a
	// sleep and a wake-up on both sides.
	if len(g.links.in) > 0 {
		for end := time.Now().Add(shmSpin); time.Now().Before(end); runtime.Gosched() {
			for _, ch := range g.links.in {
				if ch.Pending() {
					return nil
				}
			}
		}
	}
	if !g.PrepareWait() {
		return nil
	}
	fds := []unix.PollFd{{Fd: int32(g.pullFd), Events: unix.POLLIN}}
	if fd := g.WaitFd(); fd >= 0 {
		fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	_, err := unix.Poll(fds, int((d+time.Millisecond-1)/time.Millisecond))
	g.drainBell()
	if err != nil && !errors.Is(err, unix.EINTR) {
		return err
	}
	return nil
}

// drainBell empties the shared-memory doorbell, which the left neighbour
// rang while this member slept (the worker loop's wait, or waitIn's).
func (g *Group) drainBell() {
	if g.links.lis != nil {
		g.links.lis.Doorbell().Drain()
	}
}

// waitOut waits up to d for room towards the right neighbour.
func (g *Group) waitOut(d time.Duration) error {
	if g.links.out != nil {
		time.Sleep(min(d, shmSendPoll))
		return nil
	}
	p := zmq.NewPoller()
	p.Add(g.push, zmq.POLLOUT)
	_, err := p.Poll(d)
	if err != nil && errors.Is(err, zmq.Errno(unix.EINTR)) {
		return nil
	}
	return err
}

// WaitFd is the shared-memory doorbell the left neighbour rings when it
// sends while this member sleeps (-1 without shared memory): a caller
// waiting in Arrive watches it beside Socket.
func (g *Group) WaitFd() int {
	if g.links.lis == nil {
		return -1
	}
	return g.links.lis.Doorbell().Fd()
}

// PrepareWait tells the left neighbour, if it writes to shared memory,
// that this member is about to sleep, so that it rings; false when a
// message is waiting already (in shared memory or in the socket, whose
// ZMQ_FD is edge-triggered: reading its events rearms it).
func (g *Group) PrepareWait() bool {
	for _, ch := range g.links.in {
		if !ch.PrepareWait() {
			return false
		}
	}
	if g.pull == nil {
		return true
	}
	ev, err := g.pull.GetEvents()
	return err != nil || ev&zmq.POLLIN == 0
}

func (g *Group) closeLinks() {
	l := &g.links
	for _, ch := range l.in {
		ch.Close()
	}
	if l.out != nil {
		l.out.Close()
	}
	if l.lis != nil {
		l.lis.Close()
	}
	if l.cli != nil {
		l.cli.Close()
	}
	*l = links{}
}
