package python

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/distrl/distrl/internal/testsupport/pytest"
)

// TestPythonUnitTests runs the Python package's own tests (tests/, plain
// unittest) so that `make test` covers them.
func TestPythonUnitTests(t *testing.T) {
	py := pytest.Python(t)
	cmd := exec.Command(py, "-m", "unittest", "discover", "-s", "tests", "-t", ".")
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python unittest: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// TestDir installs the embedded package and finds it again.
func TestDir(t *testing.T) {
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"distrl/envhost.py", "distrl/examples/cartpole.py"} {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || string(got) != string(want) {
			t.Errorf("%s in %s: differs from the source (%v)", f, dir, err)
		}
	}
}
