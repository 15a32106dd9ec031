package evalworker_test

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/evalworker"
	"github.com/distrl/distrl/internal/testsupport/etcdtest"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/paramstream"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
)

var testTypes = workertest.Registry(map[string]worker.Factory{evalworker.TypeName: evalworker.New})

func TestMain(m *testing.M) {
	if err := env.Register(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	etcdtest.Stop()
	os.Exit(code)
}

// initialParams are the parameters of a new default network for envName.
func initialParams(t *testing.T, envName string) []float32 {
	t.Helper()
	_, params := workertest.NewPolicy(t, envName, nil).Params()
	return params
}

// randomVersion is a CartPole network's parameters drawn from seed.
func randomVersion(t *testing.T, seed uint64) []float32 {
	t.Helper()
	params := initialParams(t, env.CartPoleName)
	rng := rand.New(rand.NewPCG(seed, 3))
	for i := range params {
		params[i] = float32(rng.NormFloat64())
	}
	return params
}

type evalFixture struct {
	repo  nameresolve.Repository
	trial names.Trial
	name  string
	run   *workertest.Running
}

func startEvaluator(t *testing.T, repo nameresolve.Repository, trial names.Trial, index int, cfg map[string]any) *evalFixture {
	t.Helper()
	r := workertest.StartChecked(t, worker.Options{Trial: trial, Registry: testTypes, Type: evalworker.TypeName, Index: index,
		Host: "127.0.0.1", Repo: repo, IdleWait: 5 * time.Millisecond, Logger: workertest.Logger(t, slog.LevelInfo)})
	f := &evalFixture{repo: repo, trial: trial, name: r.Name(), run: r}
	p := workertest.Panel(t, repo, trial)
	ctx := workertest.Ctx(t, 10*time.Second)
	if err := p.Request(ctx, f.name, member.CmdConfigure, cfg, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Request(ctx, f.name, member.CmdStart, nil, nil); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *evalFixture) stats(t *testing.T) map[string]any {
	t.Helper()
	var st map[string]any
	if err := workertest.Panel(t, f.repo, f.trial).Request(workertest.Ctx(t, 10*time.Second), f.name, member.CmdStats, nil, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// The evaluator plays each version tagged pool for its episodes, records
// mean and standard error in the version's metadata, tags the best
// "best", evaluates a version kept later, and a restarted evaluator does
// not play again what is recorded.
func TestEvaluatesKeptVersions(t *testing.T) {
	repo := etcdtest.Repo(t)
	trial := names.NewTrial("unit", t.Name())
	vs := paramstream.NewVersions(repo, trial)
	ctx := workertest.Ctx(t, 30*time.Second)
	dir := t.TempDir()
	for v := int64(1); v <= 3; v++ {
		if _, err := vs.Keep(ctx, "default", v, 5, dir, randomVersion(t, uint64(v)), "pool"); err != nil {
			t.Fatal(err)
		}
	}
	cfg := map[string]any{"env": env.CartPoleName, "episodes": 8}
	f := startEvaluator(t, repo, trial, 0, cfg)
	evaluated := func(want int) []paramstream.Version {
		t.Helper()
		var list []paramstream.Version
		eventually.NoError(t, 30*time.Second, fmt.Sprintf("%d versions evaluated", want), func() error {
			var err error
			if list, err = vs.List(ctx, "default"); err != nil {
				return err
			}
			n := 0
			for _, v := range list {
				if _, ok := v.Metadata[evalworker.MetaReturn]; ok {
					n++
				}
			}
			if n < want {
				return fmt.Errorf("%d evaluated", n)
			}
			return nil
		})
		return list
	}
	list := evaluated(3)
	var best paramstream.Version
	for _, v := range list {
		ret, se, n := v.Metadata[evalworker.MetaReturn].(float64), v.Metadata[evalworker.MetaStderr].(float64), v.Metadata[evalworker.MetaEpisodes]
		if n != 8.0 || ret < 8 || ret > 500 || se < 0 {
			t.Errorf("version %d: return %v stderr %v over %v episodes, want 8 episodes of CartPole", v.Version, ret, se, n)
		}
		if best.Metadata == nil || ret > best.Metadata[evalworker.MetaReturn].(float64) {
			best = v
		}
	}
	// The tag moves after the best's evaluation is recorded.
	eventually.NoError(t, 10*time.Second, "the best tag on the best version", func() error {
		list, err := vs.List(ctx, "default")
		if err != nil {
			return err
		}
		tagged, err := paramstream.Select(list, evalworker.DefaultBestTag)
		if err != nil || tagged.Version != best.Version {
			return fmt.Errorf("best tag on %d (%v), want version %d, the best mean return", tagged.Version, err, best.Version)
		}
		return nil
	})
	st := f.stats(t)
	if fmt.Sprint(st[member.StatBestVersion]) != fmt.Sprint(best.Version) || fmt.Sprint(st["evaluated"]) != "3" {
		t.Errorf("stats %v, want best_version %d and 3 evaluated", st, best.Version)
	}

	// A version kept later is evaluated as it comes.
	if _, err := vs.Keep(ctx, "default", 4, 5, dir, randomVersion(t, 4), "pool"); err != nil {
		t.Fatal(err)
	}
	evaluated(4)

	// A second evaluator (a restarted one) finds the four recorded and
	// plays nothing, but knows the best.
	again := startEvaluator(t, repo, trial, 1, cfg)
	time.Sleep(300 * time.Millisecond)
	st = again.stats(t)
	if fmt.Sprint(st["evaluated"], st["env_steps"]) != "0 0" || st[member.StatBestVersion] == nil {
		t.Errorf("restarted evaluator: stats %v, want nothing played and a best version", st)
	}
}

func TestConfigRefused(t *testing.T) {
	for _, cfg := range []map[string]any{
		{},
		{"env": env.CartPoleName, "episodes": -1},
		{"env": env.CartPoleName, "tag": "7"},
		{"env": env.CartPoleName, "best_tag": "latest"},
		{"env": "NoSuchEnv"},
		{"env": env.CartPoleName, "epsiodes": 3},
	} {
		err := evalworker.CheckConfig(workertest.Args(t, cfg), 0)
		var re *rpc.Error
		if !errors.As(err, &re) || re.Type != rpc.ErrTypeBadArguments {
			t.Errorf("CheckConfig(%v) = %v, want bad_arguments", cfg, err)
		}
	}
}

// Two evaluators of one policy against the two opponents of connect4, each
// labelled: each records its own win rate in the version's metadata.
func TestLabelledEvaluations(t *testing.T) {
	repo := etcdtest.Repo(t)
	trial := names.NewTrial("unit", t.Name())
	vs := paramstream.NewVersions(repo, trial)
	ctx := workertest.Ctx(t, 30*time.Second)
	if _, err := vs.Keep(ctx, "c4", 0, 5, t.TempDir(), initialParams(t, env.Connect4Name), "pool"); err != nil {
		t.Fatal(err)
	}
	for i, label := range []string{env.Connect4Random, env.Connect4Scripted} {
		startEvaluator(t, repo, trial, i, map[string]any{"env": env.Connect4Name, "env_config": map[string]any{"opponent": label},
			"policy": "c4", "episodes": 50, "label": label})
	}
	eventually.NoError(t, 30*time.Second, "both evaluations", func() error {
		list, err := vs.List(ctx, "c4")
		if err != nil || len(list) != 1 {
			return fmt.Errorf("%v %v", list, err)
		}
		md := list[0].Metadata
		for _, label := range []string{env.Connect4Random, env.Connect4Scripted} {
			wr, ok := md[evalworker.MetaKey(evalworker.MetaWinRate, label)].(float64)
			if !ok || wr < 0 || wr > 1 || md[evalworker.MetaKey(evalworker.MetaEpisodes, label)] != 50.0 {
				return fmt.Errorf("metadata %v", md)
			}
		}
		if _, ok := md[evalworker.MetaReturn]; ok {
			return fmt.Errorf("an unlabelled evaluation in %v", md)
		}
		return nil
	})
}

// columnPlayer is a connect4 network that plays column col while it is
// open: every weight zero, and its logit's bias high.
func columnPlayer(t *testing.T, col int) []float32 {
	t.Helper()
	p := workertest.NewPolicy(t, env.Connect4Name, nil)
	_, params := p.Params()
	clear(params)
	// Every policy bias gets it: a hidden unit's is then tanh(10) with
	// zero weights out, and the last, the logits', picks col.
	for _, l := range p.Net().Layout() {
		if strings.HasPrefix(l.Name, "pi.") && strings.HasSuffix(l.Name, ".b") {
			params[l.Offset+col] = 10
		}
	}
	return params
}

// An evaluator plays a version of red against blue's version tagged best,
// waiting until blue has one: red stacks column 6, blue column 0, so
// whoever moves first wins at the game's 7th move, every game is won or
// lost, and red wins about half; blue's version is recorded beside the
// win rate. (Red against itself would fill column 6, then 0, 1, ...: the
// first mover wins too, but at the 19th move.)
func TestEvaluatesAgainstAnotherPolicy(t *testing.T) {
	repo := etcdtest.Repo(t)
	trial := names.NewTrial("unit", t.Name())
	vs := paramstream.NewVersions(repo, trial)
	ctx := workertest.Ctx(t, 30*time.Second)
	dir := t.TempDir()
	if _, err := vs.Keep(ctx, "red", 1, 5, dir, columnPlayer(t, 6), "pool"); err != nil {
		t.Fatal(err)
	}
	// Blue's version 1 is no player at all; version 2, tagged best later,
	// stacks column 0.
	if _, err := vs.Keep(ctx, "blue", 1, 7, dir, initialParams(t, env.Connect4Name)); err != nil {
		t.Fatal(err)
	}
	f := startEvaluator(t, repo, trial, 0, map[string]any{"env": env.Connect4Name, "policy": "red", "episodes": 60,
		"label": "vs_blue", "opponent": map[string]any{"policy": "blue", "identifier": "best"}})
	time.Sleep(200 * time.Millisecond)
	if st := f.stats(t); fmt.Sprint(st["evaluated"]) != "0" {
		t.Fatalf("evaluated before blue had a best version: %v", st)
	}
	if _, err := vs.Keep(ctx, "blue", 2, 7, dir, columnPlayer(t, 0), "best"); err != nil {
		t.Fatal(err)
	}
	key := func(k string) string { return evalworker.MetaKey(k, "vs_blue") }
	eventually.NoError(t, 30*time.Second, "red evaluated against blue", func() error {
		list, err := vs.List(ctx, "red")
		if err != nil || len(list) != 1 {
			return fmt.Errorf("%v %v", list, err)
		}
		md := list[0].Metadata
		mean, ok := md[key(evalworker.MetaReturn)].(float64) // written last
		if !ok {
			return fmt.Errorf("metadata %v", md)
		}
		wr, _ := md[key(evalworker.MetaWinRate)].(float64)
		if md[key(evalworker.MetaOpponent)] != 2.0 || wr < 0.2 || wr > 0.8 || math.Abs(mean-(2*wr-1)) > 1e-9 {
			t.Fatalf("metadata %v: want blue's version 2, a win rate near 0.5 and no draw", md)
		}
		return nil
	})
	st := f.stats(t)
	steps, _ := strconv.ParseFloat(fmt.Sprint(st["env_steps"]), 64)
	episodes, _ := strconv.ParseFloat(fmt.Sprint(st[member.StatEpisodes]), 64)
	if episodes < 60 || steps/episodes < 7 || steps/episodes > 8 {
		t.Errorf("%v steps in %v episodes, want games of 7 or 8 moves (stats %v)", steps, episodes, st)
	}
}

func TestOpponentConfigRefused(t *testing.T) {
	for _, opp := range []map[string]any{
		{"policy": "blue"},
		{"identifier": "best", "agents": []int{2}},
		{"identifier": "best", "agents": []int{0, 1}},
		{"identifier": "best", "agents": []int{1, 1}},
	} {
		cfg := map[string]any{"env": env.Connect4Name, "opponent": opp}
		if err := evalworker.CheckConfig(workertest.Args(t, cfg), 0); err == nil {
			t.Errorf("opponent %v accepted", opp)
		}
	}
}
