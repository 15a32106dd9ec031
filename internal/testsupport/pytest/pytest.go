package pytest

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

var found = sync.OnceValue(func() string {
	// The first python3 on PATH may be a different installation (pyenv,
	// a virtualenv) without the Debian packages; /usr/bin/python3 has them.
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		if exec.Command(path, "-c", "import zmq, msgpack").Run() == nil {
			return path
		}
	}
	return ""
})

// Python returns the path of a python3 that imports zmq and msgpack. It
// skips the test in -short mode (these tests start processes) and when
// there is none.
func Python(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("Python interop test in -short mode")
	}
	py := found()
	if py == "" {
		t.Skip("no python3 with pyzmq and msgpack (make deps installs them)")
	}
	return py
}

// DocCode returns the first ```python block after the heading in the
// Markdown file at path, so that a documented example is the one tested.
func DocCode(t testing.TB, path, heading string) string {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	_, section, ok := strings.Cut(string(doc), heading)
	if !ok {
		t.Fatalf("%s has no section %q", path, heading)
	}
	_, code, ok := strings.Cut(section, "```python\n")
	if !ok {
		t.Fatalf("%s: section %q has no Python block", path, heading)
	}
	code, _, _ = strings.Cut(code, "```")
	return code
}
