package slurmtest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	code := m.Run()
	TearDown()
	os.Exit(code)
}

// A job array lands on every node, and each task sees its own node's name
// and namespace address.
func TestJobArraySpreadsOverNodes(t *testing.T) {
	c := Get(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	body := "#!/bin/sh\n" +
		"#SBATCH --array=0-5\n#SBATCH --output=" + dir + "/task-%a.out\n" +
		"echo $SLURMD_NODENAME $(ip -4 -o addr show dev eth0 | awk '{print $4}')\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := c.Command("sbatch", "--parsable", "--wait", script).CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch: %v\n%s", err, out)
	}
	seen := map[string]bool{}
	for i := range 6 {
		b, err := os.ReadFile(filepath.Join(dir, "task-"+strconv.Itoa(i)+".out"))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b))
		if len(f) != 2 {
			t.Fatalf("task %d printed %q", i, b)
		}
		node, addr := f[0], strings.TrimSuffix(f[1], "/24")
		n, ok := c.NodeByAddr(addr)
		if !ok || n.Name != node {
			t.Errorf("task %d ran on %s with address %s: not one of %v", i, node, addr, c.Nodes)
		}
		seen[node] = true
	}
	if len(seen) < 2 {
		t.Errorf("the array ran on %d node(s), want >= 2: %v", len(seen), seen)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := c.Command("squeue", "-h").Output()
		if err != nil {
			t.Fatalf("squeue: %v", err)
		}
		if len(strings.TrimSpace(string(out))) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("squeue still lists jobs:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
