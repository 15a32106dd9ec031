package experiment

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Defaults of the optional fields of Config.
const (
	DefaultMetricsInterval = 2 * time.Second
	DefaultMaxRestarts     = 3
)

// DefaultStartOrder is the order worker types start in when a Config gives
// none: consumers before producers, so that the first samples and inference
// requests find someone to take them. Groups of types not listed start
// last, sorted by name.
var DefaultStartOrder = []string{"replay", "trainer", "policy", "sink", "actor", "evaluator", "echo"}

// IndexPlaceholder in a string value of a group's config is replaced by the
// worker's index ("/data/shard-{index}").
const IndexPlaceholder = "{index}"

// Config is one experiment. The zero values of optional fields mean
// "default"; the accessors (StartOrderOf, MetricsEvery, ...) apply them.
type Config struct {
	// Name names the experiment: the first level of the trial directory and
	// of the trial's etcd keys.
	Name string `json:"name"`
	// Description is the one line `rlctl experiments` shows.
	Description string `json:"description,omitempty"`
	// Seed is the base of every worker's seed: worker i of a group gets
	// Seed+i (or the group config's own seed + i).
	Seed int64 `json:"seed,omitempty"`
	// Workers maps a group's name to the group. A group's workers are
	// named {group}/{index}; its type is the group's Type, or its name
	// when Type is empty (workers: {actor: ...} is a group of actors).
	// Several groups of one type (a policy worker group per policy) each
	// need a Type.
	Workers map[string]Group `json:"workers"`
	// Streams names the data streams the workers use (documentation and a
	// check for the status view; the workers' configs say which they use).
	Streams Streams `json:"streams,omitzero"`
	Stop    Stop    `json:"stop,omitzero"`
	// StartOrder lists groups, or worker types (every group of the type,
	// by name), in the order they are configured and started;
	// DefaultStartOrder if empty.
	StartOrder []string `json:"start_order,omitempty"`
	// MetricsInterval is how often the controller polls stats and appends
	// to metrics.jsonl; DefaultMetricsInterval if empty.
	MetricsInterval Duration `json:"metrics_interval,omitempty"`
}

// Group is a set of workers of one type with one configuration.
type Group struct {
	// Type is the worker type; empty: the group's name is its type.
	Type string `json:"type,omitempty"`
	// Count is how many: a number, or "auto" for a policy or sink group,
	// which ResolveCounts turns into one on the machine of the controller.
	Count Count `json:"count"`
	// PerProcess is how many of the group's workers one process hosts
	// (`rlctl worker --count`): worker i runs in process i/PerProcess, the
	// last process takes the remainder. 0 or 1: a process per worker.
	// Hosted workers share one loop goroutine, so this is for light
	// workers (echo at scale), and a process is restarted as a whole.
	PerProcess int `json:"per_process,omitempty"`
	// Colocate names the group whose processes host this group's workers:
	// worker k runs in the process of that group's worker k (`rlctl
	// worker --with`), in the same loop. A policy group colocated with its
	// actors answers each actor without a hand-off between processes
	// (docs/dataplane.md, "Colocated policy workers"). Both groups run a
	// process per worker and this group has as many workers as the other
	// (count: auto means that many).
	Colocate  string    `json:"colocate,omitempty"`
	Resources Resources `json:"resources,omitzero"`
	// Config is the kwargs of the workers' configure command. String values
	// may hold IndexPlaceholder.
	Config map[string]any `json:"config,omitempty"`
}

// Count is a group's number of workers: an integer >= 0, or Auto.
type Count int

// Auto is count: auto, which only policy and sink groups may give:
// ResolveCounts replaces it by AutoPolicyWorkers or AutoSinks. No number
// decodes to it.
const Auto Count = math.MinInt

// autoText is how Auto is written.
const autoText = "auto"

// String is "auto" or the number.
func (n Count) String() string {
	if n == Auto {
		return autoText
	}
	return strconv.Itoa(int(n))
}

// MarshalJSON writes Auto as "auto", any other count as its number.
func (n Count) MarshalJSON() ([]byte, error) {
	if n == Auto {
		return []byte(`"` + autoText + `"`), nil
	}
	return strconv.AppendInt(nil, int64(n), 10), nil
}

// UnmarshalJSON reads "auto" or an integer.
func (n *Count) UnmarshalJSON(b []byte) error {
	if string(b) == `"`+autoText+`"` {
		*n = Auto
		return nil
	}
	var i int
	if err := json.Unmarshal(b, &i); err != nil {
		// The json package adds the field's path to this error.
		return &json.UnmarshalTypeError{Value: string(b), Type: reflect.TypeFor[Count]()}
	}
	*n = Count(max(i, math.MinInt+1)) // negative, as written, but never Auto
	return nil
}

// AutoPolicyWorkers is what count: auto means for policy workers: one per
// 4 cores of the controller's machine, and no more than there are actors
// (actors < 0: no actor group), at least 1. Measured on 16 cores
// (docs/performance.md), a policy worker keeps up with about 4 cores'
// worth of actors; past one per actor, more policy workers only split the
// batches.
func AutoPolicyWorkers(cores, actors int) int {
	n := cores / 4
	if actors >= 0 {
		n = min(n, actors)
	}
	return max(n, 1)
}

// actorsPerSink is how many actors' samples one sink of count: auto takes:
// at rings of 64 CartPoles a sink's process spent 0.42 us a step against
// an actor process's 1.2 (docs/dataplane.md), so four actors keep a sink
// about as busy as an actor's process and one sink cannot bound 14.
const actorsPerSink = 4

// AutoSinks is what count: auto means for sinks: one per 4 actors (actors
// < 0: no actor group), at least 1. Actors' sample producers hand their
// messages to the stream's consumers in turn, so the sinks share the load.
func AutoSinks(actors int) int {
	return max((actors+actorsPerSink-1)/actorsPerSink, 1)
}

// ResolveCounts replaces count: auto by its number for a controller on a
// machine of cores cores (runtime.NumCPU()); counts already numbers stay.
// The controller calls it before it starts anything; rlctl start before
// it prints or starts a plan.
func (c *Config) ResolveCounts(cores int) {
	actors := -1
	for name, g := range c.Workers {
		if c.TypeOf(name) == TypeActor && g.Count != Auto {
			actors = max(actors, 0) + int(g.Count)
		}
	}
	for name, g := range c.Workers {
		if g.Count == Auto {
			if c.TypeOf(name) == TypeSink {
				g.Count = Count(AutoSinks(actors))
			} else {
				g.Count = Count(AutoPolicyWorkers(cores, actors))
			}
			if host, ok := c.Workers[g.Colocate]; ok && host.Count != Auto {
				g.Count = host.Count // one in each of the host's processes
			}
			c.Workers[name] = g
		}
	}
}

// Colocated lists the groups whose workers the processes of group host
// (their Colocate names it), sorted by name.
func (c *Config) Colocated(group string) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(c.Workers)) {
		if g := c.Workers[name]; g.Colocate != "" && g.Colocate == group {
			out = append(out, name)
		}
	}
	return out
}

// N is the group's number of workers once ResolveCounts has run (an
// unresolved Auto counts 0).
func (g Group) N() int { return max(int(g.Count), 0) }

// WorkersPerProcess is PerProcess with its default applied: at least 1.
func (g Group) WorkersPerProcess() int { return max(g.PerProcess, 1) }

// Processes is how many processes of its own the group runs: none where
// another group's processes host its workers (Colocate).
func (g Group) Processes() int {
	if g.Colocate != "" {
		return 0
	}
	return (g.N() + g.WorkersPerProcess() - 1) / g.WorkersPerProcess()
}

// Resources is what one worker of a group needs. The local scheduler only
// records them; a cluster scheduler turns them into its resource requests.
type Resources struct {
	CPUs float64 `json:"cpus,omitempty"`
	// Memory is a quantity such as "512Mi", "2Gi" or "1G".
	Memory string `json:"memory,omitempty"`
	GPUs   int    `json:"gpus,omitempty"`
}

// Streams names the inference and sample streams of an experiment.
type Streams struct {
	Inference []string `json:"inference,omitempty"`
	Sample    []string `json:"sample,omitempty"`
	Replay    []string `json:"replay,omitempty"`
}

// Stop says when a trial is done. Every condition that is set ends it;
// none set means the trial runs until it is stopped.
type Stop struct {
	// EnvSteps ends the trial once the actors have stepped this many
	// environment steps in all (0: no limit).
	EnvSteps int64 `json:"env_steps,omitempty"`
	// WallTime ends the trial this long after every worker is running.
	WallTime Duration `json:"wall_time,omitempty"`
	// TargetReturn ends the trial once the mean return of the last 20
	// episodes reaches it.
	TargetReturn *float64 `json:"target_return,omitempty"`
	// EvalReturn ends the trial once an evaluator has measured a kept
	// version's mean return at it or above (that version is the trial's
	// best, tagged so).
	EvalReturn *float64 `json:"eval_return,omitempty"`
	// MaxRestarts is how often one worker may be restarted before the trial
	// fails; DefaultMaxRestarts if nil.
	MaxRestarts *int `json:"max_restarts,omitempty"`
}

// Duration is a duration written the Go way ("90s", "10m", "1h30m"). It is
// kept as written so that a bad value reaches Validate, which names the
// field, instead of failing the decode.
type Duration string

// Parse returns d as a time.Duration; "" is 0.
func (d Duration) Parse() (time.Duration, error) {
	if d == "" {
		return 0, nil
	}
	return time.ParseDuration(string(d))
}

// value is Parse for a validated Config: an invalid d is 0.
func (d Duration) value() time.Duration {
	v, _ := d.Parse()
	return v
}

// MetricsEvery is MetricsInterval with its default applied.
func (c *Config) MetricsEvery() time.Duration {
	if v := c.MetricsInterval.value(); v > 0 {
		return v
	}
	return DefaultMetricsInterval
}

// WallTimeLimit is WallTime as a duration (0: no limit).
func (s Stop) WallTimeLimit() time.Duration { return s.WallTime.value() }

// Restarts is MaxRestarts with its default applied.
func (s Stop) Restarts() int {
	if s.MaxRestarts == nil {
		return DefaultMaxRestarts
	}
	return *s.MaxRestarts
}

// The worker types the configuration itself knows of: ResolveCounts counts
// actors for a policy or sink group's count: auto.
const (
	TypeActor  = "actor"
	TypePolicy = "policy"
)

// TypeOf is the worker type of group: its Type, or its name.
func (c *Config) TypeOf(group string) string {
	return cmp.Or(c.Workers[group].Type, group)
}

// GroupsOf lists the groups of worker type typ, sorted by name.
func (c *Config) GroupsOf(typ string) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(c.Workers)) {
		if c.TypeOf(name) == typ {
			out = append(out, name)
		}
	}
	return out
}

// Groups lists the groups of c in start order: for each entry of
// StartOrder (or DefaultStartOrder), the groups of that type sorted by
// name, or the group of that name; then the others sorted by name.
func (c *Config) Groups() []string {
	order := c.StartOrder
	if len(order) == 0 {
		order = DefaultStartOrder
	}
	var out []string
	add := func(names ...string) {
		for _, n := range names {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	for _, e := range order {
		if _, ok := c.Workers[e]; ok && c.TypeOf(e) != e {
			add(e) // a group named in the order, of another type
			continue
		}
		add(c.GroupsOf(e)...)
	}
	add(slices.Sorted(maps.Keys(c.Workers))...)
	return out
}

// WorkerConfig is the configure kwargs of worker index of group: a copy
// of the group's config with IndexPlaceholder replaced and a seed added
// (Seed+index, or the group's own seed + index).
func (c *Config) WorkerConfig(group string, index int) map[string]any {
	g := c.Workers[group]
	out := make(map[string]any, len(g.Config)+1)
	for k, v := range g.Config {
		out[k] = substitute(v, strings.NewReplacer(IndexPlaceholder, fmt.Sprint(index)))
	}
	base := c.Seed
	switch s := out["seed"].(type) {
	case int64:
		base = s
	case float64:
		base = int64(s)
	}
	out["seed"] = base + int64(index)
	return out
}

// substitute replaces placeholders in every string below v, copying maps
// and lists so the group's config is left as it was.
func substitute(v any, r *strings.Replacer) any {
	switch x := v.(type) {
	case string:
		return r.Replace(x)
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = substitute(e, r)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = substitute(e, r)
		}
		return l
	}
	return v
}

// Load reads and decodes the configuration file at path (YAML or JSON).
// It does not validate: call Validate after any Set.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("experiment %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes a YAML (or JSON) configuration strictly: unknown keys and
// values of the wrong type are *FieldErrors.
func Parse(data []byte) (*Config, error) {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	return decodeJSON(j)
}

// decodeJSON is the one strict decoder behind Parse and Set.
func decodeJSON(j []byte) (*Config, error) {
	var c Config
	if err := strictDecode(j, &c); err != nil {
		var tree any
		_ = json.Unmarshal(j, &tree) // j decoded as far as the error: it is JSON
		return nil, decodeError(err, tree)
	}
	for t, g := range c.Workers {
		if g.Config != nil {
			g.Config = normalize(g.Config).(map[string]any)
			c.Workers[t] = g
		}
	}
	return &c, nil
}

func strictDecode(j []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	return dec.Decode(v)
}

// normalize turns json.Numbers into int64 where they are whole, else
// float64, so that workers receive integers as msgpack integers.
func normalize(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64() // the decoder only makes valid numbers
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
	}
	return v
}

// decodeError turns the json package's errors into FieldErrors, finding
// the field's full path and value in tree, the document as decoded
// generically: the json package leaves map keys (the worker type) out of
// its paths and reports unknown keys by name only.
func decodeError(err error, tree any) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if path, v, ok := findPath(tree, strings.Split(te.Field, ".")); ok {
			return &FieldError{Field: path, Value: v, Allowed: "a " + jsonType(te.Type.String())}
		}
		return &FieldError{Field: field, Value: "a " + te.Value, Allowed: "a " + jsonType(te.Type.String())}
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		fe := &FieldError{Field: name, Allowed: "no such field: a known one (docs/experiments.md has the schema)"}
		if path, v, ok := findPath(tree, []string{name}); ok {
			fe.Field, fe.Value = path, v
		}
		return fe
	}
	return fmt.Errorf("decode: %w", err)
}

// findPath looks in tree for a path whose keys are want, in order, with any
// number of other keys (map keys the json package leaves out) between
// them, and returns it dotted with the value found there.
func findPath(tree any, want []string) (string, any, bool) {
	m, ok := tree.(map[string]any)
	if !ok || len(want) == 0 {
		return "", nil, false
	}
	for _, k := range sortedKeys(m) {
		v := m[k]
		if k == want[0] {
			if len(want) == 1 {
				return k, v, true
			}
			if p, found, ok := findPath(v, want[1:]); ok {
				return k + "." + p, found, true
			}
		}
		if p, found, ok := findPath(v, want); ok {
			return k + "." + p, found, true
		}
	}
	return "", nil, false
}

// jsonType names Go types the way a YAML author thinks of them.
func jsonType(goType string) string {
	switch goType {
	case "int", "int64", "float64":
		return "number"
	case "experiment.Count":
		return "integer >= 0 (or auto, for a policy or sink group)"
	case "experiment.Duration":
		return "duration such as 90s or 10m"
	case "string":
		return "string"
	case "map[string]experiment.Group", "experiment.Group", "experiment.Stop", "experiment.Resources",
		"experiment.Streams", "map[string]interface {}":
		return "mapping"
	case "[]string":
		return "list of strings"
	}
	return goType
}

// Set applies one override "dotted.path=value" (`--set`): the path walks
// the configuration's tree (workers.actor.count, stop.wall_time,
// workers.actor.config.ring_size), a number indexing a list
// (workers.replay.config.tables.0.max_size); the value is parsed as a YAML scalar
// or flow value (4, 2.5, true, 10m, [policy, actor]). Missing mappings on
// the path are created. The result is decoded strictly, so a path to no
// field is a *FieldError; c is unchanged on error.
func (c *Config) Set(assignment string) error {
	path, raw, ok := strings.Cut(assignment, "=")
	path = strings.TrimSpace(path)
	if !ok || path == "" {
		return &FieldError{Field: "--set", Value: assignment, Allowed: "key=value, key a dotted path such as workers.actor.count"}
	}
	var value any
	if err := yaml.Unmarshal([]byte(raw), &value); err != nil {
		// Not valid YAML ("{index}-x", say): take the text as it is.
		value = raw
	}
	tree, err := c.tree()
	if err != nil {
		return err
	}
	keys := strings.Split(path, ".")
	// node is a mapping or a list; a list is indexed by a number
	// (workers.replay.config.tables.0.max_size).
	var node any = tree
	for i, k := range keys {
		last := i == len(keys)-1
		switch n := node.(type) {
		case map[string]any:
			if last {
				n[k] = value
				break
			}
			next, ok := n[k]
			if !ok || next == nil {
				next = map[string]any{}
				n[k] = next
			}
			node = next
		case []any:
			idx, err := strconv.Atoi(k)
			if err != nil || idx < 0 || idx >= len(n) {
				return &FieldError{Field: strings.Join(keys[:i+1], "."), Value: k,
					Allowed: fmt.Sprintf("an index of the list at %s, 0 to %d", strings.Join(keys[:i], "."), len(n)-1)}
			}
			if last {
				n[idx] = value
				break
			}
			node = n[idx]
		default:
			return &FieldError{Field: strings.Join(keys[:i], "."), Value: node,
				Allowed: "a mapping or a list, to set " + path + " inside it"}
		}
	}
	j, err := json.Marshal(tree)
	if err != nil {
		return fmt.Errorf("experiment: set %s: %w", path, err)
	}
	fresh, err := decodeJSON(j)
	if err != nil {
		return err // a *FieldError naming the path, or a decode error
	}
	*c = *fresh
	return nil
}

// tree is c as a generic JSON tree.
func (c *Config) tree() (map[string]any, error) {
	j, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	var tree map[string]any
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	return tree, nil
}

// YAML renders c as YAML: the snapshot written to a trial's config.yaml.
func (c *Config) YAML() ([]byte, error) {
	b, err := yaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	return b, nil
}
