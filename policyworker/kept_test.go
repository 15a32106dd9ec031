package policyworker_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/internal/testsupport/etcdtest"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/paramstream"
	"github.com/distrl/distrl/policyworker"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker/member"
)

// keepRed keeps versions 1..n of policy, each randomParams(_, v) and
// tagged "pool", on a real etcd (the tests share one: each keeps its own
// policy's versions).
func keepRed(t *testing.T, vs *paramstream.Versions, policy string, params, n int) {
	t.Helper()
	dir := t.TempDir()
	for v := int64(1); v <= int64(n); v++ {
		if _, err := vs.Keep(ctxT(t), policy, v, 7, dir, randomParams(params, uint64(v)), "pool"); err != nil {
			t.Fatal(err)
		}
	}
}

// A worker serving a tag answers with the newest version carrying it, and
// follows the tag when it moves; a fixed version stays.
func TestServesTaggedVersion(t *testing.T) {
	repo := etcdtest.Repo(t)
	vs := paramstream.NewVersions(repo, testTrial)
	n := numParams(t, cartPoleConfig(t, 3))
	keepRed(t, vs, "red", n, 5)
	if err := vs.Tag(ctxT(t), "red", 2, "best"); err != nil {
		t.Fatal(err)
	}
	f := startWorker(t, repo, 0, 10*time.Millisecond, testLogger(t))
	f.configure(t, map[string]any{"env": env.CartPoleName, "seed": 3, "deterministic": true, "params_policy": "red", "version": "best"})
	f.do(t, member.CmdStart, nil, nil)
	answersWith(t, f, 2, randomParams(n, 2))
	if err := vs.Tag(ctxT(t), "red", 4, "best"); err != nil {
		t.Fatal(err)
	}
	answersWith(t, f, 4, randomParams(n, 4))
	if got := f.stats(t)["serving"]; got != "the newest version tagged best" {
		t.Errorf("serving %q", got)
	}

	fixed := startWorker(t, repo, 1, 10*time.Millisecond, testLogger(t))
	fixed.configure(t, map[string]any{"env": env.CartPoleName, "seed": 3, "params_policy": "red", "version": "3"})
	var got policyworker.Params
	fixed.do(t, policyworker.CmdGetParams, nil, &got)
	if got.Version != 3 {
		t.Errorf("version 3 served as %d", got.Version)
	}
}

// A pool's draws follow its distribution, uniform over the newest `last`
// versions with its tag (chi-square with 2 degrees of freedom at p =
// 0.001: 13.82), and a restarted worker serves from the pool at once.
func TestServesFromPool(t *testing.T) {
	repo := etcdtest.Repo(t)
	vs := paramstream.NewVersions(repo, testTrial)
	n := numParams(t, cartPoleConfig(t, 3))
	keepRed(t, vs, "blue", n, 5)
	cfg := map[string]any{"env": env.CartPoleName, "seed": 3, "policy": "blue-pool", "params_policy": "blue",
		"pool": map[string]any{"tag": "pool", "last": 3, "every_ms": 1}}
	f := startWorker(t, repo, 0, time.Millisecond, testLogger(t))
	f.configure(t, cfg)
	f.do(t, member.CmdStart, nil, nil)
	const draws = 1000
	var by map[string]any
	eventually.NoError(t, 60*time.Second, fmt.Sprintf("%d draws", draws), func() error {
		st := f.stats(t)
		if d := num(t, st, "pool_draws"); d < draws {
			return fmt.Errorf("%v draws", d)
		}
		by, _ = st["pool_draws_by_version"].(map[string]any)
		return nil
	})
	total, chi2 := 0.0, 0.0
	for _, v := range []string{"3", "4", "5"} {
		total += num(t, by, v)
	}
	for _, v := range []string{"3", "4", "5"} {
		d := num(t, by, v) - total/3
		chi2 += d * d / (total / 3)
	}
	if len(by) != 3 || chi2 > 13.82 {
		t.Errorf("draws by version %v: chi-square %.2f over the pool 3, 4, 5 (bound 13.82)", by, chi2)
	}

	// The worker restarts under its name: it serves a member of the pool
	// from its configure on.
	f.do(t, member.CmdExit, nil, nil)
	eventually.NoError(t, 10*time.Second, "the exited worker's record gone", func() error {
		if _, err := repo.Get(ctxT(t), testTrial.Worker(f.name)); !errors.Is(err, nameresolve.ErrNotFound) {
			return fmt.Errorf("record of %s: %v", f.name, err)
		}
		return nil
	})
	again := startWorker(t, repo, 0, time.Millisecond, testLogger(t))
	again.configure(t, cfg)
	var got policyworker.Params
	again.do(t, policyworker.CmdGetParams, nil, &got)
	if got.Version < 3 || got.Version > 5 {
		t.Errorf("restarted worker serves version %d, want one of the pool 3..5", got.Version)
	}
}

// A tag no version carries is waited for, then refused with a message
// that says what was waited for and how long.
func TestKeptVersionTimeout(t *testing.T) {
	repo := etcdtest.Repo(t)
	keepRed(t, paramstream.NewVersions(repo, testTrial), "green", numParams(t, cartPoleConfig(t, 3)), 1)
	f := startWorker(t, repo, 0, 10*time.Millisecond, testLogger(t))
	err := f.panel.Request(ctxT(t), f.name, member.CmdConfigure,
		map[string]any{"env": env.CartPoleName, "params_policy": "green", "version": "never", "version_timeout_ms": 300}, nil)
	var re *rpc.Error
	if !errors.As(err, &re) || re.Type != rpc.ErrTypeBadArguments || !strings.Contains(re.Message, `tagged never`) ||
		!strings.Contains(re.Message, "version_timeout_ms") || !strings.Contains(re.Message, "1 versions of it kept") {
		t.Fatalf("configure with a tag no version has: %v", err)
	}
	for _, bad := range []map[string]any{
		{"version": "latest", "pool": map[string]any{"last": 0}},
		{"version": "2", "pool": map[string]any{"last": 2}},
		{"version": "-4"},
		{"version": "a b"},
		{"version": "best", "follow_params": false},
	} {
		bad["env"] = env.CartPoleName
		err := f.panel.Request(ctxT(t), f.name, member.CmdConfigure, bad, nil)
		if !errors.As(err, &re) || re.Type != rpc.ErrTypeBadArguments {
			t.Errorf("configure %v: %v, want bad_arguments", bad, err)
		}
	}
}
