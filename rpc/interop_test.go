package rpc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/pytest"
)

// docPythonClient extracts the Python client from docs/protocol.md, so the
// documented example is the one tested.
func docPythonClient(t *testing.T) string {
	t.Helper()
	return pytest.DocCode(t, filepath.Join("..", "docs", "protocol.md"), "## Minimal Python client")
}

// TestPythonClient runs the documented pyzmq client against a Go server,
// in plaintext and with CURVE.
func TestPythonClient(t *testing.T) {
	py := pytest.Python(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rpcclient.py"), []byte(docPythonClient(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	keys, err := NewCurveKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	plain := startServer(t, ServerOptions{})
	secure := startServer(t, ServerOptions{Curve: &keys})

	const driver = `
import sys
from rpcclient import Client, RPCError
c = Client(sys.argv[1], server_public=sys.argv[2] or None)
print(c.call("ping"))
print(c.call("add", a=40, b=2)["sum"])
try:
    c.call("add", a="x")
except RPCError as e:
    print(e.type)
c.close()
`
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"doc main", []string{filepath.Join(dir, "rpcclient.py"), plain.Addr()}, "pong\nunknown_command\n"},
		{"plaintext", []string{"-c", driver, plain.Addr(), ""}, "pong\n42\nbad_arguments\n"},
		{"curve", []string{"-c", driver, "tcp://" + secure.Addr(), keys.Public}, "pong\n42\nbad_arguments\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, py, tt.args...)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err != nil || string(out) != tt.want {
				t.Errorf("python %s: %v\n%s\nwant:\n%s", tt.name, err, out, tt.want)
			}
		})
	}
}
