package stream

import (
	"cmp"
	"errors"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/distrl/distrl/internal/shm"
	"github.com/distrl/distrl/internal/zsock"
)

// An inference server on the same node as its client also takes requests
// over shared memory (internal/shm): the server advertises a listener next
// to its ZMQ endpoints, each client dials it, and from then on the client
// sends its requests there and the server its replies back, each side
// ringing the other's doorbell only when the other is about to sleep. A
// round trip then wakes two threads instead of the four or more of a ZMQ
// one, and none while both sides are busy. ZMQ stays connected alongside:
// a request too large for a ring, or sent while every ring is full, goes
// that way.

// livenessEvery is how often each side checks that its shared-memory peers'
// processes still exist; a dead peer's channel is dropped (a client's
// requests to a dead server then time out and are posted again).
const livenessEvery = time.Second

// shmPeer is one shared-memory channel and the buffer its messages are
// read into (a held request keeps it until the next Poll takes it).
type shmPeer struct {
	key string // the server's record (client side)
	dir string // the server's listener (client side)
	ch  *shm.Channel
	buf []byte
}

// shmPeers is the channels of one side and the upkeep both sides share.
type shmPeers struct {
	log     *slog.Logger
	bell    *shm.Doorbell
	peers   []*shmPeer
	next    int // the channel the next receive starts at, for fairness
	checked time.Time
	malLog  zsock.RateLog
	// armed: prepareWait raised this side's flags since the doorbell was
	// last drained, so a peer may have rung it. Peers ring only then (and
	// a client when it dials a server, which bumps the listener's count
	// first), so a busy side skips the read.
	armed bool
	// local is the side's in-process path (inference_local.go): it is
	// armed, looked at and counted with the rings.
	local localSide
}

// localSide is a client's or a server's in-process path, as the wait sees
// it: arm tells the other side this one is about to sleep (false when
// something waits already), pending whether something waits, count the
// peers linked.
type localSide interface {
	arm() bool
	pending() bool
	count() int
}

// drop closes p's channel and forgets it.
func (s *shmPeers) drop(p *shmPeer, why string, err error) {
	s.log.Info("stream: shared-memory channel closed", "why", why, "err", err, "peer_pid", p.ch.PeerPID())
	p.ch.Close()
	s.peers = slices.DeleteFunc(s.peers, func(q *shmPeer) bool { return q == p })
}

// upkeep drains the doorbell (before the rings are read, so a message
// published after this rings it again) and, once per livenessEvery, drops
// channels whose peer process is gone.
func (s *shmPeers) upkeep(now time.Time) {
	if s.armed {
		s.bell.Drain()
		s.armed = false
	}
	if now.Sub(s.checked) < livenessEvery {
		return
	}
	s.checked = now
	for i := len(s.peers) - 1; i >= 0; i-- {
		if p := s.peers[i]; !p.ch.PeerAlive() {
			s.drop(p, "peer process gone", nil)
		}
	}
}

// recv returns the next message from any channel, starting after the one
// that gave the last, so that one busy client cannot keep the others
// waiting; nil when every ring is empty. A channel whose ring is corrupt
// is dropped.
func (s *shmPeers) recv() (*shmPeer, []byte) {
	for tries := len(s.peers); tries > 0 && len(s.peers) > 0; tries-- {
		s.next %= len(s.peers)
		p := s.peers[s.next]
		s.next++
		msg, err := p.ch.Recv(p.buf)
		if err != nil {
			s.malLog.Warn(s.log, "stream: dropped a shared-memory channel", "err", err)
			s.drop(p, "receive failed", err)
			s.next-- // the channels after p moved down one
			continue
		}
		if msg != nil {
			p.buf = msg
			return p, msg
		}
	}
	return nil, nil
}

// prepareWait tells every peer this side is about to sleep; false when a
// message is already waiting.
func (s *shmPeers) prepareWait() bool {
	s.armed = true
	sleep := s.local.arm()
	for _, p := range s.peers {
		sleep = p.ch.PrepareWait() && sleep
	}
	return sleep
}

// inputReady reports whether a peer's message is waiting in a channel, and
// whether any peer is attached.
func (s *shmPeers) inputReady() (ready, peers bool) {
	if s.local.pending() {
		return true, true
	}
	for _, p := range s.peers {
		if p.ch.Pending() {
			return true, true
		}
	}
	return false, len(s.peers)+s.local.count() > 0
}

func (s *shmPeers) close() {
	for _, p := range s.peers {
		p.ch.Close()
	}
	s.peers = nil
}

// sharedWait is how the inference client and server wait on shared
// memory as well as on their socket (worker.FdWaiter, worker.MemoryWaiter):
// the doorbell to sleep on, the flags that make peers ring it, and a look
// at the rings without a system call. Without shared memory (peers nil),
// or once closed, they wait on their socket alone.
type sharedWait struct {
	peers  *shmPeers
	closed bool
}

// WaitFds is the shared-memory doorbell, readable when a same-node peer
// sent while this side was about to sleep (PrepareWait); none without
// shared memory.
func (w *sharedWait) WaitFds() []int {
	if w.peers == nil || w.closed {
		return nil
	}
	return []int{w.peers.bell.Fd()}
}

// PrepareWait tells same-node peers this side is about to sleep, so that
// their next message rings its doorbell; false when messages are already
// waiting in shared memory.
func (w *sharedWait) PrepareWait() bool {
	if w.peers == nil || w.closed {
		return true
	}
	return w.peers.prepareWait()
}

// InputReady reports whether a message waits in a shared-memory channel,
// without a system call, and whether any peer is attached there
// (worker.MemoryWaiter).
func (w *sharedWait) InputReady() (ready, peers bool) {
	if w.peers == nil || w.closed {
		return false, false
	}
	return w.peers.inputReady()
}

// sharedPeers is the number of same-node peers attached over shared memory
// or in this process.
func (w *sharedWait) sharedPeers() int {
	if w.peers == nil {
		return 0
	}
	return len(w.peers.peers) + w.peers.local.count()
}

// shmServer is an InferenceServer's shared-memory side.
type shmServer struct {
	shmPeers
	l     *shm.Listener
	inbox *localInbox // clients of this process
}

// newShmServer listens in shm.DefaultDir; nil (with a log line) where
// shared memory is off or unavailable: the server then speaks ZMQ only.
func newShmServer(log *slog.Logger) *shmServer {
	dir := shm.DefaultDir()
	if dir == "" {
		return nil
	}
	l, err := shm.Listen(dir)
	if err != nil {
		log.Warn("stream: no shared-memory listener; same-node clients use ZMQ", "err", err)
		return nil
	}
	s := &shmServer{shmPeers: shmPeers{log: log, bell: l.Doorbell()}, l: l, inbox: newLocalInbox(l.Dir(), l.Doorbell())}
	s.local = s.inbox
	return s
}

// poll takes in channels dialled since the last poll and does the upkeep.
func (s *shmServer) poll(now time.Time) {
	s.upkeep(now)
	chans, err := s.l.Accept()
	if len(chans) > 0 || err != nil {
		s.bell.Drain() // the dialling clients rang
	}
	if err != nil {
		s.malLog.Warn(s.log, "stream: refused a shared-memory channel", "err", err)
	}
	for _, ch := range chans {
		s.log.Debug("stream: shared-memory client attached", "client_pid", ch.PeerPID())
		s.peers = append(s.peers, &shmPeer{ch: ch})
	}
}

// send answers p; false when the reply could not be delivered.
func (s *shmServer) send(p *shmPeer, msg []byte) bool {
	err := p.ch.Send(msg)
	switch {
	case err == nil:
		return true
	case errors.Is(err, shm.ErrFull), errors.Is(err, shm.ErrTooLarge):
		// The client times out and posts the request again.
		return false
	default: // gone, corrupt or already dropped
		if !errors.Is(err, shm.ErrClosed) {
			s.drop(p, "send failed", err)
		}
		return false
	}
}

func (s *shmServer) close() error {
	s.inbox.close() // before the doorbell closes with the listener
	s.shmPeers.close()
	return s.l.Close()
}

// shmClient is a RemoteInferenceClient's shared-memory side: a channel to
// every policy worker on this node that offers one.
type shmClient struct {
	shmPeers
	c      *shm.Client
	locals localLinks // to the policy workers of this process
	// pid is this process's id: channels to a policy worker in this
	// process (a colocated one, `--with`, with DISTRL_INPROCESS=0) are
	// kept first in peers, ownProcess of them, and take every request they
	// have room for.
	pid        int
	ownProcess int
	// sendNext is the channel the next request tries first, among the
	// local ones or, while there are none, among all.
	sendNext int
}

// newShmClient makes the client's doorbell; nil where shared memory is off
// or unavailable.
func newShmClient(log *slog.Logger) *shmClient {
	dir := shm.DefaultDir()
	if dir == "" {
		return nil
	}
	c, err := shm.NewClient(dir)
	if err != nil {
		log.Warn("stream: no shared-memory doorbell; requests to same-node policy workers go over ZMQ", "err", err)
		return nil
	}
	s := &shmClient{shmPeers: shmPeers{log: log, bell: c.Doorbell()}, c: c, pid: os.Getpid(),
		locals: newLocalLinks(log, c.Doorbell())}
	s.local = &s.locals
	return s
}

// observe links the records of this process's servers, dials those that
// offer a listener elsewhere on this node, and drops the links and
// channels whose record is gone or changed.
func (s *shmClient) observe(snap map[string]string) {
	dirs := make(map[string]string, len(snap))
	for key, rec := range snap {
		dirs[key] = zsock.SharedMemory(rec)
	}
	s.locals.observe(dirs)
	have := make(map[string]*shmPeer, len(s.peers))
	// Over a copy: drop removes from s.peers.
	for _, p := range slices.Clone(s.peers) {
		if dirs[p.key] != p.dir {
			s.drop(p, "policy worker unregistered", nil)
			continue
		}
		have[p.key] = p
	}
	for key, dir := range dirs {
		if dir == "" || have[key] != nil || s.locals.linked(key) {
			continue
		}
		ch, err := s.c.Dial(dir, 0)
		if err != nil {
			// ZMQ still reaches it.
			s.log.Warn("stream: cannot open shared memory to a policy worker on this node; using ZMQ", "key", key, "err", err)
			continue
		}
		s.log.Debug("stream: shared memory to policy worker", "key", key, "dir", dir)
		s.peers = append(s.peers, &shmPeer{key: key, dir: dir, ch: ch})
	}
	s.sortLocal()
}

// sortLocal moves the channels to policy workers of this process to the
// front of peers and counts them.
func (s *shmClient) sortLocal() {
	slices.SortStableFunc(s.peers, func(a, b *shmPeer) int {
		return cmp.Compare(s.rank(a), s.rank(b))
	})
	s.ownProcess = 0
	for _, p := range s.peers {
		if s.rank(p) == 0 {
			s.ownProcess++
		}
	}
}

// tier is the range of peers that holds the channels to this process
// (local) or to others. Clamped: the client recounts after its Poll drops
// a channel, but a stale count must never index past peers.
func (s *shmClient) tier(local bool) (lo, hi int) {
	l := min(s.ownProcess, len(s.peers))
	if local {
		return 0, l
	}
	return l, len(s.peers)
}

// rank is 0 for a channel to this process, else 1.
func (s *shmClient) rank(p *shmPeer) int {
	if p.ch.PeerPID() == s.pid {
		return 0
	}
	return 1
}

// send hands msg to the next channel with room, a policy worker of this
// process first (round robin among them, and among the others after);
// sent is false when none took it (none open, all full, or msg too large,
// or s is nil), and ZMQ must carry it; local says it went to this process.
//
// Why this process first: a policy worker hosted with its actor (`rlctl
// worker --with`, a group's colocate) answers in the same loop, with no
// hand-off between processes; on the 2-core development VM such a
// hand-off costs 6.5-6.8 us (worker.BenchmarkHandOff).
func (s *shmClient) send(msg []byte) (sent, local bool) {
	if s == nil {
		return false, false
	}
	for _, local := range []bool{true, false} {
		lo, hi := s.tier(local)
		for tries := hi - lo; tries > 0; tries-- {
			if lo, hi = s.tier(local); lo == hi { // a drop shrank it
				break
			}
			i := lo + s.sendNext%(hi-lo)
			s.sendNext++
			p := s.peers[i]
			err := p.ch.Send(msg)
			switch {
			case err == nil:
				return true, local
			case errors.Is(err, shm.ErrFull):
			case errors.Is(err, shm.ErrTooLarge):
				return false, false
			default:
				s.drop(p, "send failed", err)
				s.sortLocal()
			}
		}
	}
	return false, false
}

// postLocal hands the rows to a policy worker of this process; false when
// there is none (or s is nil).
func (s *shmClient) postLocal(ids []int64, obs []float32, dim int) bool {
	return s != nil && s.locals.post(ids, obs, dim)
}

func (s *shmClient) close() error {
	s.locals.close() // before the doorbell closes
	s.shmPeers.close()
	return s.c.Close()
}
