package experiment

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The configuration keys Policies reads: what the actor, policy, trainer,
// sink and replay worker types call a policy and their streams. They are
// the workers' own keys (docs/workers.md), read here so that a trial whose
// policies do not fit together is refused before anything starts.
const (
	keyPolicy       = "policy"
	keySampleStream = "sample_stream"
	keyReplayStream = "replay_stream"
	keyInference    = "inference"
	keyAgents       = "agents"
	keyStream       = "stream"
	keyAlgorithm    = "algorithm"
	keyPool         = "pool"

	defaultName     = "default" // a policy's, a stream's
	nullStream      = "null"    // an actor's sample_stream that discards
	inferenceInline = "inline"
	algorithmDQN    = "dqn"

	TypeTrainer = "trainer"
	TypeSink    = "sink"
	TypeReplay  = "replay"
)

// Policy is one policy of an experiment: the groups that act with it,
// serve it and train it, as their configurations say.
type Policy struct {
	Name string
	// Uses are the actors' uses of the policy: a group's whole
	// configuration, or one mapping of its agents (Field says which).
	Uses []PolicyUse
	// Servers are the policy worker groups serving it, Trainers the
	// trainer groups training it (with workers: count > 0 or auto).
	Servers, Trainers []string
	// trainerFeeds are the streams the policy's trainers read.
	trainerFeeds []feed
}

// PolicyUse is an actor group's use of a policy.
type PolicyUse struct {
	Group string
	// Field is the dotted path of the key naming the policy:
	// workers.actor.config.policy, workers.actor.config.agents.1.policy.
	Field  string
	Remote bool // inference by policy workers, not inline
	Feed   feed // where the samples go; zero: discarded
}

// feed is a stream of samples: Kind "sample" or "replay".
type feed struct{ Kind, Name string }

func (f feed) String() string { return f.Kind + " stream " + f.Name }

// Policies lists the experiment's policies by name, from the configurations
// of its groups with workers: every policy an actor, a policy worker or a
// trainer names.
func (c *Config) Policies() []*Policy {
	byName := map[string]*Policy{}
	get := func(name string) *Policy {
		p := byName[name]
		if p == nil {
			p = &Policy{Name: name}
			byName[name] = p
		}
		return p
	}
	for _, group := range c.Groups() {
		g := c.Workers[group]
		if g.N() == 0 && g.Count != Auto {
			continue
		}
		field := "workers." + group + ".config."
		name := stringKey(g.Config, keyPolicy, defaultName)
		switch c.TypeOf(group) {
		case TypeActor:
			for _, u := range actorUses(group, field, g.Config) {
				get(u.policy).Uses = append(get(u.policy).Uses, u.PolicyUse)
			}
		case TypePolicy:
			get(name).Servers = append(get(name).Servers, group)
		case TypeTrainer:
			p := get(name)
			p.Trainers = append(p.Trainers, group)
			if stringKey(g.Config, keyAlgorithm, "") == algorithmDQN {
				p.trainerFeeds = append(p.trainerFeeds, feed{"replay", stringKey(g.Config, keyReplayStream, defaultName)})
			} else {
				p.trainerFeeds = append(p.trainerFeeds, feed{"sample", stringKey(g.Config, keySampleStream, defaultName)})
			}
		}
	}
	out := make([]*Policy, 0, len(byName))
	for _, name := range sortedKeys(byName) {
		out = append(out, byName[name])
	}
	return out
}

type namedUse struct {
	PolicyUse
	policy string
}

// actorUses are the policies an actor group's configuration uses: one, or
// one per mapping of its agents.
func actorUses(group, field string, cfg map[string]any) []namedUse {
	inline := stringKey(cfg, keyInference, "") == inferenceInline
	maps, ok := cfg[keyAgents].([]any)
	if !ok || len(maps) == 0 {
		return []namedUse{{policy: stringKey(cfg, keyPolicy, defaultName), PolicyUse: PolicyUse{
			Group: group, Field: field + keyPolicy, Remote: !inline,
			Feed: actorFeed(cfg, stringKey(cfg, keySampleStream, defaultName))}}}
	}
	var out []namedUse
	for i, m := range maps {
		mc, _ := m.(map[string]any)
		name := stringKey(mc, keyPolicy, "")
		if name == "" {
			continue // the actor's own check says so, naming the mapping
		}
		mInline := inline
		if mode := stringKey(mc, keyInference, ""); mode != "" {
			mInline = mode == inferenceInline
		}
		if _, pool := mc[keyPool]; pool {
			mInline = true // a pool's versions play in the actor
		}
		out = append(out, namedUse{policy: name, PolicyUse: PolicyUse{
			Group: group, Field: fmt.Sprintf("%s%s.%d.%s", field, keyAgents, i, keyPolicy), Remote: !mInline,
			Feed: actorFeed(mc, stringKey(mc, keySampleStream, name))}})
	}
	return out
}

// actorFeed is where an actor (or one mapping of its agents) sends its
// samples: its replay stream if it names one, else sample, unless null.
func actorFeed(cfg map[string]any, sample string) feed {
	if r := stringKey(cfg, keyReplayStream, ""); r != "" {
		return feed{"replay", r}
	}
	if sample == nullStream {
		return feed{}
	}
	return feed{"sample", sample}
}

// stringKey is cfg[key] if it is a non-empty string, else def.
func stringKey(cfg map[string]any, key, def string) string {
	s, _ := cfg[key].(string)
	return cmp.Or(s, def)
}

// CheckPolicies refuses an experiment whose policies do not fit together,
// each problem a *FieldError naming the key: a policy an actor asks
// policy workers for that no policy group serves; where the experiment
// has trainers, a policy an actor uses that no trainer trains, a trainer
// of a policy no actor uses, and a trainer whose stream carries another
// policy's samples or none of its own. An experiment without trainers
// (a sink's, a benchmark's) may act with untrained policies.
func (c *Config) CheckPolicies() error {
	var errs []error
	bad := func(field string, value any, allowed string) {
		errs = append(errs, &FieldError{Field: field, Value: value, Allowed: allowed})
	}
	policies := c.Policies()
	var served, trained []string
	for _, p := range policies {
		if len(p.Servers) > 0 {
			served = append(served, p.Name)
		}
		if len(p.Trainers) > 0 {
			trained = append(trained, p.Name)
		}
	}
	training := len(trained) > 0
	for _, p := range policies {
		for _, u := range p.Uses {
			if u.Remote && len(p.Servers) == 0 {
				bad(u.Field, p.Name, "a policy a policy worker group serves ("+listOr(served, "none is")+"), or inference: inline")
			}
			if training && u.Feed != (feed{}) && len(p.Trainers) == 0 {
				bad(u.Field, p.Name, "a policy a trainer group trains ("+listOr(trained, "none is")+")")
			}
		}
		if len(p.Uses) == 0 && len(p.Trainers) > 0 {
			for _, t := range p.Trainers {
				bad("workers."+t+".config."+keyPolicy, p.Name, "a policy some actor's agents use")
			}
		}
		for i, f := range p.trainerFeeds {
			var own, other []string
			for _, q := range policies {
				for _, u := range q.Uses {
					if u.Feed == f {
						if q.Name == p.Name {
							own = append(own, u.Field)
						} else {
							other = append(other, fmt.Sprintf("%s (policy %s)", u.Field, q.Name))
						}
					}
				}
			}
			field := "workers." + p.Trainers[i] + ".config"
			switch {
			case len(other) > 0:
				bad(field, f.String(), "a stream only policy "+p.Name+"'s samples go to; "+strings.Join(other, ", ")+" send there too")
			case len(own) == 0 && len(p.Uses) > 0:
				bad(field, f.String(), "the stream the actors send policy "+p.Name+"'s samples to")
			}
		}
	}
	return errors.Join(errs...)
}

// listOr lists names, or says none.
func listOr(names []string, none string) string {
	if len(names) == 0 {
		return none
	}
	return strings.Join(slices.Sorted(slices.Values(names)), ", ")
}
