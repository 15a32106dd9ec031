package dashboard

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// Bounds of a log tail.
const (
	DefaultLogBytes = 16 << 10
	MaxLogBytes     = 64 << 10
)

// tailFile returns up to n bytes from the end of the file at path,
// starting at a line start unless the file is shorter; a missing file is
// an empty tail (the worker has not started yet).
func tailFile(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	off := max(fi.Size()-int64(n), 0)
	buf := make([]byte, fi.Size()-off)
	k, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	buf = buf[:k]
	if off > 0 {
		// The first line is cut: start after it.
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			buf = buf[i+1:]
		}
	}
	return buf, nil
}
