package collective

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/distrl/distrl/internal/endpoint"
	"github.com/distrl/distrl/internal/zsock"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/rpc"
	zmq "github.com/pebbe/zmq4"
)

// Errors for errors.Is.
var (
	// ErrBroken: a collective could not complete (a peer silent for the
	// timeout, the view changed, a protocol error); the group forms again
	// through Poll.
	ErrBroken = errors.New("collective: group broken")
	// ErrRefused: this member cannot join the group as configured (its
	// hash differs from rank 0's).
	ErrRefused = errors.New("collective: refused")
	// ErrNotFormed: a collective was called before Poll reported the group
	// formed.
	ErrNotFormed = errors.New("collective: group not formed")
	// ErrDiverged: Check found members whose hashes differ from rank 0's.
	ErrDiverged = errors.New("collective: members diverged")
)

const (
	// DefaultTimeout is how long a collective waits for a peer's message
	// before it declares the group broken. Members of a trainer group wait
	// for each other's sample intake too, so it is generous; a peer that
	// dies is noticed sooner, when its record expires.
	DefaultTimeout = 60 * time.Second
	// tokenResend is how often rank 0 sends a formation token again while
	// the group does not form (a token sent into a member that restarted
	// is lost with it).
	tokenResend = time.Second
	// viewGrace is how long a collective still waits for a message after
	// the view changed: a member that finished and left may have sent it.
	viewGrace = time.Second
	// pushLinger lets a member that closes deliver its last messages.
	pushLinger = time.Second
	// waitSlice is how often a waiting collective looks at the view and
	// calls Idle.
	waitSlice = 20 * time.Millisecond
	// maxMsgSize bounds one message (a broadcast of a learner's state, a
	// chunk): past it ZeroMQ drops the sender's connection.
	maxMsgSize = 1 << 30
	// registerTimeout bounds a re-registration after a break.
	registerTimeout = 5 * time.Second
)

// Options configure a member.
type Options struct {
	Repo  nameresolve.Repository
	Curve *rpc.CurveKeyPair
	Trial names.Trial
	// Name names the group in its trial: "trainer/{policy}".
	Name string
	// Rank is this member's place in 0..Size-1; rank 0 leads formation.
	Rank, Size int
	// Hash is what members must agree on: a member whose Hash is not rank
	// 0's is refused (ErrRefused).
	Hash string
	// Host is the address to bind and advertise (endpoint.DefaultHost if
	// empty); TTL the lease of the member's record (endpoint.DefaultTTL).
	Host string
	TTL  time.Duration
	// Timeout bounds every wait for a peer in a collective
	// (DefaultTimeout if zero).
	Timeout time.Duration
	// Idle, when set, is called every few milliseconds while a collective
	// waits for a peer, so that the caller keeps serving; its error aborts
	// the collective (and breaks the group).
	Idle   func() error
	Logger *slog.Logger
}

// record is a member's entry under trial.Group(name, rank).
type record struct {
	Addr string `json:"addr"`
	Inc  uint64 `json:"inc"`
	Hash string `json:"hash"`
}

// Group is one member of a collective group. Its methods belong to the
// goroutine that called Join.
type Group struct {
	o      Options
	log    *slog.Logger
	key    string
	pull   *zmq.Socket // bound; receives from the left neighbour
	pullFd int         // its ZMQ_FD
	push   *zmq.Socket // connected to the right neighbour
	links  links       // shared memory, between members on one node
	self   record
	watch  *endpoint.Watch

	members map[int]record // by rank, this member's own always self
	viewGen uint64         // generation of the complete view; 0 while incomplete
	right   string         // endpoint push is connected to
	gen     uint64         // generation formed; 0 while forming
	seq     uint64         // collectives since formation
	pending token          // a token of a view not seen yet
	outbox  []message      // to send as soon as the right neighbour's queue takes them
	// stash holds messages taken in (copied) while a send waited for room:
	// with bounded queues, two neighbours that both send before they
	// receive would otherwise wait for each other for ever.
	stash   [][][]byte
	barrier int       // Arrive's phase: 0 none, 1 first pass, 2 second
	sentAt  time.Time // rank 0: when it last started a formation pass

	reforms   int
	formedAt  time.Time
	lastBreak error
	// Own record as the watch last showed it: incs are every incarnation
	// this member registered; recordGone says the record went (deleted
	// by another process of this rank, or lost with an expired lease),
	// takenBy that another process registered this rank since.
	incs       map[uint64]bool
	recordGone bool
	takenBy    uint64
}

type token struct {
	gen   uint64
	round byte // 1: the check pass, 2: "go"
}

// Join binds this member's socket, registers it and starts watching the
// group. It does not wait for the others: Poll forms the group.
func Join(ctx context.Context, o Options) (*Group, error) {
	switch {
	case o.Size < 1 || o.Rank < 0 || o.Rank >= o.Size:
		return nil, fmt.Errorf("collective: rank %d of a group of %d", o.Rank, o.Size)
	case o.Name == "" || strings.ContainsAny(o.Name, " \n"):
		return nil, fmt.Errorf("collective: group name %q", o.Name)
	}
	if err := endpoint.Prepare("collective.Options", o.Repo, &o.Host, &o.TTL, nil); err != nil {
		return nil, err
	}
	o.Timeout = cmp.Or(o.Timeout, DefaultTimeout)
	g := &Group{o: o, log: zsock.LoggerOr(o.Logger).With("group", o.Name, "rank", o.Rank),
		key: o.Trial.Group(o.Name, o.Rank), members: map[int]record{}, incs: map[uint64]bool{}}
	if o.Size == 1 {
		return g, nil // a group of one has nobody to talk to
	}
	pull, addr, ipc, err := bindPull(o)
	if err != nil {
		return nil, err
	}
	g.pull = pull
	g.self.Addr = zsock.Advertise(addr, ipc, g.openLinks())
	g.pullFd, err = pull.GetFd()
	if err == nil {
		g.push, err = zsock.New(zmq.PUSH, endpoint.ConnectingOptions(pushLinger, o.Curve))
	}
	if err == nil {
		g.self.Hash = o.Hash
		err = g.register(ctx)
	}
	if err == nil {
		var snap map[string]string
		g.watch, snap, err = endpoint.NewWatch(ctx, o.Repo, o.Trial.GroupPrefix(o.Name), g.log)
		if err == nil {
			g.apply(snap)
		}
	}
	if err != nil {
		g.closeSockets()
		return nil, fmt.Errorf("collective: join %s as rank %d: %w", o.Name, o.Rank, err)
	}
	return g, nil
}

func bindPull(o Options) (sock *zmq.Socket, addr, ipc string, err error) {
	sock, addr, err = zsock.Bind(zmq.PULL, o.Host, zsock.Options{MaxMsgSize: maxMsgSize, Curve: o.Curve.SocketKeys()})
	if err != nil {
		return nil, "", "", fmt.Errorf("collective: bind: %w", err)
	}
	if ipc, err = zsock.BindIPC(sock); err != nil {
		sock.Close()
		return nil, "", "", fmt.Errorf("collective: bind ipc: %w", err)
	}
	return sock, addr, ipc, nil
}

// register writes this member's record with a fresh incarnation, which
// every other member sees as a new view.
func (g *Group) register(ctx context.Context) error {
	g.self.Inc = rand.Uint64() | 1 // never 0
	g.incs[g.self.Inc] = true
	return g.write(ctx)
}

// write (re)writes this member's record as it is.
func (g *Group) write(ctx context.Context) error {
	val, err := json.Marshal(g.self)
	if err != nil {
		return err
	}
	err = g.o.Repo.Add(ctx, g.key, string(val), nameresolve.AddOptions{TTL: g.o.TTL, Replace: true, DeleteOnExit: true})
	if err != nil {
		return fmt.Errorf("register %q: %w", g.key, err)
	}
	g.members[g.o.Rank] = g.self
	g.recompute()
	return nil
}

// apply reads a snapshot of the group's records into the view.
func (g *Group) apply(snap map[string]string) {
	prefix := g.o.Trial.GroupPrefix(g.o.Name)
	clear(g.members)
	g.recordGone = true
	for key, val := range snap {
		rank, err := strconv.Atoi(strings.TrimPrefix(key, prefix))
		if err != nil || rank < 0 || rank >= g.o.Size {
			continue // another size's record
		}
		var r record
		if err := json.Unmarshal([]byte(val), &r); err != nil || r.Inc == 0 {
			g.log.Warn("collective: ignoring a malformed member record", "key", key, "err", err)
			continue
		}
		if rank == g.o.Rank { // self is the truth; the record says whether it is still ours
			g.recordGone = false
			if !g.incs[r.Inc] {
				g.takenBy = r.Inc
			}
			continue
		}
		g.members[rank] = r
	}
	g.members[g.o.Rank] = g.self
	g.recompute()
}

// recompute derives the view's generation: a hash of every rank's
// incarnation once all are there.
func (g *Group) recompute() {
	h := fnv.New64a()
	for rank := range g.o.Size {
		r, ok := g.members[rank]
		if !ok {
			g.viewGen = 0
			return
		}
		fmt.Fprintf(h, "%d:%d;", rank, r.Inc)
	}
	g.viewGen = h.Sum64() | 1
}

// Missing lists the ranks not registered yet (for a status line).
func (g *Group) Missing() []int {
	var out []int
	for rank := range g.o.Size {
		if _, ok := g.members[rank]; !ok {
			out = append(out, rank)
		}
	}
	return out
}

// refresh takes the newest snapshot of the records, if one came, and
// reports why a formed group's view is no longer its formation ("" while
// it is, or while forming).
func (g *Group) refresh() string {
	if g.watch == nil {
		return ""
	}
	if snap, ok := g.watch.Take(); ok {
		g.apply(snap)
	}
	switch {
	case g.gen == 0 || g.viewGen == g.gen:
		return ""
	case g.viewGen == 0:
		return "a member's record is gone (its process ended, or its lease expired)"
	default:
		return "a member joined again (restarted, or its group broke)"
	}
}

// Poll advances formation without blocking and reports whether the group
// is formed. Its error wraps ErrRefused when this member cannot join as
// configured; anything else it returns is a failure to re-register.
func (g *Group) Poll() (bool, error) {
	if g.o.Size == 1 {
		return true, nil
	}
	why := g.refresh()
	if g.takenBy != 0 {
		return false, fmt.Errorf("%w: rank %d of group %s was registered by another process (incarnation %x) since this one joined: this one steps down",
			ErrRefused, g.o.Rank, g.o.Name, g.takenBy)
	}
	if g.recordGone {
		// Deleted by a process of this rank that closed after this one
		// replaced it, or lost with a lease: written again, with the same
		// incarnation, so that nothing else changes.
		ctx, cancel := context.WithTimeout(context.Background(), registerTimeout)
		err := g.write(ctx)
		cancel()
		if err != nil {
			return false, fmt.Errorf("collective: rewriting the record of rank %d: %w", g.o.Rank, err)
		}
		g.recordGone = false
		g.log.Info("collective: member record written again", "key", g.key)
	}
	if why != "" {
		g.failChanged(why)
	}
	if g.gen != 0 {
		return true, nil
	}
	if g.viewGen == 0 {
		return false, nil
	}
	if lead := g.members[0]; lead.Hash != g.self.Hash {
		return false, fmt.Errorf("%w: rank %d of group %s is configured differently from rank 0 (hash %s, rank 0's %s): a different network or configuration",
			ErrRefused, g.o.Rank, g.o.Name, g.self.Hash, lead.Hash)
	}
	if err := g.connectRight(); errors.Is(err, errNeighbourAway) {
		g.log.Debug("collective: waiting for the right neighbour", "err", err)
		return false, nil
	} else if err != nil {
		return false, err
	}
	g.flush()
	if g.pending.gen == g.viewGen {
		t := g.pending
		g.pending = token{}
		g.onToken(t)
	}
	for g.gen == 0 {
		frames, ok, err := g.next()
		if err != nil {
			return false, err
		}
		if !ok {
			break
		}
		h, err := parseHeader(frames)
		if err != nil || h.kind != kindToken || len(frames[1]) != 1 {
			continue // data of a formation that broke
		}
		g.onToken(token{gen: h.gen, round: frames[1][0]})
	}
	if g.gen == 0 && g.o.Rank == 0 && time.Since(g.sentAt) >= tokenResend {
		g.sentAt = time.Now()
		g.sendToken(token{gen: g.viewGen, round: 1})
	}
	return g.gen != 0, nil
}

func (g *Group) onToken(t token) {
	if t.gen != g.viewGen {
		g.pending = t // perhaps a view this member has not seen yet
		return
	}
	if g.o.Rank == 0 {
		if t.round == 1 { // back round the ring: everyone is connected with this view
			g.sendToken(token{gen: t.gen, round: 2})
			g.form()
		}
		return
	}
	g.sendToken(t)
	if t.round == 2 {
		g.form()
	}
}

func (g *Group) form() {
	g.gen, g.seq, g.formedAt = g.viewGen, 0, time.Now()
	g.log.Info("collective: group formed", "size", g.o.Size, "generation", fmt.Sprintf("%016x", g.gen), "reforms", g.reforms)
}

// connectRight points this member's link at the right neighbour of the
// view: its shared-memory listener when it advertises one on this node
// (and this member can dial), else its socket.
func (g *Group) connectRight() error {
	addr := g.members[(g.o.Rank+1)%g.o.Size].Addr
	dir := zsock.SharedMemory(addr)
	if g.links.cli == nil {
		dir = ""
	}
	ep := zsock.Endpoint(addr)
	if dir != "" {
		ep = "shm://" + dir
	}
	if ep == g.right {
		return nil
	}
	if g.right != "" && g.links.out == nil {
		if err := g.push.Disconnect(g.right); err != nil {
			g.log.Debug("collective: disconnect", "endpoint", g.right, "err", err)
		}
	}
	g.right, g.outbox = "", nil
	if err := g.dialRight(dir); err != nil {
		return err
	}
	if dir == "" {
		if err := g.push.Connect(ep); err != nil {
			return fmt.Errorf("collective: connect to rank %d at %s: %w", (g.o.Rank+1)%g.o.Size, ep, err)
		}
	}
	g.right = ep
	return nil
}

// message is a message queued for the right neighbour.
type message struct {
	hdr     [headerLen]byte
	payload []byte
}

// sendToken queues t for the right neighbour (see post).
func (g *Group) sendToken(t token) {
	if len(g.outbox) >= 8 { // never connected: only the newest matter
		g.outbox = g.outbox[1:]
	}
	g.post(header{kind: kindToken, gen: t.gen}, []byte{t.round})
}

// post queues a message for the right neighbour and sends what the
// connection takes without waiting (the PUSH socket queues nothing before
// its connection is up); Poll, Arrive and every collective send the rest
// first, so that order is kept.
func (g *Group) post(h header, payload []byte) {
	var m message
	putHeader(m.hdr[:], h)
	m.payload = payload
	g.outbox = append(g.outbox, m)
	g.flush()
}

func (g *Group) flush() {
	for len(g.outbox) > 0 {
		m := &g.outbox[0]
		sent, err := g.sendRaw(m.hdr[:], m.payload)
		if err != nil {
			g.log.Debug("collective: message not sent", "err", err)
		}
		if !sent {
			return
		}
		g.outbox = g.outbox[1:]
	}
}

// fail breaks the group after a failed collective: this member draws a
// new incarnation, so that every member's view changes and the whole group
// forms again. It returns err, which wraps ErrBroken.
func (g *Group) fail(err error) error {
	g.gen, g.pending, g.outbox, g.barrier = 0, token{}, nil, 0
	clear(g.stash)
	g.stash = g.stash[:0]
	g.reforms++
	g.lastBreak = err
	g.log.Warn("collective: group broken; forming again", "err", err, "formed_for", time.Since(g.formedAt).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), registerTimeout)
	defer cancel()
	if rerr := g.register(ctx); rerr != nil {
		g.log.Warn("collective: re-registering", "err", rerr)
	}
	return err
}

// failChanged breaks the group because its view is no longer its
// formation's (refresh's why).
func (g *Group) failChanged(why string) error {
	return g.fail(fmt.Errorf("%w: the group changed: %s", ErrBroken, why))
}

// Socket is the socket messages arrive on, for a caller that waits in
// Arrive to watch (nil for a group of one). Outside Arrive and the
// collectives nothing reads it, so it may stay readable.
func (g *Group) Socket() *zmq.Socket { return g.pull }

// Formed reports whether the group is formed (as of the last Poll or
// collective).
func (g *Group) Formed() bool { return g.o.Size == 1 || g.gen != 0 }

// Rank and Size are the member's place and the group's size.
func (g *Group) Rank() int { return g.o.Rank }
func (g *Group) Size() int { return g.o.Size }

// Reforms counts the times the group broke under this member.
func (g *Group) Reforms() int { return g.reforms }

// LastBreak is the error of the last break, or nil.
func (g *Group) LastBreak() error { return g.lastBreak }

// Close unregisters the member and closes its sockets.
func (g *Group) Close() error {
	if g.o.Size == 1 {
		return nil
	}
	if g.watch != nil {
		g.watch.Close()
	}
	pull := g.pull
	g.pull = nil
	err := endpoint.Close(g.o.Repo, g.key, pull, "collective member")
	g.closeSockets()
	return err
}

func (g *Group) closeSockets() {
	g.closeLinks()
	for _, s := range []*zmq.Socket{g.pull, g.push} {
		if s != nil {
			s.Close()
		}
	}
	g.pull, g.push = nil, nil
}
