package stream

import (
	"log/slog"
	"os"
	"slices"
	"sync"

	"github.com/distrl/distrl/internal/shm"
)

// A client and a server in one process (a policy worker hosted with its
// actor: `rlctl worker --with`, a group's colocate) skip the wire. The
// client hands a copy of its queued rows to the server's inbox and the
// server hands each request's results back, as Go values under a mutex a
// side: no encoding, no ring, no decoding. Through a shared-memory ring to
// its own process, the encoding and decoding of both messages and the
// rings' copies were about a fifth of a colocated actor's CPU (CartPole,
// rings of 16, `cartpole-sink`). The server's shared-memory listener
// names it within the process (its record advertises the directory), so
// the in-process path exists where shared memory does; each side's
// doorbell wakes the other when it was about to sleep, as with the rings.
// The two may run on different goroutines.

// InProcessEnv names the environment variable that, set to "0", keeps a
// client off the in-process path: its requests to a server of its own
// process then go through a shared-memory ring like any other on the
// node, for measuring one against the other.
const InProcessEnv = "DISTRL_INPROCESS"

// inProcessServers are this process's inference servers' inboxes, by
// shared-memory listener directory.
var inProcessServers struct {
	sync.Mutex
	m map[string]*localInbox
}

// localInbox is a server's side of the in-process path: a queue per
// client (link), taken in turn. mu guards every field and the links'
// request queues.
type localInbox struct {
	mu       sync.Mutex
	links    []*localLink
	next     int // the link the next take starts at, for fairness
	sleeping bool
	closed   bool
	bell     *shm.Doorbell // the server's
	dir      string
}

// localRequest is one flushed request: its ids and rows, copied out of the
// client's queue into storage the server hands back (localLink.free).
type localRequest struct {
	link *localLink
	ids  []int64
	obs  []float32
	dim  int
}

// localResult is one row's outcome for the client.
type localResult struct {
	id      int64
	res     InferenceResult
	first   bool // the first row of its request: its round trip is timed
	refused bool
}

// localLink is one client's channel to one server of its process. The
// request queue belongs to the server's inbox (its mu); mu guards the
// rest.
type localLink struct {
	in   *localInbox
	key  string // the server's record (client side)
	dir  string
	reqs []*localRequest // guarded by in.mu

	mu       sync.Mutex
	results  []localResult
	refusal  string
	free     []*localRequest
	sleeping bool
	closed   bool
	bell     *shm.Doorbell // the client's
}

// newLocalInbox registers an inbox for the server whose listener is dir.
func newLocalInbox(dir string, bell *shm.Doorbell) *localInbox {
	in := &localInbox{dir: dir, bell: bell}
	inProcessServers.Lock()
	defer inProcessServers.Unlock()
	if inProcessServers.m == nil {
		inProcessServers.m = map[string]*localInbox{}
	}
	inProcessServers.m[dir] = in
	return in
}

// localInboxAt is the inbox of this process's server listening at dir; nil
// when the server is in another process.
func localInboxAt(dir string) *localInbox {
	inProcessServers.Lock()
	defer inProcessServers.Unlock()
	return inProcessServers.m[dir]
}

// connect opens a link for a client waking on bell; nil once the server
// has closed.
func (in *localInbox) connect(key, dir string, bell *shm.Doorbell) *localLink {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return nil
	}
	l := &localLink{in: in, key: key, dir: dir, bell: bell}
	in.links = append(in.links, l)
	return l
}

// push queues r on its link; false when the server has closed. (A link
// the client closed is out of its list: it posts nothing there.) A server
// about to sleep is woken.
func (in *localInbox) push(r *localRequest) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return false
	}
	r.link.reqs = append(r.link.reqs, r)
	if in.sleeping {
		// Under mu, so that Close cannot close the doorbell in between.
		in.sleeping = false
		in.bell.Ring()
	}
	return true
}

// take returns the oldest request of the next link that has one, if it
// has at most room rows or whole is true (the batch is empty: a request
// larger than a batch is taken alone); full says one was waiting that did
// not fit.
func (in *localInbox) take(room int, whole bool) (r *localRequest, full bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for range len(in.links) {
		in.next %= len(in.links)
		l := in.links[in.next]
		in.next++
		if len(l.reqs) == 0 {
			continue
		}
		if r = l.reqs[0]; len(r.ids) > room && !whole {
			in.next-- // its turn again next time
			return nil, true
		}
		// Slid, not resliced, so that the array is reused: a client has a
		// request or two queued at a time.
		n := copy(l.reqs, l.reqs[1:])
		l.reqs[n] = nil
		l.reqs = l.reqs[:n]
		return r, false
	}
	return nil, false
}

// drop forgets l and the requests it has queued (the client is gone or
// stopped using this server: they time out there, if it is still there).
func (in *localInbox) drop(l *localLink) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.links = slices.DeleteFunc(in.links, func(m *localLink) bool { return m == l })
	l.reqs = nil
}

// The server's localSide.
func (in *localInbox) arm() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.sleeping = true
	return !in.pendingLocked()
}

func (in *localInbox) pending() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.pendingLocked()
}

func (in *localInbox) pendingLocked() bool {
	for _, l := range in.links {
		if len(l.reqs) > 0 {
			return true
		}
	}
	return false
}

func (in *localInbox) count() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.links)
}

// close unregisters the inbox and turns its links away: clients drop them
// at their next send, and what they had queued times out there. It must
// come before the server's doorbell closes.
func (in *localInbox) close() {
	inProcessServers.Lock()
	if inProcessServers.m[in.dir] == in {
		delete(inProcessServers.m, in.dir)
	}
	inProcessServers.Unlock()
	in.mu.Lock()
	defer in.mu.Unlock()
	in.closed = true
	for _, l := range in.links {
		l.reqs = nil
	}
	in.links = nil
}

// buffer is storage for the next request: one the server handed back, or
// a new one.
func (l *localLink) buffer() *localRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.free); n > 0 {
		r := l.free[n-1]
		l.free[n-1] = nil
		l.free = l.free[:n-1]
		return r
	}
	return &localRequest{link: l}
}

// recycle hands r's storage back to its client.
func (l *localLink) recycle(r *localRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.free = append(l.free, r)
}

// reply gives the client the results of the rows of ids, rows of rr from
// start on, or, where refusal is not "", refuses them; false when the
// client has gone.
func (l *localLink) reply(ids []int64, rr *replyRows, start int, refusal string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	for i, id := range ids {
		res := localResult{id: id, first: i == 0, refused: refusal != ""}
		if refusal == "" {
			res.res = rr.at(start + i)
		}
		l.results = append(l.results, res)
	}
	if refusal != "" {
		l.refusal = refusal
	}
	if l.sleeping {
		l.sleeping = false
		l.bell.Ring()
	}
	return true
}

// takeResults swaps the results waiting with spare (emptied), and returns
// them with the last refusal's reason.
func (l *localLink) takeResults(spare []localResult) ([]localResult, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	got := l.results
	l.results = spare[:0]
	return got, l.refusal
}

func (l *localLink) arm() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sleeping = true
	return len(l.results) == 0
}

func (l *localLink) pending() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.results) > 0
}

// close stops the server's replies; it must come before the client's
// doorbell closes.
func (l *localLink) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.in.drop(l)
}

// localLinks are a client's links to the servers of its process, tried in
// turn.
type localLinks struct {
	log   *slog.Logger
	bell  *shm.Doorbell
	links []*localLink
	next  int
	spare []localResult
	on    bool // InProcessEnv is not "0"
}

func newLocalLinks(log *slog.Logger, bell *shm.Doorbell) localLinks {
	return localLinks{log: log, bell: bell, on: os.Getenv(InProcessEnv) != "0"}
}

// observe links the servers of this process among the records dirs (key
// -> shared-memory directory) and drops the links whose record is gone or
// changed; the caller dials shared memory for the records left unlinked
// (linked).
func (s *localLinks) observe(dirs map[string]string) {
	s.links = slices.DeleteFunc(s.links, func(l *localLink) bool {
		if dirs[l.key] == l.dir {
			return false
		}
		s.log.Debug("stream: in-process policy worker unregistered", "key", l.key)
		l.close()
		return true
	})
	if !s.on {
		return
	}
	for key, dir := range dirs {
		if dir == "" || s.linked(key) {
			continue
		}
		in := localInboxAt(dir)
		if in == nil {
			continue
		}
		if l := in.connect(key, dir, s.bell); l != nil {
			s.log.Debug("stream: in-process policy worker", "key", key)
			s.links = append(s.links, l)
		}
	}
}

// linked reports whether the record key has a link.
func (s *localLinks) linked(key string) bool {
	return slices.ContainsFunc(s.links, func(l *localLink) bool { return l.key == key })
}

// post hands a copy of ids and obs (rows of dim) to the next server that
// takes it; false when none did (none linked, or all closed: those are
// dropped).
func (s *localLinks) post(ids []int64, obs []float32, dim int) bool {
	for len(s.links) > 0 {
		s.next %= len(s.links)
		l := s.links[s.next]
		s.next++
		r := l.buffer()
		r.ids, r.obs, r.dim = append(r.ids[:0], ids...), append(r.obs[:0], obs...), dim
		if l.in.push(r) {
			return true
		}
		s.log.Debug("stream: in-process policy worker closed", "key", l.key)
		l.close()
		s.links = slices.DeleteFunc(s.links, func(m *localLink) bool { return m == l })
	}
	return false
}

// take calls settle for every result waiting on any link.
func (s *localLinks) take(settle func(r *localResult, refusal string)) {
	for _, l := range s.links {
		got, refusal := l.takeResults(s.spare)
		for i := range got {
			settle(&got[i], refusal)
			got[i].res.ContAction = nil
		}
		s.spare = got
	}
}

// The client's localSide.
func (s *localLinks) arm() bool {
	sleep := true
	for _, l := range s.links {
		sleep = l.arm() && sleep
	}
	return sleep
}

func (s *localLinks) pending() bool {
	return slices.ContainsFunc(s.links, (*localLink).pending)
}

func (s *localLinks) count() int { return len(s.links) }

func (s *localLinks) close() {
	for _, l := range s.links {
		l.close()
	}
	s.links = nil
}
