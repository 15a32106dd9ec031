package trainerworker

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/distrl/distrl/algo/ppo"
	"github.com/distrl/distrl/internal/ckptfile"
	"github.com/vmihailenco/msgpack/v5"
)

// Checkpoint files are ckptfile's (header with magic, length and CRC-32C,
// then the msgpack of Checkpoint), named ckpt-{version}.ckpt.
const (
	checkpointPrefix = "ckpt-"
	// KeepCheckpoints is how many of the newest checkpoints are kept.
	KeepCheckpoints = 3
)

// Errors for errors.Is.
var (
	// ErrNoCheckpoint: the directory holds no checkpoint that can be
	// loaded (none at all, or all of them corrupt).
	ErrNoCheckpoint = errors.New("trainer: no valid checkpoint")
	// ErrCorruptCheckpoint: a checkpoint file is short, damaged, or not a
	// checkpoint.
	ErrCorruptCheckpoint = errors.New("trainer: corrupt checkpoint")
	// ErrCheckpointMismatch: a checkpoint is valid but was written for
	// another policy or network architecture.
	ErrCheckpointMismatch = errors.New("trainer: checkpoint does not match the configuration")
)

// Checkpoint is what a trainer saves to resume: the parameter version, the
// learner's complete state and the trainer's counters.
type Checkpoint struct {
	Version int64            `msgpack:"version"`
	Learner ppo.LearnerState `msgpack:"learner"`
	// Counters at the time of the checkpoint: agent steps trained on,
	// updates, and episodes seen in batches.
	Samples  int64 `msgpack:"samples"`
	Updates  int64 `msgpack:"updates"`
	Episodes int64 `msgpack:"episodes"`
	// ConfigHash fingerprints the policy name and network architecture the
	// parameters belong to.
	ConfigHash string `msgpack:"config_hash"`
	Policy     string `msgpack:"policy"`
	UnixMs     int64  `msgpack:"unix_ms"`
}

// CheckpointName is the file name of the checkpoint of version v.
func CheckpointName(v int64) string { return ckptfile.Name(checkpointPrefix, v) }

// EncodeCheckpoint returns the file contents of c: header and payload.
func EncodeCheckpoint(c *Checkpoint) ([]byte, error) {
	payload, err := msgpack.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("trainer: encode checkpoint: %w", err)
	}
	return ckptfile.Encode(payload), nil
}

// DecodeCheckpoint parses file contents written by EncodeCheckpoint. Every
// failure wraps ErrCorruptCheckpoint.
func DecodeCheckpoint(data []byte) (*Checkpoint, error) {
	payload, err := ckptfile.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptCheckpoint, err)
	}
	return decodePayload(payload)
}

func decodePayload(payload []byte) (*Checkpoint, error) {
	var c Checkpoint
	dec := msgpack.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: payload: %w", ErrCorruptCheckpoint, err)
	}
	if c.Version < 0 || c.Updates < 0 || c.Samples < 0 || c.Episodes < 0 {
		return nil, fmt.Errorf("%w: negative counter (version %d, updates %d, samples %d, episodes %d)",
			ErrCorruptCheckpoint, c.Version, c.Updates, c.Samples, c.Episodes)
	}
	return &c, nil
}

// checkName refuses a checkpoint whose file name names another version
// than it holds.
func checkName(path string, c *Checkpoint) error {
	if v, ok := ckptfile.ParseName(checkpointPrefix, filepath.Base(path)); ok && v != c.Version {
		return fmt.Errorf("%s: %w: the file holds version %d", path, ErrCorruptCheckpoint, c.Version)
	}
	return nil
}

// ReadCheckpoint reads and checks one checkpoint file. A file that is not
// a valid checkpoint, or whose name names another version than it holds,
// is an error wrapping ErrCorruptCheckpoint.
func ReadCheckpoint(path string) (*Checkpoint, error) {
	payload, err := ckptfile.Read(path)
	if errors.Is(err, ckptfile.ErrCorrupt) {
		return nil, fmt.Errorf("%w: %w", ErrCorruptCheckpoint, err)
	}
	if err != nil {
		return nil, fmt.Errorf("trainer: %w", err)
	}
	c, err := decodePayload(payload)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, checkName(path, c)
}

// WriteCheckpoint writes c to dir as CheckpointName(c.Version), atomically
// (ckptfile.Write). It returns the path written.
func WriteCheckpoint(dir string, c *Checkpoint) (string, error) {
	payload, err := msgpack.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("trainer: encode checkpoint: %w", err)
	}
	path, err := ckptfile.Write(dir, checkpointPrefix, c.Version, payload)
	if err != nil {
		return path, fmt.Errorf("trainer: %w", err)
	}
	return path, nil
}

// LoadNewestCheckpoint returns the newest valid checkpoint in dir and its
// path. Corrupt files are logged and skipped, so a checkpoint cut short by
// a crash costs the updates since the one before it, not the run. It
// returns an error wrapping ErrNoCheckpoint if there is none to load (the
// directory is missing or empty, or every file is corrupt).
func LoadNewestCheckpoint(dir string, log *slog.Logger) (*Checkpoint, string, error) {
	var c *Checkpoint
	f, err := ckptfile.LoadNewest(dir, checkpointPrefix, log, func(f ckptfile.File, payload []byte) error {
		d, err := decodePayload(payload)
		if err == nil {
			err = checkName(f.Path, d)
		}
		c = d
		return err
	})
	if errors.Is(err, ckptfile.ErrNone) {
		return nil, "", fmt.Errorf("%w: %w", ErrNoCheckpoint, err)
	}
	if err != nil {
		return nil, "", fmt.Errorf("trainer: %w", err)
	}
	return c, f.Path, nil
}

// pruneCheckpoints keeps the newest keep checkpoint files of dir and
// removes the rest, with temporary files of writes that did not finish.
func pruneCheckpoints(dir string, keep int) error {
	if err := ckptfile.Prune(dir, checkpointPrefix, keep); err != nil {
		return fmt.Errorf("trainer: %w", err)
	}
	return nil
}
