package experiment

import (
	"embed"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
)

// The built-in experiments are YAML files in builtin/, so that
// `rlctl experiments` and the files a user copies and edits are the same.
//
//go:embed builtin/*.yaml
var builtinFS embed.FS

// ErrUnknownExperiment: no built-in experiment has the name.
var ErrUnknownExperiment = errors.New("experiment: no built-in experiment of that name")

// Names lists the built-in experiments, sorted.
func Names() []string {
	entries, err := builtinFS.ReadDir("builtin")
	if err != nil {
		return nil // the directory is embedded: it is there
	}
	var out []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Builtin returns a fresh copy of the built-in experiment name, or an error
// wrapping ErrUnknownExperiment that lists the names there are.
func Builtin(name string) (*Config, error) {
	if !slices.Contains(Names(), name) {
		return nil, fmt.Errorf("%w: %q (built-in: %s)", ErrUnknownExperiment, name, strings.Join(Names(), ", "))
	}
	b, err := builtinFS.ReadFile(path.Join("builtin", name+".yaml"))
	if err != nil {
		return nil, fmt.Errorf("experiment %s: %w", name, err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("experiment %s: %w", name, err)
	}
	return c, nil
}

// BuiltinYAML returns the file a built-in experiment is defined by, for a
// user to copy and edit.
func BuiltinYAML(name string) ([]byte, error) {
	if !slices.Contains(Names(), name) {
		return nil, fmt.Errorf("%w: %q", ErrUnknownExperiment, name)
	}
	return builtinFS.ReadFile(path.Join("builtin", name+".yaml"))
}
