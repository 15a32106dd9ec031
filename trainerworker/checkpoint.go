package trainerworker

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/distrl/distrl/algo/ppo"
	"github.com/distrl/distrl/internal/msgpackcheck"
	"github.com/vmihailenco/msgpack/v5"
)

// Checkpoint file layout: a 24-byte header, then the msgpack payload.
//
//	offset  size  field
//	0       8     magic "DRLCKPT\x00"
//	8       4     format version, little-endian uint32 (1)
//	12      4     CRC-32C (Castagnoli) of the payload
//	16      8     payload length in bytes, little-endian uint64
//	24      n     msgpack of Checkpoint
//
// The length catches a file cut short by a crash or a full disk, the CRC a
// damaged one; either way the file is skipped and an older one used.
const (
	checkpointMagic   = "DRLCKPT\x00"
	checkpointFormat  = 1
	headerSize        = 24
	checkpointPrefix  = "ckpt-"
	checkpointSuffix  = ".ckpt"
	tempPattern       = ".ckpt-*.tmp"
	versionDigits     = 10
	maxCheckpointSize = 1 << 32 // bounds the allocation a damaged header can ask for
	// KeepCheckpoints is how many of the newest checkpoints are kept.
	KeepCheckpoints = 3
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

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
func CheckpointName(v int64) string {
	return fmt.Sprintf("%s%0*d%s", checkpointPrefix, versionDigits, v, checkpointSuffix)
}

// parseCheckpointName returns the version a checkpoint file name holds.
func parseCheckpointName(name string) (int64, bool) {
	s, ok := strings.CutPrefix(name, checkpointPrefix)
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, checkpointSuffix)
	if !ok || len(s) < versionDigits {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// EncodeCheckpoint returns the file contents of c: header and payload.
func EncodeCheckpoint(c *Checkpoint) ([]byte, error) {
	payload, err := msgpack.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("trainer: encode checkpoint: %w", err)
	}
	out := make([]byte, headerSize, headerSize+len(payload))
	copy(out, checkpointMagic)
	binary.LittleEndian.PutUint32(out[8:], checkpointFormat)
	binary.LittleEndian.PutUint32(out[12:], crc32.Checksum(payload, crcTable))
	binary.LittleEndian.PutUint64(out[16:], uint64(len(payload)))
	return append(out, payload...), nil
}

// DecodeCheckpoint parses file contents written by EncodeCheckpoint. Every
// failure wraps ErrCorruptCheckpoint.
func DecodeCheckpoint(data []byte) (*Checkpoint, error) {
	if len(data) < headerSize {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrCorruptCheckpoint, len(data), headerSize)
	}
	if string(data[:8]) != checkpointMagic {
		return nil, fmt.Errorf("%w: bad magic %q", ErrCorruptCheckpoint, data[:8])
	}
	if f := binary.LittleEndian.Uint32(data[8:]); f != checkpointFormat {
		return nil, fmt.Errorf("%w: format version %d, this build reads %d", ErrCorruptCheckpoint, f, checkpointFormat)
	}
	sum := binary.LittleEndian.Uint32(data[12:])
	n := binary.LittleEndian.Uint64(data[16:])
	if got := uint64(len(data) - headerSize); got != n {
		return nil, fmt.Errorf("%w: header says %d payload bytes, the file has %d (truncated or padded)", ErrCorruptCheckpoint, n, got)
	}
	payload := data[headerSize:]
	if got := crc32.Checksum(payload, crcTable); got != sum {
		return nil, fmt.Errorf("%w: CRC %08x, header says %08x", ErrCorruptCheckpoint, got, sum)
	}
	// The CRC guards against damage, not against a crafted file: check
	// every length before the decoder trusts it.
	if err := msgpackcheck.Check(payload); err != nil {
		return nil, fmt.Errorf("%w: payload: %w", ErrCorruptCheckpoint, err)
	}
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

// ReadCheckpoint reads and checks one checkpoint file. A file that is not
// a valid checkpoint, or whose name names another version than it holds,
// is an error wrapping ErrCorruptCheckpoint.
func ReadCheckpoint(path string) (*Checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trainer: read checkpoint: %w", err)
	}
	defer f.Close()
	// Read at most the largest size a header may announce, so a damaged
	// length cannot make us allocate without bound.
	data, err := io.ReadAll(io.LimitReader(f, headerSize+maxCheckpointSize+1))
	if err != nil {
		return nil, fmt.Errorf("trainer: read checkpoint %s: %w", path, err)
	}
	c, err := DecodeCheckpoint(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if v, ok := parseCheckpointName(filepath.Base(path)); ok && v != c.Version {
		return nil, fmt.Errorf("%s: %w: the file holds version %d", path, ErrCorruptCheckpoint, c.Version)
	}
	return c, nil
}

// WriteCheckpoint writes c to dir as CheckpointName(c.Version), atomically:
// a temporary file in dir is written and fsynced, renamed over the final
// name, and the directory is fsynced so that the rename survives a crash.
// A reader therefore sees the old file or the whole new one, never part of
// one. It returns the path written.
func WriteCheckpoint(dir string, c *Checkpoint) (string, error) {
	data, err := EncodeCheckpoint(c)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("trainer: checkpoint dir: %w", err)
	}
	tmp, err := os.CreateTemp(dir, tempPattern)
	if err != nil {
		return "", fmt.Errorf("trainer: write checkpoint: %w", err)
	}
	tmpName := tmp.Name()
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return "", fmt.Errorf("trainer: write checkpoint: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return "", fmt.Errorf("trainer: write checkpoint: fsync: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("trainer: write checkpoint: %w", err)
	}
	path := filepath.Join(dir, CheckpointName(c.Version))
	if err := os.Rename(tmpName, path); err != nil {
		return "", fmt.Errorf("trainer: write checkpoint: %w", err)
	}
	committed = true
	if err := syncDir(dir); err != nil {
		return path, fmt.Errorf("trainer: write checkpoint: fsync dir: %w", err)
	}
	return path, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkpointFile is a checkpoint's path and the version its name says.
type checkpointFile struct {
	path    string
	version int64
}

// listCheckpoints returns dir's checkpoint files, newest first. Files
// whose names do not follow CheckpointName (temporary files of a write
// that did not finish, anything else) are not listed. A missing dir is
// empty.
func listCheckpoints(dir string) ([]checkpointFile, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("trainer: list checkpoints: %w", err)
	}
	var out []checkpointFile
	for _, e := range entries {
		v, ok := parseCheckpointName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		out = append(out, checkpointFile{path: filepath.Join(dir, e.Name()), version: v})
	}
	slices.SortFunc(out, func(a, b checkpointFile) int { return cmp.Compare(b.version, a.version) })
	return out, nil
}

// LoadNewestCheckpoint returns the newest valid checkpoint in dir and its
// path. Corrupt files are logged and skipped, so a checkpoint cut short by
// a crash costs the updates since the one before it, not the run. It
// returns an error wrapping ErrNoCheckpoint if there is none to load (the
// directory is missing or empty, or every file is corrupt).
func LoadNewestCheckpoint(dir string, log *slog.Logger) (*Checkpoint, string, error) {
	if log == nil {
		log = slog.Default()
	}
	files, err := listCheckpoints(dir)
	if err != nil {
		return nil, "", err
	}
	var skipped []error
	for _, f := range files {
		c, err := ReadCheckpoint(f.path)
		if err == nil {
			return c, f.path, nil
		}
		log.Warn("trainer: skipping unreadable checkpoint", "path", f.path, "err", err)
		skipped = append(skipped, err)
	}
	if len(skipped) > 0 {
		return nil, "", fmt.Errorf("%w in %s: %w", ErrNoCheckpoint, dir, errors.Join(skipped...))
	}
	return nil, "", fmt.Errorf("%w in %s", ErrNoCheckpoint, dir)
}

// pruneCheckpoints keeps the newest keep checkpoint files of dir and
// removes the rest, along with temporary files left by writes that did
// not finish (this trainer's own write has just finished, and one
// directory belongs to one trainer).
func pruneCheckpoints(dir string, keep int) error {
	files, err := listCheckpoints(dir)
	if err != nil {
		return err
	}
	var errs []error
	if len(files) > keep {
		for _, f := range files[keep:] {
			if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	tmps, _ := filepath.Glob(filepath.Join(dir, tempPattern))
	for _, t := range tmps {
		if err := os.Remove(t); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("trainer: prune checkpoints: %w", err)
	}
	return nil
}
