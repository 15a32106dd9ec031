package trainerworker

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"time"

	"github.com/distrl/distrl/algo/ppo"
	"github.com/distrl/distrl/collective"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker"
	zmq "github.com/pebbe/zmq4"
)

// formingQuiet is how long a group forms before its trainers warn: one
// that starts or restarts forms in well under that.
const formingQuiet = 5 * time.Second

// Defaults of GroupConfig.
const (
	DefaultGroupCheckEvery = 10
	DefaultGroupTimeoutMs  = int64(collective.DefaultTimeout / time.Millisecond)
)

// GroupConfig makes several trainers of one policy one data-parallel
// learner (package collective): the controller passes a trainer group's
// count as group_size, and trainer i is rank i.
type GroupConfig struct {
	// GroupSize is the number of members; 0 or 1: this trainer learns
	// alone.
	GroupSize int `msgpack:"group_size"`
	// GroupTimeoutMs bounds a wait for a member inside an update before
	// the group is declared broken and forms again (default 60000).
	GroupTimeoutMs int64 `msgpack:"group_timeout_ms"`
	// GroupCheckEvery compares a hash of the members' parameters every
	// that many updates (default 10); a difference is an error.
	GroupCheckEvery int `msgpack:"group_check_every"`
}

// check fills in the defaults and checks the group of trainer index.
func (c *GroupConfig) check(index int) error {
	c.GroupSize = max(c.GroupSize, 1)
	if c.GroupTimeoutMs == 0 {
		c.GroupTimeoutMs = DefaultGroupTimeoutMs
	}
	if c.GroupCheckEvery == 0 {
		c.GroupCheckEvery = DefaultGroupCheckEvery
	}
	switch {
	case c.GroupTimeoutMs < 1 || c.GroupCheckEvery < 1:
		return badConfig("group_timeout_ms %d, group_check_every %d: want >= 1", c.GroupTimeoutMs, c.GroupCheckEvery)
	case index >= c.GroupSize:
		return badConfig("trainer %d of a group of %d (group_size): a group's trainers are ranks 0..%d", index, c.GroupSize, c.GroupSize-1)
	}
	return nil
}

// groupHash fingerprints what a group's members must share: the network
// and every hyperparameter of the update, not the per-worker seed (rank
// 0's parameters and state are everyone's) or checkpoint directory.
func groupHash(parts ...any) string {
	// fmt prints structs field by field and maps sorted: the same
	// configuration gives the same text in every process.
	sum := sha256.Sum256(fmt.Appendf(nil, "%+v", parts))
	return hex.EncodeToString(sum[:8])
}

// paramsHash is the hash Check compares: the parameters' bits.
func paramsHash(p []float32) uint64 {
	h := fnv.New64a()
	var b [4]byte
	for _, v := range p {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
		h.Write(b[:])
	}
	return h.Sum64()
}

// groupMember is a trainer's place in its data-parallel group: the collective
// and what the trainer tracks of it. A trainer alone has none (nil).
type groupMember struct {
	*collective.Group
	// synced is the generation whose formation this member's state came
	// from rank 0 in; a new generation means a new synchronisation.
	synced     uint64
	checkEvery int
	syncs      int
	waitSince  time.Time // when it started forming, for the status
	// arriving: waiting at the barrier before an update, when the loop
	// watches the group's socket; sockVersion counts its changes
	// (worker.SocketSetter).
	arriving    bool
	sockVersion uint64

	metrics     *telemetry.Trainer
	seenReforms int
	// Time in all-reduces: since the last update, in the last update, in
	// all.
	comm, commLast, commTotal time.Duration
}

// joinGroup joins the group of the trainer's policy, unless it has a
// group of one. idle keeps rank 0 answering parameter fetches while an
// update waits for the others.
func joinGroup(ctx context.Context, info worker.Info, m *telemetry.Trainer, policy string, gc GroupConfig, hash string, idle func() error) (*groupMember, error) {
	if gc.GroupSize <= 1 {
		return nil, nil
	}
	g, err := collective.Join(ctx, collective.Options{
		Repo: info.Repo, Curve: info.Curve, Trial: info.Trial, Name: TypeName + "/" + policy,
		Rank: info.Index, Size: gc.GroupSize, Hash: hash, Host: info.Host, TTL: info.TTL,
		Timeout: time.Duration(gc.GroupTimeoutMs) * time.Millisecond, Idle: idle, Logger: info.Log(),
	})
	if err != nil {
		return nil, fmt.Errorf("trainer: %w", err)
	}
	return &groupMember{Group: g, checkEvery: gc.GroupCheckEvery, waitSince: time.Now(), metrics: m}, nil
}

// leads reports whether the trainer publishes and checkpoints: rank 0 of
// its group, or a trainer alone.
func (m *groupMember) leads() bool { return m == nil || m.Rank() == 0 }

// reducer is the group as a ppo.Reducer (a dqn.Reducer too), nil for a
// trainer alone (an interface holding a nil *groupMember would not be).
func (m *groupMember) reducer() ppo.Reducer {
	if m == nil {
		return nil
	}
	return m
}

// AllreduceFloat32 and AllreduceFloat64 are the group's, timed.
func (m *groupMember) AllreduceFloat32(ctx context.Context, x []float32) error {
	defer m.timed(time.Now())
	return m.Group.AllreduceFloat32(ctx, x)
}

func (m *groupMember) AllreduceFloat64(ctx context.Context, x []float64) error {
	defer m.timed(time.Now())
	return m.Group.AllreduceFloat64(ctx, x)
}

func (m *groupMember) timed(begin time.Time) {
	d := time.Since(begin)
	m.comm += d
	m.commTotal += d
	m.metrics.AllreduceSeconds.Add(d.Seconds())
}

// updated closes an update's account of time in all-reduces.
func (m *groupMember) updated() {
	if m != nil {
		m.commLast, m.comm = m.comm, 0
	}
}

// ready forms the group and reports whether the trainer may learn: the
// group is formed and the member's state is rank 0's of this formation.
// sync exchanges that state (rank 0 sends, the others restore).
func (m *groupMember) ready(ctx context.Context, sync func(ctx context.Context) error) (bool, error) {
	if m == nil {
		return true, nil
	}
	formed, err := m.Poll()
	if r := m.Reforms(); r > m.seenReforms {
		m.metrics.GroupReforms.Add(float64(r - m.seenReforms))
		m.seenReforms = r
	}
	if err != nil {
		return false, fmt.Errorf("trainer: group: %w", err)
	}
	if !formed {
		if m.synced != 0 || m.waitSince.IsZero() {
			m.synced, m.waitSince = 0, time.Now()
		}
		return false, nil
	}
	if m.learning() {
		return true, nil
	}
	if err := sync(ctx); err != nil {
		if errors.Is(err, collective.ErrBroken) {
			return false, nil // forms again
		}
		return false, err
	}
	m.synced = m.Generation()
	m.syncs++
	m.waitSince = time.Time{}
	return true, nil
}

// arrive waits, without blocking, for every member to have its share of
// the next update (collective.Group.Arrive). A group that broke meanwhile
// is not an error: it forms again, and the buffer goes at the sync.
func (m *groupMember) arrive() (bool, error) {
	if m == nil {
		return true, nil
	}
	done, err := m.Arrive()
	if arriving := !done && err == nil; arriving != m.arriving {
		m.arriving = arriving
		m.sockVersion++
	}
	if errors.Is(err, collective.ErrBroken) || errors.Is(err, collective.ErrNotFormed) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("trainer: group: %w", err)
	}
	return done, nil
}

// socketsVersion changes whenever the trainer's Sockets gain or lose the
// group's socket, so that the worker loop watches it exactly while the
// member waits at the barrier: watched at other times, a token or data
// waiting for the member's next update would wake the loop at every turn.
func (m *groupMember) socketsVersion() uint64 {
	if m == nil {
		return 0
	}
	return m.sockVersion
}

// learning reports whether the group is formed and this member's state is
// rank 0's of that formation.
func (m *groupMember) learning() bool { return m.Formed() && m.synced == m.Generation() }

// sockets is the group's socket while the member waits at the barrier
// (Sockets), so that the left neighbour's token wakes it; at other times a
// token or data waiting for the member's next update would wake the loop
// at every turn.
func (m *groupMember) sockets() []*zmq.Socket {
	if m == nil || !m.arriving {
		return nil
	}
	return []*zmq.Socket{m.Socket()}
}

// waitFds is the group's shared-memory doorbell while the member waits at
// the barrier (worker.FdWaiter), so that the left neighbour's token wakes
// it; prepareWait tells that neighbour it sleeps.
func (m *groupMember) waitFds() []int {
	if m == nil || !m.arriving {
		return nil
	}
	if fd := m.WaitFd(); fd >= 0 {
		return []int{fd}
	}
	return nil
}

func (m *groupMember) prepareWait() bool {
	if m == nil || !m.arriving {
		return true
	}
	return m.PrepareWait()
}

// warning says what keeps a group that is not formed from learning.
func (m *groupMember) warning() string {
	if m == nil || m.learning() || m.waitSince.IsZero() || time.Since(m.waitSince) < formingQuiet {
		return ""
	}
	msg := fmt.Sprintf("group of %d forming for %v", m.Size(), time.Since(m.waitSince).Round(time.Second))
	if missing := m.Missing(); len(missing) > 0 {
		msg += fmt.Sprintf(": ranks %v not registered", missing)
	}
	if err := m.LastBreak(); err != nil {
		msg += fmt.Sprintf(" (last break: %v)", err)
	}
	return msg
}

// syncFrom makes this member's state rank 0's: rank 0 encodes its own,
// every other member adopts rank 0's bytes, and each logs the version
// (*version, once adopted) the group goes on from.
func (m *groupMember) syncFrom(ctx context.Context, log *slog.Logger, version *int64, encode func() ([]byte, error), adopt func([]byte) error) error {
	var payload []byte
	if m.leads() {
		var err error
		if payload, err = encode(); err != nil {
			return fmt.Errorf("trainer: group state: %w", err)
		}
	}
	got, err := m.Broadcast(ctx, payload)
	if err != nil {
		return err
	}
	if !m.leads() {
		if err := adopt(got); err != nil {
			return fmt.Errorf("trainer: rank 0's state: %w", err)
		}
	}
	log.Info("trainer: group formed; state synchronised from rank 0", "version", *version, "rank", m.Rank(),
		"size", m.Size(), "bytes", len(got))
	return nil
}

// checkParams compares the members' parameters every checkEvery updates
// (and at the last, done). Members that differ have stopped being one
// learner: that is an error, never trained on. A group that breaks while
// comparing forms again.
func (m *groupMember) checkParams(ctx context.Context, log *slog.Logger, version int64, done bool, params []float32) error {
	if m == nil || version%int64(m.checkEvery) != 0 && !done {
		return nil
	}
	err := m.Check(ctx, paramsHash(params))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, collective.ErrBroken):
		log.Warn("trainer: group broke while comparing parameters; forming again", "version", version, "err", err)
		return nil
	default:
		return fmt.Errorf("trainer: at version %d: %w", version, err)
	}
}

// note says where a formed group's member stands: its rank, the share of
// its last update spent in all-reduces (of update, the update's time),
// and the times the group formed again.
func (m *groupMember) note(update time.Duration) string {
	if m == nil || !m.learning() {
		return ""
	}
	msg := fmt.Sprintf("rank %d of a group of %d", m.Rank(), m.Size())
	if update > 0 {
		msg += fmt.Sprintf("; all-reduces %.0f%% of the last update", 100*min(1, m.commLast.Seconds()/update.Seconds()))
	}
	switch r := m.Reforms(); r {
	case 0:
	case 1:
		msg += "; formed again once"
	default:
		msg += fmt.Sprintf("; formed again %d times", r)
	}
	return msg
}

// stats adds the group's figures to a trainer's stats.
func (m *groupMember) stats(out map[string]any) {
	if m == nil {
		return
	}
	out["group_size"] = m.Size()
	out["group_rank"] = m.Rank()
	out["group_formed"] = m.learning()
	out["group_reforms"] = m.Reforms()
	out["group_syncs"] = m.syncs
	out["allreduce_ms"] = float64(m.commLast.Microseconds()) / 1e3
	out["allreduce_s"] = m.commTotal.Seconds()
}

func (m *groupMember) close() error {
	if m == nil {
		return nil
	}
	return m.Close()
}
