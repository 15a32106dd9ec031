package slurmtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Nodes is the size of the shared cluster.
const Nodes = 3

// Node is one slurmd of the cluster: its SLURM name and the IPv4 address
// of its network namespace.
type Node struct {
	Name string
	Addr string
}

// Cluster is a running cluster.
type Cluster struct {
	ID int
	// Conf is its slurm.conf: SLURM_CONF for every SLURM command.
	Conf string
	// HostAddr is the host side of the bridge: where a name server for
	// the nodes listens.
	HostAddr string
	Nodes    []Node
	state    string
}

// Env is the environment that points SLURM commands at the cluster.
func (c *Cluster) Env() []string { return []string{"SLURM_CONF=" + c.Conf} }

// Command runs a SLURM command (squeue, sbatch, scancel ...) against the cluster.
func (c *Cluster) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), c.Env()...)
	return cmd
}

// NodeByAddr returns the node with address addr.
func (c *Cluster) NodeByAddr(addr string) (Node, bool) {
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n, true
		}
	}
	return Node{}, false
}

var (
	once    sync.Once
	shared  *Cluster
	skipMsg string
	upErr   error
)

// Script is the path of scripts/slurmcluster.sh in this checkout.
func Script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "scripts", "slurmcluster.sh")
}

// Get returns the shared cluster, bringing it up on first use; it skips
// the test where no cluster can run.
func Get(t testing.TB) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("slurm cluster: skipped under -short")
	}
	once.Do(func() { shared, skipMsg, upErr = up() })
	if skipMsg != "" {
		t.Skip("slurm cluster: " + skipMsg)
	}
	if upErr != nil {
		t.Fatalf("slurm cluster: %v", upErr)
	}
	return shared
}

// TearDown stops the shared cluster if a test brought it up; TestMain
// calls it after m.Run.
func TearDown() {
	if shared == nil {
		return
	}
	if err := shared.down(); err != nil {
		fmt.Fprintln(os.Stderr, "slurmtest:", err)
	}
	shared = nil
}

func (c *Cluster) down() error {
	cmd := exec.Command(Script(), "down")
	cmd.Env = append(os.Environ(), "DISTRL_SLURM_ID="+strconv.Itoa(c.ID), "DISTRL_SLURM_STATE="+c.state)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("down: %w\n%s", err, out)
	}
	return nil
}

// Exit codes of the script's `up`.
const (
	exitInUse       = 3
	exitUnsupported = 4
)

// up starts a cluster under the first free ID from one derived from the
// pid, so that test binaries running at once each get their own.
func up() (*Cluster, string, error) {
	if runtime.GOOS != "linux" {
		return nil, "needs Linux network namespaces", nil
	}
	script := Script()
	if out, err := exec.Command(script, "supported").Output(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == exitUnsupported {
			return nil, "this machine cannot run one (needs root, ip and nsenter): " + strings.TrimSpace(string(out)), nil
		}
		return nil, "", fmt.Errorf("%s supported: %w", script, err)
	}
	first := 20 + os.Getpid()%200
	for i := range 30 {
		id := 20 + (first-20+i)%200
		state := fmt.Sprintf("/run/distrl-slurm/%d", id)
		cmd := exec.Command(script, "up")
		cmd.Env = append(os.Environ(), "DISTRL_SLURM_ID="+strconv.Itoa(id),
			"DISTRL_SLURM_NODES="+strconv.Itoa(Nodes), "DISTRL_SLURM_STATE="+state)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		began := time.Now()
		out, err := cmd.Output()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee) && ee.ExitCode() == exitInUse:
			continue
		case err != nil:
			return nil, "", fmt.Errorf("%s up: %w\n%s", script, err, stderr.String())
		}
		c := &Cluster{ID: id, Conf: filepath.Join(state, "slurm.conf"), HostAddr: fmt.Sprintf("10.77.%d.1", id), state: state}
		for k := 1; k <= Nodes; k++ {
			c.Nodes = append(c.Nodes, Node{Name: "node" + strconv.Itoa(k), Addr: fmt.Sprintf("10.77.%d.%d", id, 10+k)})
		}
		if !strings.Contains(string(out), "SLURM_CONF="+c.Conf) {
			_ = c.down()
			return nil, "", fmt.Errorf("%s up printed no SLURM_CONF=%s:\n%s", script, c.Conf, out)
		}
		fmt.Fprintf(os.Stderr, "slurmtest: %d-node cluster %d up in %s (%s)\n", Nodes, id, time.Since(began).Round(time.Millisecond), c.Conf)
		return c, "", nil
	}
	return nil, "", errors.New("no free cluster ID among 30 tried")
}
