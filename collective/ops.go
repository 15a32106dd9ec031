package collective

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"
	"unsafe"
)

type kind uint8

const (
	kindToken kind = 1 + iota
	kindData
	kindBroadcast
	kindBarrier
)

const headerLen = 24

// header is a message's first frame: kind u8, more u8 (1: another
// fragment of this payload follows), 2 zero bytes, step u32, generation
// u64, sequence u64, little-endian.
type header struct {
	kind kind
	more bool
	step uint32
	gen  uint64
	seq  uint64
}

func putHeader(b []byte, h header) {
	b[0] = byte(h.kind)
	b[1], b[2], b[3] = 0, 0, 0
	if h.more {
		b[1] = 1
	}
	binary.LittleEndian.PutUint32(b[4:], h.step)
	binary.LittleEndian.PutUint64(b[8:], h.gen)
	binary.LittleEndian.PutUint64(b[16:], h.seq)
}

func parseHeader(frames [][]byte) (header, error) {
	if len(frames) != 2 || len(frames[0]) != headerLen {
		return header{}, fmt.Errorf("a message of %d frames, want a %d-byte header and a payload", len(frames), headerLen)
	}
	b := frames[0]
	return header{kind: kind(b[0]), more: b[1] == 1, step: binary.LittleEndian.Uint32(b[4:]),
		gen: binary.LittleEndian.Uint64(b[8:]), seq: binary.LittleEndian.Uint64(b[16:])}, nil
}

// begin starts a collective: the group must be formed.
func (g *Group) begin() error {
	if why := g.refresh(); why != "" {
		return g.failChanged(why)
	}
	if g.gen == 0 {
		return ErrNotFormed
	}
	g.seq++
	return nil
}

// send sends payload as the current collective's message to the right
// neighbour (through shared memory in fragments of at most fragment
// bytes), waiting (as recv does) while its queue is full.
func (g *Group) send(ctx context.Context, k kind, step uint32, payload []byte) error {
	var hdr [headerLen]byte
	frag := len(payload) // ZeroMQ takes a payload whole, without copying it into a ring
	if g.links.out != nil {
		frag = fragment
	}
	for {
		part := payload[:min(len(payload), frag)]
		payload = payload[len(part):]
		putHeader(hdr[:], header{kind: k, more: len(payload) > 0, step: step, gen: g.gen, seq: g.seq})
		err := g.wait(ctx, "send to", (g.o.Rank+1)%g.o.Size, func() (bool, error) {
			// The formation's last token goes first: the neighbour takes
			// no data before it.
			if g.flush(); len(g.outbox) > 0 {
				return false, g.stashIncoming()
			}
			sent, err := g.sendRaw(hdr[:], part)
			if !sent && err == nil {
				err = g.stashIncoming()
			}
			return sent, err
		})
		if err != nil || len(payload) == 0 {
			return err
		}
	}
}

// recv returns the payload of the next message of the current collective
// from the left neighbour, its fragments joined. A payload of one fragment
// may alias a buffer the next receive reuses. Messages of other
// generations are dropped; one out of sequence breaks the group.
func (g *Group) recv(ctx context.Context, k kind, step uint32) ([]byte, error) {
	var joined []byte
	for {
		p, more, err := g.recvFragment(ctx, k, step)
		switch {
		case err != nil:
			return nil, err
		case !more && joined == nil:
			return p, nil
		}
		joined = append(joined, p...)
		if !more {
			return joined, nil
		}
	}
}

func (g *Group) recvFragment(ctx context.Context, k kind, step uint32) ([]byte, bool, error) {
	var payload []byte
	var more bool
	err := g.wait(ctx, "receive from", (g.o.Rank+g.o.Size-1)%g.o.Size, func() (bool, error) {
		for {
			frames, ok, err := g.next()
			if err != nil || !ok {
				return false, err
			}
			h, ours, err := g.expect(frames, k, step)
			if err != nil {
				return false, err
			}
			if !ours {
				continue
			}
			payload, more = frames[1], h.more
			return true, nil
		}
	})
	return payload, more, err
}

// expect reads a message that should be step of the current collective,
// of kind k: not ours (false) when it belongs to a formation that broke or
// is the formation's last token, to be dropped; an error when it is ours
// but out of order.
func (g *Group) expect(frames [][]byte, k kind, step uint32) (header, bool, error) {
	h, err := parseHeader(frames)
	switch {
	case err != nil:
		return h, false, err
	case h.gen != g.gen || h.kind == kindToken:
		return h, false, nil
	case h.kind != k || h.seq != g.seq || h.step != step:
		return h, false, fmt.Errorf("message kind %d, collective %d, step %d out of order: expected kind %d, collective %d, step %d",
			h.kind, h.seq, h.step, k, g.seq, step)
	}
	return h, true, nil
}

// wait calls try until it reports done, waiting for the socket in
// between; it fails the group on try's error, the view changing, ctx, the
// caller's Idle hook, or Timeout without progress.
func (g *Group) wait(ctx context.Context, what string, peer int, try func() (bool, error)) error {
	deadline := time.Now().Add(g.o.Timeout)
	changed := ""
	for {
		done, err := try()
		switch {
		case err != nil:
			return g.fail(fmt.Errorf("%w: %s rank %d: %w", ErrBroken, what, peer, err))
		case done:
			return nil
		}
		if why := g.refresh(); why != "" && changed == "" {
			changed = why
			if grace := time.Now().Add(viewGrace); grace.Before(deadline) {
				deadline = grace
			}
		}
		if err := ctx.Err(); err != nil {
			return g.fail(fmt.Errorf("%w: %s rank %d: %w", ErrBroken, what, peer, err))
		}
		if g.o.Idle != nil {
			if err := g.o.Idle(); err != nil {
				return g.fail(fmt.Errorf("%w: while waiting to %s rank %d: %w", ErrBroken, what, peer, err))
			}
		}
		if time.Now().After(deadline) {
			if changed != "" {
				return g.failChanged(changed)
			}
			return g.fail(fmt.Errorf("%w: nothing could %s rank %d for %v", ErrBroken, what, peer, g.o.Timeout))
		}
		waitIO := g.waitIn
		if what == "send to" {
			waitIO = g.waitOut
		}
		if err := waitIO(waitSlice); err != nil {
			return g.fail(fmt.Errorf("%w: poll: %w", ErrBroken, err))
		}
	}
}

// number is an element type an all-reduce sums.
type number interface{ float32 | float64 }

func asBytes[T number](x []T) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), len(x)*int(unsafe.Sizeof(x[0])))
}

// AllreduceFloat32 replaces x on every member by the sum of the members'
// x, which must have the same length everywhere. On error x is in an
// unspecified state and the group is broken (forms again through Poll).
func (g *Group) AllreduceFloat32(ctx context.Context, x []float32) error { return allreduce(ctx, g, x) }

// AllreduceFloat64 is AllreduceFloat32 for float64.
func (g *Group) AllreduceFloat64(ctx context.Context, x []float64) error { return allreduce(ctx, g, x) }

func allreduce[T number](ctx context.Context, g *Group, x []T) error {
	n, r := g.o.Size, g.o.Rank
	if n == 1 {
		return nil
	}
	if err := g.begin(); err != nil {
		return err
	}
	chunk := func(c int) []T {
		c = ((c % n) + n) % n
		return x[c*len(x)/n : (c+1)*len(x)/n]
	}
	var step uint32
	// Reduce-scatter: after n-1 steps this member holds the whole sum of
	// chunk r+1.
	for s := range n - 1 {
		if err := g.send(ctx, kindData, step, asBytes(chunk(r-s))); err != nil {
			return err
		}
		dst := chunk(r - s - 1)
		p, err := g.recvChunk(ctx, step, len(asBytes(dst)))
		if err != nil {
			return err
		}
		add(dst, p)
		step++
	}
	// All-gather: pass the finished chunks round.
	for s := range n - 1 {
		if err := g.send(ctx, kindData, step, asBytes(chunk(r+1-s))); err != nil {
			return err
		}
		dst := chunk(r - s)
		p, err := g.recvChunk(ctx, step, len(asBytes(dst)))
		if err != nil {
			return err
		}
		copy(asBytes(dst), p)
		step++
	}
	return nil
}

// recvChunk receives a data message of exactly size bytes.
func (g *Group) recvChunk(ctx context.Context, step uint32, size int) ([]byte, error) {
	p, err := g.recv(ctx, kindData, step)
	if err != nil {
		return nil, err
	}
	if len(p) != size {
		return nil, g.fail(fmt.Errorf("%w: a chunk of %d bytes from the left, want %d: members reduce vectors of different lengths",
			ErrBroken, len(p), size))
	}
	return p, nil
}

// add adds the little-endian values of p to dst, through an aligned copy.
func add[T number](dst []T, p []byte) {
	var buf [512]T
	for len(dst) > 0 {
		m := min(len(dst), len(buf))
		copy(asBytes(buf[:m]), p)
		for i, v := range buf[:m] {
			dst[i] += v
		}
		dst, p = dst[m:], p[len(asBytes(buf[:m])):]
	}
}

// Broadcast returns rank 0's p on every member (the others' p is
// ignored).
func (g *Group) Broadcast(ctx context.Context, p []byte) ([]byte, error) {
	if g.o.Size == 1 {
		return p, nil
	}
	if err := g.begin(); err != nil {
		return nil, err
	}
	if g.o.Rank != 0 {
		got, err := g.recv(ctx, kindBroadcast, 0)
		if err != nil {
			return nil, err
		}
		p = bytes.Clone(got) // a received payload may alias a buffer reused
		if g.o.Rank == g.o.Size-1 {
			return p, nil
		}
	}
	if err := g.send(ctx, kindBroadcast, 0, p); err != nil {
		return nil, err
	}
	return p, nil
}

// Check compares every member's h with rank 0's; a difference is an error
// wrapping ErrDiverged that names the ranks (the group stays formed).
func (g *Group) Check(ctx context.Context, h uint64) error {
	n := g.o.Size
	if n == 1 {
		return nil
	}
	// Each member's hash in its own two slots, as 32-bit halves a float64
	// holds exactly; the sum is everyone's.
	v := make([]float64, 2*n)
	v[2*g.o.Rank], v[2*g.o.Rank+1] = float64(h>>32), float64(uint32(h))
	if err := g.AllreduceFloat64(ctx, v); err != nil {
		return err
	}
	at := func(r int) uint64 { return uint64(v[2*r])<<32 | uint64(v[2*r+1]) }
	var bad []int
	for r := 1; r < n; r++ {
		if at(r) != at(0) {
			bad = append(bad, r)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: rank 0's hash is %016x; ranks %v differ (this member, rank %d: %016x)", ErrDiverged, at(0), bad, g.o.Rank, h)
	}
	return nil
}

// Generation identifies the current formation (0 while forming): a
// member that sees it change knows the group formed anew.
func (g *Group) Generation() uint64 { return g.gen }

// Arrive is a barrier that never blocks: a member calls it once it is
// ready for the next collectives (a trainer with its share of an update
// buffered), and again at every turn of its loop until it returns true,
// which it does on every member once all have arrived. Members waiting
// for each other's readiness (samples still coming) thus keep serving,
// and the collectives that follow wait only for the members' compute. A
// token goes round the ring from rank 0, passed on by each member as it
// arrives, then a second time to release them. While it returns false,
// watch Socket to be woken when the token comes.
func (g *Group) Arrive() (bool, error) {
	if g.o.Size == 1 {
		return true, nil
	}
	g.drainBell() // the loop may have woken for it
	if g.barrier == 0 {
		if err := g.begin(); err != nil {
			return false, err
		}
		g.barrier = 1
		if g.o.Rank == 0 {
			g.post(header{kind: kindBarrier, step: 0, gen: g.gen, seq: g.seq}, nil)
		}
	} else if why := g.refresh(); why != "" {
		return false, g.failChanged(why)
	}
	g.flush()
	for {
		frames, ok, err := g.next()
		if err != nil {
			return false, g.fail(fmt.Errorf("%w: %w", ErrBroken, err))
		}
		if !ok {
			return false, nil
		}
		step := uint32(g.barrier - 1)
		_, ours, err := g.expect(frames, kindBarrier, step)
		if err != nil {
			return false, g.fail(fmt.Errorf("%w: in a barrier: %w", ErrBroken, err))
		}
		if !ours {
			continue
		}
		last := g.o.Rank == g.o.Size-1
		switch {
		case g.o.Rank == 0 && step == 0: // everyone has arrived: release them
			g.post(header{kind: kindBarrier, step: 1, gen: g.gen, seq: g.seq}, nil)
		case step == 0:
			g.post(header{kind: kindBarrier, step: 0, gen: g.gen, seq: g.seq}, nil)
			g.barrier = 2
			continue
		case !last:
			g.post(header{kind: kindBarrier, step: 1, gen: g.gen, seq: g.seq}, nil)
		}
		g.barrier = 0
		return true, nil
	}
}
