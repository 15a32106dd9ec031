package paramstream

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
)

// Versions is the kept versions of a trial's policies: parameter vectors
// a trainer set aside (every so many updates, or one worth naming), each
// with tags and metadata. The newest version of a policy travels through
// Publisher and Subscriber; kept versions are for what is not the newest:
// an opponent pool for self-play, a version under evaluation, the best one.
//
// A kept version's parameters are a file in the trainer's checkpoint
// directory, in the node cache's format (checksummed); the trial directory
// is on a filesystem every node shares (docs/cluster.md), so any worker
// reads it. Its record, tags and metadata are name-resolve records with
// no lease, below trial.Versions(policy), so they outlive the workers and
// a restarted trial finds them:
//
//	{prefix}versions/{policy}/{version:012d}             {"version", "epoch", "path", "values", "created_ms"}
//	{prefix}versions/{policy}/{version:012d}/tag/{tag}   "1"
//	{prefix}versions/{policy}/{version:012d}/meta/{key}  a JSON value
//
// Each tag and metadata key is a record of its own, so writers of
// different ones (a trainer tagging, an evaluator recording results)
// never overwrite each other; the same key written twice keeps the last.
// Versions is safe for concurrent use.
type Versions struct {
	repo  nameresolve.Repository
	trial names.Trial
}

// Version is one kept version of a policy.
type Version struct {
	Policy  string `json:"policy"`
	Version int64  `json:"version"`
	Epoch   uint64 `json:"epoch"`
	// Path is the file of the parameters; Values their count.
	Path     string         `json:"path"`
	Values   int            `json:"values"`
	Created  time.Time      `json:"created"`
	Tags     []string       `json:"tags,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// HasTag reports whether v carries tag.
func (v Version) HasTag(tag string) bool { return slices.Contains(v.Tags, tag) }

// versionRecord is the record of a version itself.
type versionRecord struct {
	Version   int64  `json:"version"`
	Epoch     uint64 `json:"epoch"`
	Path      string `json:"path"`
	Values    int    `json:"values"`
	CreatedMs int64  `json:"created_ms"`
}

// ErrNoVersion is wrapped by the errors of a version that is not kept,
// or an identifier no kept version matches.
var ErrNoVersion = errors.New("paramstream: no such kept version")

// Latest is the identifier of the newest published version (Subscriber).
const Latest = "latest"

// tagPattern is what may name a tag or a metadata key: a key segment.
// A tag is not a number (a version) nor "latest".
var tagPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)

// CheckTag refuses a tag that could not be told from a version or an
// identifier, or that is not a key segment.
func CheckTag(tag string) error {
	if _, err := strconv.ParseInt(tag, 10, 64); err == nil || !tagPattern.MatchString(tag) || tag == Latest {
		return fmt.Errorf("paramstream: tag %q: want letters, digits, '.', '_' and '-', not a number nor %q", tag, Latest)
	}
	return nil
}

// NewVersions returns the kept versions of trial in repo.
func NewVersions(repo nameresolve.Repository, trial names.Trial) *Versions {
	return &Versions{repo: repo, trial: trial}
}

func (s *Versions) key(policy string, version int64) string {
	return s.trial.Versions(policy) + fmt.Sprintf("%012d", version)
}

// Keep writes data as version (of a publisher's epoch) of policy into dir
// and records it with tags. Keeping a version number again (a trainer
// resumed from an older checkpoint made it anew) replaces the file and
// the record; its tags and metadata stay.
func (s *Versions) Keep(ctx context.Context, policy string, version int64, epoch uint64, dir string, data []float32, tags ...string) (Version, error) {
	for _, t := range tags {
		if err := CheckTag(t); err != nil {
			return Version{}, err
		}
	}
	c := &cache{dir: dir}
	if err := c.write(version, epoch, data); err != nil {
		return Version{}, fmt.Errorf("paramstream: keep version %d of %s: %w", version, policy, err)
	}
	path, err := filepath.Abs(filepath.Join(dir, fileName(version, epoch)))
	if err != nil {
		return Version{}, fmt.Errorf("paramstream: keep version %d of %s: %w", version, policy, err)
	}
	now := time.Now()
	rec := versionRecord{Version: version, Epoch: epoch, Path: path, Values: len(data), CreatedMs: now.UnixMilli()}
	b, _ := json.Marshal(rec) // plain numbers and strings
	if err := s.repo.Add(ctx, s.key(policy, version), string(b), nameresolve.AddOptions{Replace: true}); err != nil {
		return Version{}, fmt.Errorf("paramstream: keep version %d of %s: %w", version, policy, err)
	}
	for _, t := range tags {
		if err := s.Tag(ctx, policy, version, t); err != nil {
			return Version{}, err
		}
	}
	return Version{Policy: policy, Version: version, Epoch: epoch, Path: path, Values: len(data),
		Created: time.UnixMilli(rec.CreatedMs), Tags: slices.Clone(tags)}, nil
}

// exists checks that version of policy is kept.
func (s *Versions) exists(ctx context.Context, policy string, version int64) error {
	_, err := s.repo.Get(ctx, s.key(policy, version))
	if errors.Is(err, nameresolve.ErrNotFound) {
		return fmt.Errorf("%w: version %d of policy %s", ErrNoVersion, version, policy)
	}
	return err
}

// Tag adds tag to a kept version.
func (s *Versions) Tag(ctx context.Context, policy string, version int64, tag string) error {
	if err := CheckTag(tag); err != nil {
		return err
	}
	if err := s.exists(ctx, policy, version); err != nil {
		return err
	}
	return s.repo.Add(ctx, s.key(policy, version)+"/tag/"+tag, "1", nameresolve.AddOptions{Replace: true})
}

// Untag removes tag from a version; a tag it does not carry is no error.
func (s *Versions) Untag(ctx context.Context, policy string, version int64, tag string) error {
	err := s.repo.Delete(ctx, s.key(policy, version)+"/tag/"+tag)
	if errors.Is(err, nameresolve.ErrNotFound) {
		return nil
	}
	return err
}

// SetMetadata records each key of md (a JSON value) with a kept version.
func (s *Versions) SetMetadata(ctx context.Context, policy string, version int64, md map[string]any) error {
	if err := s.exists(ctx, policy, version); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(md)) {
		if !tagPattern.MatchString(k) {
			return fmt.Errorf("paramstream: metadata key %q: want letters, digits, '.', '_' and '-'", k)
		}
		b, err := json.Marshal(md[k])
		if err != nil {
			return fmt.Errorf("paramstream: metadata %s: %w", k, err)
		}
		if err := s.repo.Add(ctx, s.key(policy, version)+"/meta/"+k, string(b), nameresolve.AddOptions{Replace: true}); err != nil {
			return err
		}
	}
	return nil
}

// List returns the kept versions of policy, oldest first. Records it
// cannot read are skipped: one damaged record must not hide the others.
func (s *Versions) List(ctx context.Context, policy string) ([]Version, error) {
	entries, err := s.repo.Find(ctx, s.trial.Versions(policy))
	if err != nil {
		return nil, fmt.Errorf("paramstream: list versions of %s: %w", policy, err)
	}
	return ParseVersions(policy, s.trial.Versions(policy), entries), nil
}

// parseVersions assembles Versions from the records below prefix, sorted
// by key (so a version's record comes before its tags and metadata).
func ParseVersions(policy, prefix string, entries []nameresolve.Entry) []Version {
	var out []Version
	byKey := map[string]int{}
	for _, e := range entries {
		rest := strings.TrimPrefix(e.Key, prefix)
		id, sub, _ := strings.Cut(rest, "/")
		if sub == "" {
			var r versionRecord
			if json.Unmarshal([]byte(e.Value), &r) != nil {
				continue
			}
			byKey[id] = len(out)
			out = append(out, Version{Policy: policy, Version: r.Version, Epoch: r.Epoch, Path: r.Path, Values: r.Values,
				Created: time.UnixMilli(r.CreatedMs)})
			continue
		}
		i, ok := byKey[id]
		if !ok {
			continue // tags of a version being removed
		}
		kind, name, _ := strings.Cut(sub, "/")
		switch kind {
		case "tag":
			out[i].Tags = append(out[i].Tags, name)
		case "meta":
			var v any
			if json.Unmarshal([]byte(e.Value), &v) == nil {
				if out[i].Metadata == nil {
					out[i].Metadata = map[string]any{}
				}
				out[i].Metadata[name] = v
			}
		}
	}
	slices.SortFunc(out, func(a, b Version) int { return cmp.Compare(a.Version, b.Version) })
	return out
}

// Policies lists the policies that have kept versions.
func (s *Versions) Policies(ctx context.Context) ([]string, error) {
	entries, err := s.repo.Find(ctx, s.trial.VersionsPrefix())
	if err != nil {
		return nil, fmt.Errorf("paramstream: list policies: %w", err)
	}
	var out []string
	for _, e := range entries {
		p, _, _ := strings.Cut(strings.TrimPrefix(e.Key, s.trial.VersionsPrefix()), "/")
		if len(out) == 0 || out[len(out)-1] != p {
			out = append(out, p)
		}
	}
	return out, nil
}

// Remove forgets a kept version: its records, then its file.
func (s *Versions) Remove(ctx context.Context, v Version) error {
	// The version's own record last: a listing never sees tags without it
	// for long, and a crash half way leaves a version, not orphans.
	if err := s.repo.ClearSubtree(ctx, s.key(v.Policy, v.Version)+"/"); err != nil {
		return fmt.Errorf("paramstream: remove version %d of %s: %w", v.Version, v.Policy, err)
	}
	if err := s.repo.Delete(ctx, s.key(v.Policy, v.Version)); err != nil && !errors.Is(err, nameresolve.ErrNotFound) {
		return fmt.Errorf("paramstream: remove version %d of %s: %w", v.Version, v.Policy, err)
	}
	if err := os.Remove(v.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("paramstream: remove version %d of %s: %w", v.Version, v.Policy, err)
	}
	return nil
}

// Collect keeps tag on the newest keep versions that carry it, takes it
// off the older ones, and removes every version left without a tag. It
// returns how many it removed. A version another tag names (an
// evaluation's, "best") stays.
func (s *Versions) Collect(ctx context.Context, policy, tag string, keep int) (int, error) {
	vs, err := s.List(ctx, policy)
	if err != nil {
		return 0, err
	}
	seen, removed := 0, 0
	for i := len(vs) - 1; i >= 0; i-- {
		v := &vs[i]
		if v.HasTag(tag) {
			if seen++; seen > keep {
				if err := s.Untag(ctx, policy, v.Version, tag); err != nil {
					return removed, err
				}
				v.Tags = slices.DeleteFunc(v.Tags, func(t string) bool { return t == tag })
			}
		}
		if len(v.Tags) == 0 {
			if err := s.Remove(ctx, *v); err != nil {
				return removed, err
			}
			removed++
		}
	}
	return removed, nil
}

// Load reads the parameters of a kept version from its file.
func Load(v Version) ([]float32, error) {
	data, err := readFile(v.Path, v.Version, v.Epoch)
	if err != nil {
		return nil, fmt.Errorf("paramstream: load version %d of %s: %w", v.Version, v.Policy, err)
	}
	return data, nil
}

// Select picks from vs (oldest first) the version an identifier names:
// a number is that version, a tag the newest version carrying it.
func Select(vs []Version, identifier string) (Version, error) {
	if n, err := strconv.ParseInt(identifier, 10, 64); err == nil {
		for _, v := range vs {
			if v.Version == n {
				return v, nil
			}
		}
		return Version{}, fmt.Errorf("%w: version %d", ErrNoVersion, n)
	}
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].HasTag(identifier) {
			return vs[i], nil
		}
	}
	return Version{}, fmt.Errorf("%w: no version is tagged %q", ErrNoVersion, identifier)
}

// PoolSpec is a pool of versions to draw from: the newest Last versions
// tagged Tag, each as likely.
type PoolSpec struct {
	Tag  string
	Last int
}

// Members are the versions of vs (oldest first) in the pool, oldest first.
func (p PoolSpec) Members(vs []Version) []Version {
	var out []Version
	for i := len(vs) - 1; i >= 0 && len(out) < p.Last; i-- {
		if vs[i].HasTag(p.Tag) {
			out = append(out, vs[i])
		}
	}
	slices.Reverse(out)
	return out
}

// Draw picks a member of the pool uniformly with rng.
func (p PoolSpec) Draw(vs []Version, rng *rand.Rand) (Version, error) {
	m := p.Members(vs)
	if len(m) == 0 {
		return Version{}, fmt.Errorf("%w: no version is tagged %q for the pool", ErrNoVersion, p.Tag)
	}
	return m[rng.IntN(len(m))], nil
}

// keptCached is how many kept versions' parameters a KeptReader holds in
// memory, so that drawing from a pool again does not read a file.
const keptCached = 32

// KeptReader follows one policy's kept versions through a mirror of their
// records (reading them costs no request to the name server) and loads
// their parameters, holding the latest it loaded. It is for one goroutine
// (a worker's loop).
type KeptReader struct {
	policy, prefix string
	mirror         nameresolve.Mirror
	cache          map[keptKey][]float32
	order          []keptKey // cache's keys, oldest first
}

// keptKey is one version of one epoch: a version number kept again by a
// resumed trainer holds other parameters.
type keptKey struct {
	version int64
	epoch   uint64
}

// NewKeptReader opens the mirror of policy's kept versions in trial.
func NewKeptReader(ctx context.Context, repo nameresolve.Repository, trial names.Trial, policy string) (*KeptReader, error) {
	prefix := trial.Versions(policy)
	m, err := repo.Mirror(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("paramstream: follow the kept versions of %s: %w", policy, err)
	}
	return &KeptReader{policy: policy, prefix: prefix, mirror: m, cache: map[keptKey][]float32{}}, nil
}

// Versions are the policy's kept versions as the mirror has them, oldest
// first.
func (r *KeptReader) Versions() []Version {
	return ParseVersions(r.policy, r.prefix, r.mirror.Entries())
}

// Load returns v's parameters, from memory if it loaded them lately. The
// caller must not change them.
func (r *KeptReader) Load(v Version) ([]float32, error) {
	k := keptKey{v.Version, v.Epoch}
	if data, ok := r.cache[k]; ok {
		return data, nil
	}
	data, err := Load(v)
	if err != nil {
		return nil, err
	}
	if len(r.order) == keptCached {
		delete(r.cache, r.order[0])
		r.order = r.order[1:]
	}
	r.cache[k] = data
	r.order = append(r.order, k)
	return data, nil
}

// Close stops following.
func (r *KeptReader) Close() error { return r.mirror.Close() }
