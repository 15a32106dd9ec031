package experiment

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FieldError is one invalid field of a configuration: which field, the
// value found there, and what is allowed instead.
type FieldError struct {
	Field   string // dotted path: workers.actor.count
	Value   any
	Allowed string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s: %s: want %s", e.Field, formatValue(e.Value), e.Allowed)
}

func formatValue(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case nil:
		return "(empty)"
	}
	return fmt.Sprint(v)
}

// namePattern is what may name an experiment or a stream: the names become
// directory names and etcd key segments.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

const nameAllowed = "letters, digits, '.', '_' and '-', starting with a letter or digit"

// Validate checks c against the schema and knownTypes, the worker types the
// caller can start (cmd/rlctl passes its worker.Registry's Types()), and,
// once the groups are sound, that its policies fit together
// (CheckPolicies). It returns every problem at once, each a *FieldError
// (errors.As finds the first), joined.
func (c *Config) Validate(knownTypes []string) error {
	var errs []error
	bad := func(field string, value any, allowed string) {
		errs = append(errs, &FieldError{Field: field, Value: value, Allowed: allowed})
	}
	if !namePattern.MatchString(c.Name) {
		bad("name", c.Name, nameAllowed)
	}
	known := "one of " + strings.Join(knownTypes, ", ")
	total := 0
	for _, name := range sortedKeys(c.Workers) {
		g := c.Workers[name]
		field := "workers." + name
		typ := c.TypeOf(name)
		switch {
		case !namePattern.MatchString(name):
			bad(field, name, "a group name: "+nameAllowed)
		case g.Type != "" && !slices.Contains(knownTypes, g.Type):
			bad(field+".type", g.Type, "a worker type: "+known)
		case g.Type == "" && !slices.Contains(knownTypes, name):
			bad(field, name, "a worker type: "+known+"; or give the group a type")
		}
		switch {
		case g.Count == Auto && typ != TypePolicy && typ != TypeSink:
			bad(field+".count", autoText, "an integer >= 0 (auto is for policy and sink groups)")
		case g.Count < 0 && g.Count != Auto:
			bad(field+".count", int(g.Count), "an integer >= 0")
		}
		if g.PerProcess < 0 {
			bad(field+".per_process", g.PerProcess, "an integer >= 0 (0 or 1: one process per worker)")
		}
		if g.Colocate != "" {
			c.validateColocate(name, g, bad)
		}
		total += g.N()
		if g.Count == Auto {
			total++ // at least 1
		}
		if g.Resources.CPUs < 0 {
			bad(field+".resources.cpus", g.Resources.CPUs, "a number >= 0")
		}
		if g.Resources.GPUs < 0 {
			bad(field+".resources.gpus", g.Resources.GPUs, "an integer >= 0")
		}
		if g.Resources.Memory != "" {
			if _, err := ParseQuantity(g.Resources.Memory); err != nil {
				bad(field+".resources.memory", g.Resources.Memory, "a quantity such as 512Mi, 2Gi or 1G")
			}
		}
	}
	if total == 0 {
		bad("workers", fmt.Sprintf("%d workers", total), "at least one worker of a type in: "+strings.Join(knownTypes, ", "))
	}
	for i, s := range c.Streams.Inference {
		if !namePattern.MatchString(s) {
			bad(fmt.Sprintf("streams.inference[%d]", i), s, nameAllowed)
		}
	}
	for i, s := range c.Streams.Sample {
		if !namePattern.MatchString(s) {
			bad(fmt.Sprintf("streams.sample[%d]", i), s, nameAllowed)
		}
	}
	if c.Stop.EnvSteps < 0 {
		bad("stop.env_steps", c.Stop.EnvSteps, "an integer >= 0 (0: no limit)")
	}
	if d, err := c.Stop.WallTime.Parse(); err != nil || d < 0 {
		bad("stop.wall_time", string(c.Stop.WallTime), "a duration >= 0 such as 90s, 10m or 1h30m")
	}
	if c.Stop.MaxRestarts != nil && *c.Stop.MaxRestarts < 0 {
		bad("stop.max_restarts", *c.Stop.MaxRestarts, "an integer >= 0")
	}
	if d, err := c.MetricsInterval.Parse(); err != nil || d < 0 || (c.MetricsInterval != "" && d < minMetricsInterval) {
		bad("metrics_interval", string(c.MetricsInterval), "a duration of at least "+minMetricsInterval.String()+" such as 2s")
	}
	seen := map[string]bool{}
	for i, t := range c.StartOrder {
		field := fmt.Sprintf("start_order[%d]", i)
		_, group := c.Workers[t]
		switch {
		case seen[t]:
			bad(field, t, "each group or worker type at most once")
		case !group && !slices.Contains(knownTypes, t):
			bad(field, t, "a group of workers or a worker type: "+known)
		}
		seen[t] = true
	}
	if len(errs) == 0 {
		// The groups are sound: see that their policies fit together.
		errs = append(errs, c.CheckPolicies())
	}
	return errors.Join(errs...)
}

// validateColocate checks group name's colocate: another group, not
// itself hosted elsewhere, both a process per worker, and as many workers
// as it has (or auto).
func (c *Config) validateColocate(name string, g Group, bad func(field string, value any, allowed string)) {
	field := "workers." + name
	host, ok := c.Workers[g.Colocate]
	switch {
	case !ok || g.Colocate == name:
		bad(field+".colocate", g.Colocate, "another group of this experiment, whose processes host this group's workers")
		return
	case host.Colocate != "":
		bad(field+".colocate", g.Colocate, "a group that runs its own processes: "+g.Colocate+" is colocated with "+host.Colocate)
	case g.PerProcess > 1:
		bad(field+".per_process", g.PerProcess, "0 or 1 in a colocated group: each of its workers is hosted with one of "+g.Colocate)
	case host.PerProcess > 1:
		bad("workers."+g.Colocate+".per_process", host.PerProcess, "0 or 1: "+name+" is colocated with it, a worker with each of its processes")
	}
	if g.Count != Auto && host.Count != Auto && g.Count != host.Count {
		bad(field+".count", int(g.Count), fmt.Sprintf("%d or auto: one with each %s worker (colocate)", int(host.Count), g.Colocate))
	}
}

// minMetricsInterval keeps the controller from spending its time polling.
const minMetricsInterval = 100 * time.Millisecond

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// quantitySuffixes are the binary (Ki, Mi, ...) and decimal (K, M, ...)
// multipliers of a quantity, as Kubernetes and SLURM write them.
var quantitySuffixes = []struct {
	suffix string
	mult   int64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
}

// ParseQuantity parses a memory quantity ("512Mi", "2Gi", "1G", "1048576")
// into bytes.
func ParseQuantity(s string) (int64, error) {
	num, mult := s, int64(1)
	for _, q := range quantitySuffixes {
		if n, ok := strings.CutSuffix(s, q.suffix); ok {
			num, mult = n, q.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("experiment: quantity %q: want a number >= 0 and one of Ki, Mi, Gi, Ti, K, M, G, T", s)
	}
	return int64(f * float64(mult)), nil
}
