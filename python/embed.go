package python

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Source holds the distrl Python package: distrl/*.py and
// distrl/examples/*.py.
//
//go:embed distrl/*.py distrl/examples/*.py
var Source embed.FS

// Dir returns a directory holding the embedded package as distrl/, to put
// on PYTHONPATH. The directory is named after a hash of the contents under
// the system's temporary directory (and the user id, since others cannot
// read it), written once, atomically by a rename, and shared by every
// process of the same build.
func Dir() (string, error) { return dirOnce() }

var dirOnce = sync.OnceValues(func() (string, error) {
	sum, err := digest()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("distrl-python-%d-%s", os.Getuid(), sum[:16]))
	if _, err := os.Stat(filepath.Join(dir, "distrl", "envhost.py")); err == nil {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(os.TempDir(), "distrl-python-tmp-")
	if err != nil {
		return "", fmt.Errorf("python: %w", err)
	}
	defer os.RemoveAll(tmp) // left over only if the rename failed
	if err := os.CopyFS(tmp, Source); err != nil {
		return "", fmt.Errorf("python: write the package: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another process won the race: its copy is the same.
		if _, serr := os.Stat(filepath.Join(dir, "distrl", "envhost.py")); serr == nil {
			return dir, nil
		}
		return "", fmt.Errorf("python: install the package in %s: %w", dir, err)
	}
	return dir, nil
})

// digest hashes every embedded file's path and contents.
func digest() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(Source, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := Source.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("python: hash the package: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
