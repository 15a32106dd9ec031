package policyworker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/distrl/distrl/paramstream"
	"github.com/distrl/distrl/rpc"
)

// Defaults of the kept-version keys of Config.
const (
	DefaultPoolEveryMs      = 5000
	DefaultVersionTimeoutMs = 30000
	// keptCheckEvery is how often a worker serving a tag looks whether a
	// newer version carries it: a look is a read of a local mirror.
	keptCheckEvery = 100 * time.Millisecond
)

// PoolConfig is the pool a policy worker draws the version it serves from:
// the newest Last versions of the policy tagged Tag, each as likely, drawn
// anew every EveryMs.
type PoolConfig struct {
	Tag     string `msgpack:"tag"`
	Last    int    `msgpack:"last"`
	EveryMs int    `msgpack:"every_ms"`
}

// kept serves kept versions (paramstream.Versions) of a policy instead of
// its newest published one: a fixed version, the newest version carrying a
// tag, or one drawn from a pool. It reads a mirror of the policy's version
// records, so following a tag or redrawing costs no request to the name
// server. Like the worker, it is for the worker's loop alone.
type kept struct {
	policy  string
	id      string // a version number or a tag; "" with a pool
	pool    *paramstream.PoolSpec
	every   time.Duration
	reader  *paramstream.KeptReader
	rng     *rand.Rand
	next    time.Time           // when to look (a tag) or draw (a pool) again
	serving paramstream.Version // the version loaded, Version -1 before the first
	draws   int64
	byDraw  map[int64]int64 // draws of each version, for the stats
}

// newKept opens the mirror of policy's kept versions for cfg's identifier.
func (w *Worker) newKept(ctx context.Context, cfg Config) (*kept, error) {
	r, err := paramstream.NewKeptReader(ctx, w.info.Repo, w.info.Trial, cfg.ParamsPolicy)
	if err != nil {
		return nil, fmt.Errorf("policy worker: %w", err)
	}
	k := &kept{policy: cfg.ParamsPolicy, reader: r, serving: paramstream.Version{Version: -1},
		rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x9001)), byDraw: map[int64]int64{}}
	if cfg.Pool != nil {
		k.pool = &paramstream.PoolSpec{Tag: cfg.Pool.Tag, Last: cfg.Pool.Last}
		k.every = time.Duration(cfg.Pool.EveryMs) * time.Millisecond
	} else {
		k.id, k.every = cfg.Version, keptCheckEvery
	}
	return k, nil
}

// describe names what k serves, for logs and stats.
func (k *kept) describe() string {
	if k.pool != nil {
		return fmt.Sprintf("pool of the newest %d versions tagged %s", k.pool.Last, k.pool.Tag)
	}
	if _, err := strconv.ParseInt(k.id, 10, 64); err == nil {
		return "version " + k.id
	}
	return "the newest version tagged " + k.id
}

// choose picks the version to serve now from the mirror's records.
func (k *kept) choose() (paramstream.Version, error) {
	vs := k.reader.Versions()
	if k.pool != nil {
		return k.pool.Draw(vs, k.rng)
	}
	return paramstream.Select(vs, k.id)
}

// first waits, up to timeout, for a version k may serve and returns it
// with its parameters: a tag no version carries yet (the trainer tags its
// first version later) is waited for, and named in the error past timeout.
func (k *kept) first(ctx context.Context, timeout time.Duration) (paramstream.Version, []float32, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(keptCheckEvery)
	defer tick.Stop()
	for {
		v, err := k.choose()
		if err == nil {
			data, err := k.reader.Load(v)
			if err != nil {
				return v, nil, err
			}
			k.took(v)
			return v, data, nil
		}
		select {
		case <-ctx.Done():
			// Refused as a configuration this worker cannot serve, which
			// leaves the worker as it was.
			return v, nil, rpc.Errorf(rpc.ErrTypeBadArguments, "%s of policy %s: %v after %v (version_timeout_ms): %d versions of it kept",
				k.describe(), k.policy, err, timeout, len(k.reader.Versions()))
		case <-tick.C:
		}
	}
}

// took notes that v is served (drawn, for a pool).
func (k *kept) took(v paramstream.Version) {
	k.serving = v
	if k.pool != nil {
		k.draws++
		k.byDraw[v.Version]++
	}
	k.next = time.Now().Add(k.every)
}

// poll returns the parameters to load when the version to serve changed
// (a newer version took the tag, a pool drew another), else nil. A pool
// whose members are gone (collected) keeps serving what it has.
func (k *kept) poll(now time.Time) (paramstream.Version, []float32, error) {
	if now.Before(k.next) {
		return paramstream.Version{}, nil, nil
	}
	v, err := k.choose()
	if err != nil {
		k.next = now.Add(k.every)
		return v, nil, nil
	}
	prev := k.serving
	k.took(v)
	if v.Version == prev.Version && v.Epoch == prev.Epoch {
		return v, nil, nil
	}
	data, err := k.reader.Load(v)
	return v, data, err
}

// stats adds what k serves to the worker's stats.
func (k *kept) stats(out map[string]any) {
	out["serving"] = k.describe()
	if k.pool != nil {
		out["pool_draws"] = k.draws
		by := make(map[string]int64, len(k.byDraw))
		for v, n := range k.byDraw {
			by[strconv.FormatInt(v, 10)] = n
		}
		out["pool_draws_by_version"] = by
	}
}

func (k *kept) close() error { return k.reader.Close() }
