package shm

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"
)

// wrapMark in a length word says the message continues at offset 0.
const wrapMark = ^uint32(0)

// ring is one direction of a channel: a single-producer single-consumer
// queue of length-prefixed messages in shared memory. Positions only grow;
// a position's offset in data is pos & mask. The producer owns tail, the
// consumer head; each keeps its own copy, so a peer that scribbles on the
// shared word can make this side see a corrupt ring, never move its own
// position backwards.
type ring struct {
	tail, head *uint64 // shared: published positions
	sleeping   *uint32 // shared: the consumer is about to sleep (ring its doorbell)
	data       []byte
	mask       uint64
	pos        uint64 // this side's own position: tail (producer) or head (consumer)
}

func newRing(ctl []byte, data []byte) ring {
	return ring{
		tail:     (*uint64)(unsafe.Pointer(&ctl[0])),
		head:     (*uint64)(unsafe.Pointer(&ctl[64])),
		sleeping: (*uint32)(unsafe.Pointer(&ctl[128])),
		data:     data,
		mask:     uint64(len(data) - 1),
	}
}

func align8(n uint64) uint64 { return (n + 7) &^ 7 }

// maxMessage is the largest message the ring takes.
func (r *ring) maxMessage() int { return len(r.data) - 8 }

// put appends the message first+rest (rest may be nil) and publishes it.
// It returns ErrFull when the consumer has not freed enough room yet.
// Taking the message in two parts spares a caller that frames a payload
// the copy that would join them.
func (r *ring) put(first, rest []byte) error {
	size := uint64(len(r.data))
	n := len(first) + len(rest)
	need := align8(4 + uint64(n))
	if n > r.maxMessage() {
		return ErrTooLarge
	}
	head := atomic.LoadUint64(r.head)
	used := r.pos - head
	if used > size {
		return ErrCorrupt
	}
	free := size - used
	off := r.pos & r.mask
	if toEnd := size - off; toEnd < need {
		// The message is contiguous: skip to the start, marking the rest.
		if free < toEnd+need {
			return ErrFull
		}
		binary.LittleEndian.PutUint32(r.data[off:], wrapMark)
		r.pos += toEnd
		off = 0
	} else if free < need {
		return ErrFull
	}
	binary.LittleEndian.PutUint32(r.data[off:], uint32(n))
	copy(r.data[off+4+uint64(copy(r.data[off+4:], first)):], rest)
	r.pos += need
	atomic.StoreUint64(r.tail, r.pos)
	return nil
}

// get copies the next message into buf[:0] and frees its room; a nil
// message and nil error mean the ring is empty.
func (r *ring) get(buf []byte) ([]byte, error) {
	size := uint64(len(r.data))
	for {
		tail := atomic.LoadUint64(r.tail)
		avail := tail - r.pos
		if avail == 0 {
			return nil, nil
		}
		if avail > size {
			return nil, ErrCorrupt
		}
		off := r.pos & r.mask
		toEnd := size - off
		n := binary.LittleEndian.Uint32(r.data[off:])
		if n == wrapMark {
			if toEnd > avail {
				return nil, ErrCorrupt
			}
			r.pos += toEnd
			atomic.StoreUint64(r.head, r.pos)
			continue
		}
		need := align8(4 + uint64(n))
		if need > toEnd || need > avail {
			return nil, ErrCorrupt
		}
		if buf == nil {
			buf = make([]byte, 0, n) // non-nil: an empty message is not "none"
		}
		buf = append(buf[:0], r.data[off+4:off+4+uint64(n)]...)
		r.pos += need
		atomic.StoreUint64(r.head, r.pos)
		return buf, nil
	}
}

// pending reports whether a message (or a wrap mark) is waiting.
func (r *ring) pending() bool { return atomic.LoadUint64(r.tail) != r.pos }
