package controller

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/experiment"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker/panel"
)

func TestProcessSpecs(t *testing.T) {
	dir := TrialDir("/w/exp/t1")
	for _, tt := range []struct {
		name       string
		count, per int
		// want: each process's first index, count and name.
		want []WorkerSpec
	}{
		{"one per process", 3, 0, []WorkerSpec{{Index: 0, Count: 1, Name: "echo/0"}, {Index: 1, Count: 1, Name: "echo/1"}, {Index: 2, Count: 1, Name: "echo/2"}}},
		{"per_process 1", 2, 1, []WorkerSpec{{Index: 0, Count: 1, Name: "echo/0"}, {Index: 1, Count: 1, Name: "echo/1"}}},
		{"a remainder", 10, 4, []WorkerSpec{{Index: 0, Count: 4, Name: "echo/0-3"}, {Index: 4, Count: 4, Name: "echo/4-7"}, {Index: 8, Count: 2, Name: "echo/8-9"}}},
		{"a remainder of one", 9, 4, []WorkerSpec{{Index: 0, Count: 4, Name: "echo/0-3"}, {Index: 4, Count: 4, Name: "echo/4-7"}, {Index: 8, Count: 1, Name: "echo/8-8"}}},
		{"even", 8, 4, []WorkerSpec{{Index: 0, Count: 4, Name: "echo/0-3"}, {Index: 4, Count: 4, Name: "echo/4-7"}}},
		{"fewer than per_process", 3, 256, []WorkerSpec{{Index: 0, Count: 3, Name: "echo/0-2"}}},
		{"no workers", 0, 4, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := ProcessSpecs("echo", "echo", experiment.Group{Count: experiment.Count(tt.count), PerProcess: tt.per}, dir, []string{"--ttl", "3s"}, nil, "")
			if len(got) != len(tt.want) {
				t.Fatalf("%d processes, want %d: %+v", len(got), len(tt.want), got)
			}
			next := 0 // every worker once, in order
			for i, p := range got {
				w := tt.want[i]
				if p.Type != "echo" || p.Index != w.Index || p.Count != w.Count || p.Name != w.Name || p.Task() != i {
					t.Errorf("process %d = %s index %d count %d task %d, want %s index %d count %d task %d",
						i, p.Name, p.Index, p.Count, p.Task(), w.Name, w.Index, w.Count, i)
				}
				if p.LogPath != dir.Log(w.Name) || !slices.Equal(p.Args, []string{"--ttl", "3s"}) {
					t.Errorf("process %d: log %s, args %q", i, p.LogPath, p.Args)
				}
				for _, name := range p.Workers {
					if want := "echo/" + strconv.Itoa(next); name != want {
						t.Errorf("process %d hosts %s, want %s", i, name, want)
					}
					next++
				}
			}
			if next != tt.count {
				t.Errorf("%d workers hosted, want %d", next, tt.count)
			}
		})
	}
	if got := dir.Log("echo/0-255"); got != "/w/exp/t1/logs/echo-0-255.log" {
		t.Errorf("a host's log is %s", got)
	}
}

// A group's processes host the colocated groups' workers of their index:
// named in Workers after their own, with --with for each in Args, and as
// Members of their own group, type and index. A colocated group has no
// processes of its own (groupSpecs).
func TestProcessSpecsWithCompanions(t *testing.T) {
	dir := TrialDir("/w/exp/t1")
	with := []Companion{{Group: "policy", Type: "policy"}, {Group: "red", Type: "sink"}}
	got := ProcessSpecs("actor", "actor", experiment.Group{Count: 2}, dir, []string{"--ttl", "3s"}, nil, "", with...)
	if len(got) != 2 {
		t.Fatalf("%d processes, want 2", len(got))
	}
	for i, p := range got {
		want := []string{fmt.Sprint("actor/", i), fmt.Sprint("policy/", i), fmt.Sprint("red/", i)}
		if !slices.Equal(p.Workers, want) {
			t.Errorf("process %d hosts %v, want %v", i, p.Workers, want)
		}
		if args := []string{"--ttl", "3s", "--with", "policy", "--with", "red=sink"}; !slices.Equal(p.Args, args) {
			t.Errorf("process %d: args %q, want %q", i, p.Args, args)
		}
		members := p.Members()
		wantMembers := []HostedWorker{{want[0], "actor", "actor", i}, {want[1], "policy", "policy", i}, {want[2], "red", "sink", i}}
		if !slices.Equal(members, wantMembers) {
			t.Errorf("process %d members %+v, want %+v", i, members, wantMembers)
		}
	}

	cfg, err := experiment.Parse([]byte(`
name: t
workers:
  actor: {count: 2, config: {env: CartPole-v1}}
  policy: {count: auto, colocate: actor, config: {env: CartPole-v1}}
  sink: {count: 1}
stop: {env_steps: 100}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ResolveCounts(2)
	var names []string
	for _, specs := range groupSpecs(cfg, dir, nil, nil, "") {
		for _, spec := range specs {
			names = append(names, spec.Name+"="+strings.Join(spec.Workers, ","))
		}
	}
	if want := []string{"sink/0=sink/0", "actor/0=actor/0,policy/0", "actor/1=actor/1,policy/1"}; !slices.Equal(names, want) {
		t.Errorf("processes %q, want %q", names, want)
	}
}

func TestWorkerCommand(t *testing.T) {
	for _, tt := range []struct {
		spec WorkerSpec
		want string
	}{
		{WorkerSpec{Type: "echo", Index: 3}, "worker --type echo --index 3"},
		{WorkerSpec{Type: "echo", Index: 3, Count: 1}, "worker --type echo --index 3"},
		{WorkerSpec{Type: "echo", Index: 256, Count: 256, PerProcess: 256}, "worker --type echo --index 256 --count 256"},
	} {
		if got := strings.Join(workerCommand(tt.spec), " "); got != tt.want {
			t.Errorf("workerCommand(%+v) = %q, want %q", tt.spec, got, tt.want)
		}
	}
}

func TestRegisterErrorNamesHostedWorkers(t *testing.T) {
	e := &RegisterError{Missing: []Unregistered{
		{Worker: "echo/0-7", Workers: []string{"echo/1", "echo/2", "echo/3", "echo/4", "echo/5", "echo/6"}, Log: "l0"},
		{Worker: "actor/1", Workers: []string{"actor/1"}, Log: "l1", Exit: "exit status 1"},
	}}
	msg := e.Error()
	for _, want := range []string{
		"7 workers did not register",
		"echo/0-7 (log l0), 6 of its workers: echo/1, echo/2, echo/3, echo/4 and 2 more",
		"actor/1 (log l1): exited, exit status 1",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
}

func TestHeartbeat(t *testing.T) {
	const s = time.Second
	for _, tt := range []struct {
		hungAfter  time.Duration
		workers    int
		perProcess int
		want       time.Duration
	}{
		{30 * s, 4, 0, s},                                      // a tenth of the bound, at most 1 s
		{2 * s, 4, 0, 200 * time.Millisecond},                  // a tenth
		{500 * time.Millisecond, 4, 0, 100 * time.Millisecond}, // at least 100 ms
		{30 * s, 1000, 0, s},
		{30 * s, 4096, 0, 4096 * time.Millisecond}, // 1 ms per process: ~1000 beats/s
		{6 * s, 4096, 0, 2 * s},                    // at most a third of the bound
		{2 * s, 4096, 1, 666666666},                // (a third of 2 s)
		{30 * s, 4096, 256, s},                     // 17 processes beat, not 4096 workers
		{30 * s, 8192, 4, 2049 * time.Millisecond}, // 2048 hosts and the policy worker
	} {
		groups := map[string]experiment.Group{"echo": {Count: experiment.Count(tt.workers - 1), PerProcess: tt.perProcess}, "policy": {Count: 1}}
		if got := heartbeat(tt.hungAfter, groups); got != tt.want {
			t.Errorf("heartbeat(%v, %d workers) = %v, want %v", tt.hungAfter, tt.workers, got, tt.want)
		}
	}
}

func TestConfigureErrorRefused(t *testing.T) {
	unanswered := fmt.Errorf("echo/1 configure: %w", panel.ErrWorkerNotFound)
	refused := fmt.Errorf("echo/2 configure: %w", rpc.Errorf(rpc.ErrTypeBadArguments, "no such key"))
	for _, tt := range []struct {
		failures map[string]error
		want     bool
	}{
		{map[string]error{"echo/1": unanswered}, false},
		{map[string]error{"echo/1": unanswered, "echo/2": refused}, true},
		{map[string]error{"echo/2": refused}, true},
	} {
		if got := (&ConfigureError{Command: "configure", Failures: tt.failures}).Refused(); got != tt.want {
			t.Errorf("Refused() of %v = %v, want %v", tt.failures, got, tt.want)
		}
	}
}
