package ckptfile

import (
	"bufio"
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

	"github.com/distrl/distrl/internal/msgpackcheck"
)

const (
	magic      = "DRLCKPT\x00"
	format     = 1
	headerSize = 24
	suffix     = ".ckpt"
	digits     = 10
	// MaxSize bounds the payload a header may announce, and so the
	// allocation a damaged header can ask for.
	MaxSize = 1 << 32
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Errors for errors.Is.
var (
	// ErrCorrupt: a file is short, damaged, or not a checkpoint.
	ErrCorrupt = errors.New("corrupt checkpoint")
	// ErrNone: a directory holds no checkpoint that can be loaded (none at
	// all, or every one corrupt).
	ErrNone = errors.New("no valid checkpoint")
)

// Encode returns the file contents for payload: header and payload.
func Encode(payload []byte) []byte {
	out := make([]byte, 0, headerSize+len(payload))
	out = append(out, header(crc32.Checksum(payload, crcTable), uint64(len(payload)))...)
	return append(out, payload...)
}

// Decode checks file contents written by Encode and returns the payload,
// which msgpackcheck has accepted. Every failure wraps ErrCorrupt.
func Decode(data []byte) ([]byte, error) {
	if len(data) < headerSize {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrCorrupt, len(data), headerSize)
	}
	if string(data[:8]) != magic {
		return nil, fmt.Errorf("%w: bad magic %q", ErrCorrupt, data[:8])
	}
	if f := binary.LittleEndian.Uint32(data[8:]); f != format {
		return nil, fmt.Errorf("%w: format version %d, this build reads %d", ErrCorrupt, f, format)
	}
	sum := binary.LittleEndian.Uint32(data[12:])
	n := binary.LittleEndian.Uint64(data[16:])
	if got := uint64(len(data) - headerSize); got != n {
		return nil, fmt.Errorf("%w: header says %d payload bytes, the file has %d (truncated or padded)", ErrCorrupt, n, got)
	}
	payload := data[headerSize:]
	if got := crc32.Checksum(payload, crcTable); got != sum {
		return nil, fmt.Errorf("%w: CRC %08x, header says %08x", ErrCorrupt, got, sum)
	}
	// The CRC guards against damage, not against a crafted file.
	if err := msgpackcheck.Check(payload); err != nil {
		return nil, fmt.Errorf("%w: payload: %w", ErrCorrupt, err)
	}
	return payload, nil
}

// Name is the file name of checkpoint number n under prefix (for example
// "ckpt-" and 12: "ckpt-0000000012.ckpt"). Numbers sort as the names do.
func Name(prefix string, n int64) string {
	return fmt.Sprintf("%s%0*d%s", prefix, digits, n, suffix)
}

// ParseName returns the number a file name made by Name(prefix, n) holds.
func ParseName(prefix, name string) (int64, bool) {
	s, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, suffix)
	if !ok || len(s) < digits {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// Read reads and checks one checkpoint file and returns its payload.
func Read(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, headerSize+MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	p, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// Write writes Encode(payload) to dir/Name(prefix, n) atomically, as
// WriteStream does. It returns the path.
func Write(dir, prefix string, n int64, payload []byte) (string, error) {
	return WriteStream(dir, prefix, n, func(w io.Writer) error {
		_, err := w.Write(payload)
		return err
	})
}

// WriteStream writes the checkpoint whose payload encode writes to
// dir/Name(prefix, n) atomically, without holding the payload in memory: a
// temporary file in dir gets a blank header, the payload (its CRC and
// length counted on the way), then the real header; it is fsynced,
// renamed over the final name, and the directory is fsynced so that the
// rename survives a crash. A reader sees the old file or the whole new
// one, never part of one. It returns the path.
//
// Large payloads (a replay table is hundreds of MB) are why it streams:
// marshalling one into a buffer and copying it behind a header tripled
// the process's heap for every checkpoint.
func WriteStream(dir, prefix string, n int64, encode func(io.Writer) error) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("checkpoint dir: %w", err)
	}
	tmp, err := os.CreateTemp(dir, tempPattern(prefix))
	if err != nil {
		return "", fmt.Errorf("write checkpoint: %w", err)
	}
	tmpName := tmp.Name()
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()
	if err := writeFile(tmp, encode); err != nil {
		return "", fmt.Errorf("write checkpoint: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return "", fmt.Errorf("write checkpoint: fsync: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("write checkpoint: %w", err)
	}
	path := filepath.Join(dir, Name(prefix, n))
	if err := os.Rename(tmpName, path); err != nil {
		return "", fmt.Errorf("write checkpoint: %w", err)
	}
	committed = true
	if err := syncDir(dir); err != nil {
		return path, fmt.Errorf("write checkpoint: fsync dir: %w", err)
	}
	return path, nil
}

// writeFile writes header and payload to f: the payload first, behind a
// blank header, then the header it makes.
func writeFile(f *os.File, encode func(io.Writer) error) error {
	if _, err := f.Write(make([]byte, headerSize)); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	cw := &countingCRC{w: bw}
	if err := encode(cw); err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if cw.n > MaxSize {
		return fmt.Errorf("payload of %d bytes over the %d-byte limit", cw.n, int64(MaxSize))
	}
	_, err := f.WriteAt(header(cw.crc, uint64(cw.n)), 0)
	return err
}

// header is the file header for a payload of n bytes with CRC sum.
func header(sum uint32, n uint64) []byte {
	h := make([]byte, headerSize)
	copy(h, magic)
	binary.LittleEndian.PutUint32(h[8:], format)
	binary.LittleEndian.PutUint32(h[12:], sum)
	binary.LittleEndian.PutUint64(h[16:], n)
	return h
}

// countingCRC passes writes on to w, counting their bytes and CRC.
type countingCRC struct {
	w   io.Writer
	n   int64
	crc uint32
}

func (c *countingCRC) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.crc = crc32.Update(c.crc, crcTable, p[:n])
	c.n += int64(n)
	return n, err
}

// tempPattern names the temporary files of writes under prefix; Prune
// removes those left by a write that did not finish.
func tempPattern(prefix string) string { return "." + prefix + "*.tmp" }

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

// File is a checkpoint's path and the number its name says.
type File struct {
	Path string
	N    int64
}

// List returns dir's checkpoint files under prefix, newest (highest
// number) first. Other files are not listed; a missing dir is empty.
func List(dir, prefix string) ([]File, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	var out []File
	for _, e := range entries {
		v, ok := ParseName(prefix, e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		out = append(out, File{Path: filepath.Join(dir, e.Name()), N: v})
	}
	slices.SortFunc(out, func(a, b File) int { return cmp.Compare(b.N, a.N) })
	return out, nil
}

// LoadNewest hands the payload of each checkpoint under prefix in dir,
// newest first, to load until load accepts one, and returns that file.
// Unreadable files and payloads load refuses are logged and skipped, so a
// checkpoint cut short by a crash costs the work since the one before it.
// With none accepted the error wraps ErrNone (and the reasons).
func LoadNewest(dir, prefix string, log *slog.Logger, load func(f File, payload []byte) error) (File, error) {
	if log == nil {
		log = slog.Default()
	}
	files, err := List(dir, prefix)
	if err != nil {
		return File{}, err
	}
	var skipped []error
	for _, f := range files {
		p, err := Read(f.Path)
		if err == nil {
			if err = load(f, p); err == nil {
				return f, nil
			}
		}
		log.Warn("skipping unreadable checkpoint", "path", f.Path, "err", err)
		skipped = append(skipped, err)
	}
	if len(skipped) > 0 {
		return File{}, fmt.Errorf("%w in %s: %w", ErrNone, dir, errors.Join(skipped...))
	}
	return File{}, fmt.Errorf("%w in %s", ErrNone, dir)
}

// Prune keeps the newest keep checkpoints under prefix in dir, removes the
// rest, and removes temporary files left by writes that did not finish
// (one directory and prefix belong to one writer, whose own write has
// finished).
func Prune(dir, prefix string, keep int) error {
	files, err := List(dir, prefix)
	if err != nil {
		return err
	}
	var errs []error
	if len(files) > keep {
		for _, f := range files[keep:] {
			if err := os.Remove(f.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	tmps, _ := filepath.Glob(filepath.Join(dir, tempPattern(prefix)))
	for _, t := range tmps {
		if err := os.Remove(t); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("prune checkpoints: %w", err)
	}
	return nil
}
