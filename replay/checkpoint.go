package replay

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/distrl/distrl/internal/ckptfile"
	"github.com/vmihailenco/msgpack/v5"
)

// State is everything a table needs to resume: its options, counters, the
// next id and its items in insertion order. The sampler's random state is
// not kept (a restored table draws afresh).
type State struct {
	Options  Options     `msgpack:"options"`
	NextID   uint64      `msgpack:"next_id"`
	Counters Counters    `msgpack:"counters"`
	Items    []ItemState `msgpack:"items"`
}

// ItemState is one stored item.
type ItemState struct {
	ID       uint64  `msgpack:"id"`
	Priority float64 `msgpack:"priority"`
	Data     []byte  `msgpack:"data"`
	Times    int     `msgpack:"times"`
}

// Snapshot returns the table's state. Item data is shared, not copied:
// tables never change an item's bytes.
func (t *Table) Snapshot() *State {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := &State{Options: t.opts, NextID: t.nextID, Counters: t.c, Items: make([]ItemState, 0, t.c.Size)}
	for s := t.order.head; s >= 0; s = t.order.next[s] {
		it := &t.slots[s]
		st.Items = append(st.Items, ItemState{ID: it.id, Priority: it.priority, Data: it.data, Times: it.times})
	}
	return st
}

// Restore builds a table from a state, checking it: valid options, at
// most MaxSize items, distinct ids below NextID, valid priorities. Any
// inconsistency is an error wrapping ErrBadState.
func Restore(st *State) (*Table, error) {
	t, err := NewTable(st.Options)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadState, err)
	}
	if len(st.Items) > st.Options.MaxSize {
		return nil, fmt.Errorf("%w: %d items, max_size %d", ErrBadState, len(st.Items), st.Options.MaxSize)
	}
	c := st.Counters
	if c.Inserts < 0 || c.Samples < 0 || c.Evictions < 0 || c.Expired < 0 {
		return nil, fmt.Errorf("%w: negative counter", ErrBadState)
	}
	for i, it := range st.Items {
		if err := checkPriority(it.Priority); err != nil {
			return nil, fmt.Errorf("%w: item %d: %w", ErrBadState, i, err)
		}
		if _, dup := t.byID[it.ID]; dup || it.ID >= st.NextID || it.Times < 0 {
			return nil, fmt.Errorf("%w: item %d: id %d (next id %d, duplicate %v), times sampled %d", ErrBadState, i, it.ID, st.NextID, dup, it.Times)
		}
		t.place(it.ID, it.Priority, it.Data, it.Times)
	}
	c.Size = t.c.Size
	t.c = c
	t.nextID = st.NextID
	return t, nil
}

// DecodeState decodes a State (State.WriteCheckpoint's payload) from bytes
// msgpackcheck has accepted.
func DecodeState(b []byte) (*State, error) {
	var st State
	if err := msgpack.NewDecoder(bytes.NewReader(b)).Decode(&st); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadState, err)
	}
	return &st, nil
}

// checkpointPrefix names a table's checkpoint files: replay-{table}-{n}.ckpt.
func checkpointPrefix(table string) string { return "replay-" + table + "-" }

// WriteCheckpoint writes the table's state to dir atomically as number n
// and keeps the newest keep files of this table. It returns the path.
func (t *Table) WriteCheckpoint(dir string, n int64, keep int) (string, error) {
	return t.Snapshot().WriteCheckpoint(dir, n, keep)
}

// WriteCheckpoint writes st to dir atomically as checkpoint number n of
// its table, encoding as it writes (a table can be hundreds of MB), and
// keeps the newest keep files of that table. It returns the path. A
// snapshot shares its items' bytes with the table, which never changes
// them, so it can be written while the table goes on serving.
func (st *State) WriteCheckpoint(dir string, n int64, keep int) (string, error) {
	prefix := checkpointPrefix(st.Options.Name)
	path, err := ckptfile.WriteStream(dir, prefix, n, func(w io.Writer) error {
		return msgpack.NewEncoder(w).Encode(st)
	})
	if err != nil {
		return path, fmt.Errorf("replay: table %q: %w", st.Options.Name, err)
	}
	if err := ckptfile.Prune(dir, prefix, keep); err != nil {
		return path, fmt.Errorf("replay: table %q: %w", st.Options.Name, err)
	}
	return path, nil
}

// ErrNoCheckpoint: no loadable checkpoint of the table (wraps
// ckptfile.ErrNone too).
var ErrNoCheckpoint = errors.New("replay: no checkpoint")

// LoadNewestCheckpoint restores the newest valid checkpoint of table name
// in dir; corrupt files are logged and skipped. It returns the table and
// the checkpoint's number.
func LoadNewestCheckpoint(dir, name string, log *slog.Logger) (*Table, int64, error) {
	var t *Table
	f, err := ckptfile.LoadNewest(dir, checkpointPrefix(name), log, func(_ ckptfile.File, p []byte) error {
		st, err := DecodeState(p)
		if err != nil {
			return err
		}
		if st.Options.Name != name {
			return fmt.Errorf("%w: holds table %q", ErrBadState, st.Options.Name)
		}
		t, err = Restore(st)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("%w: table %q: %w", ErrNoCheckpoint, name, err)
	}
	return t, f.N, nil
}
