package worker

import (
	"fmt"
	"runtime"

	"github.com/vmihailenco/msgpack/v5"
)

// Threads is a worker configuration's number of CPU threads for one piece
// of parallel work, such as a policy worker's forward pass or a trainer's
// minibatch: a count from 1 to MaxThreads, or "auto" (the zero value, what
// an absent key gives), which AutoThreads resolves on the worker's node.
type Threads int

// MaxThreads bounds a configured count: more threads than that would each
// get too small a share of any batch distrl runs.
const MaxThreads = 256

// AutoThreads is what "auto" means on this node: a quarter of the cores the
// process may run on (its affinity mask, which SLURM's cgroups narrow),
// from 1 to 8. A worker shares its node with others, actors above all; a
// quarter leaves them most of it, and past 8 the batches of RL networks
// split into parts too small to pay for the hand-off.
func AutoThreads() int { return min(max(runtime.NumCPU()/4, 1), 8) }

// N returns the number of threads to run: the configured count, or
// AutoThreads for "auto".
func (t Threads) N() int {
	if t <= 0 {
		return AutoThreads()
	}
	return int(t)
}

// String returns "auto" or the count.
func (t Threads) String() string {
	if t <= 0 {
		return "auto"
	}
	return fmt.Sprint(int(t))
}

// EncodeMsgpack writes "auto" or the count.
func (t Threads) EncodeMsgpack(enc *msgpack.Encoder) error {
	if t <= 0 {
		return enc.EncodeString("auto")
	}
	return enc.EncodeInt(int64(t))
}

// DecodeMsgpack accepts "auto" or an integer from 1 to MaxThreads.
func (t *Threads) DecodeMsgpack(dec *msgpack.Decoder) error {
	v, err := dec.DecodeInterfaceLoose() // integers of any width as int64 or uint64
	if err != nil {
		return err
	}
	var n int64
	switch v := v.(type) {
	case string:
		if v == "auto" {
			*t = 0
			return nil
		}
		return fmt.Errorf("threads %q: want auto or a count from 1 to %d", v, MaxThreads)
	case int64:
		n = v
	case uint64:
		n = int64(min(v, MaxThreads+1))
	default:
		return fmt.Errorf("threads %v: want auto or a count from 1 to %d", v, MaxThreads)
	}
	if n < 1 || n > MaxThreads {
		return fmt.Errorf("threads %d: want auto or a count from 1 to %d", n, MaxThreads)
	}
	*t = Threads(n)
	return nil
}
