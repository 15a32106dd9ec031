package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/distrl/distrl/controller"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/paramstream"
	"github.com/urfave/cli/v2"
)

// versionsTimeout bounds the name-resolve reads and writes of rlctl
// versions and rlctl tag.
const versionsTimeout = 10 * time.Second

func versionsCommand() *cli.Command {
	return &cli.Command{
		Name:      "versions",
		Usage:     "list the kept versions of a trial's policies: tags, when kept, size, metadata",
		ArgsUsage: "EXPERIMENT TRIAL [POLICY...]",
		Description: "Kept versions are the parameter vectors a trainer set aside (keep_every: an opponent pool, the best one),\n" +
			"with their tags and metadata, read from the trial's name server as rlctl status finds it (its controller's\n" +
			"record under --workdir, else --nameresolve). Every policy when none is given; each policy's oldest first.\n" +
			"Exit code: 1 unknown trial or name server unreachable, 2 bad command line.",
		Flags: withGlobal(
			workdirFlag(),
			&cli.BoolFlag{Name: "json", Usage: "print a JSON array of the versions instead of a table"},
		),
		Action: interspersed(runVersions),
	}
}

func tagCommand() *cli.Command {
	return &cli.Command{
		Name:      "tag",
		Usage:     "tag a kept version of a policy (--remove: untag it), or record metadata with it (--meta)",
		ArgsUsage: "EXPERIMENT TRIAL POLICY VERSION [TAG...]",
		Description: "VERSION is a version number, or a tag: the newest version carrying it. A tag is letters, digits,\n" +
			"'.', '_' and '-', not a number nor \"latest\". --meta key=value (repeatable) records metadata with the\n" +
			"version, the value parsed as JSON when it can be, else a string. Prints the version afterwards.\n" +
			"Example: rlctl tag spread-teams-ppo t1 red 1200 best --meta eval_return=-41.5\n" +
			"Exit code: 1 unknown trial or name server unreachable, 2 bad command line, a bad tag or a version not kept.",
		Flags: withGlobal(
			workdirFlag(),
			&cli.BoolFlag{Name: "remove", Usage: "take the tags off instead of adding them"},
			&cli.GenericFlag{Name: "meta", Value: &setList{}, Usage: "record metadata key=value with the version (repeatable)"},
		),
		Action: interspersed(runTag),
	}
}

func runVersions(c *cli.Context, args []string) error {
	if len(args) < 2 {
		return cli.Exit("usage: rlctl versions EXPERIMENT TRIAL [POLICY...]", exitUsage)
	}
	ctx, cancel := context.WithTimeout(c.Context, versionsTimeout)
	defer cancel()
	s, err := openVersions(ctx, c, args[0], args[1])
	if err != nil {
		return err
	}
	defer s.Close()
	policies := args[2:]
	if len(policies) == 0 {
		if policies, err = s.versions.Policies(ctx); err != nil {
			return cli.Exit(err.Error(), exitFailed)
		}
	}
	all := []paramstream.Version{} // --json: [] rather than null
	for _, p := range policies {
		vs, err := s.versions.List(ctx, p)
		if err != nil {
			return cli.Exit(err.Error(), exitFailed)
		}
		all = append(all, vs...)
	}
	if len(all) == 0 {
		if err := s.checkKnown(ctx); err != nil {
			return err
		}
	}
	w := c.App.Writer
	switch {
	case c.Bool("json"):
		return encodeJSON(w, all)
	case len(all) == 0 && len(args) > 2:
		_, err = fmt.Fprintf(w, "trial %s: no kept versions of %s\n", s.name(), strings.Join(args[2:], ", "))
		return err
	case len(all) == 0:
		_, err = fmt.Fprintf(w, "trial %s: no kept versions\n", s.name())
		return err
	}
	return writeVersions(w, all)
}

func runTag(c *cli.Context, args []string) error {
	if len(args) < 4 {
		return cli.Exit("usage: rlctl tag EXPERIMENT TRIAL POLICY VERSION [TAG...] [--remove] [--meta key=value ...]", exitUsage)
	}
	policy, id, tags := args[2], args[3], args[4:]
	remove := c.Bool("remove")
	meta, err := parseKwargs(*c.Generic("meta").(*setList))
	if err != nil {
		return cli.Exit("--meta: "+err.Error(), exitUsage)
	}
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		if !metaKeyPattern.MatchString(k) {
			return cli.Exit(fmt.Sprintf("--meta: key %q: want letters, digits, '.', '_' and '-'", k), exitUsage)
		}
	}
	switch {
	case len(tags) == 0 && len(meta) == 0:
		return cli.Exit("rlctl tag: give a TAG, or --meta key=value", exitUsage)
	case remove && len(meta) > 0:
		return cli.Exit("rlctl tag: --remove takes tags off; give --meta without it", exitUsage)
	case remove && len(tags) == 0:
		return cli.Exit("rlctl tag --remove: give the TAG to take off", exitUsage)
	}
	for _, t := range tags {
		if err := paramstream.CheckTag(t); err != nil {
			return cli.Exit(strings.TrimPrefix(err.Error(), "paramstream: "), exitUsage)
		}
	}

	ctx, cancel := context.WithTimeout(c.Context, versionsTimeout)
	defer cancel()
	s, err := openVersions(ctx, c, args[0], args[1])
	if err != nil {
		return err
	}
	defer s.Close()
	if s.saved {
		return cli.Exit(fmt.Sprintf("trial %s has no live name server: its kept versions are read from %s; tag them while a run of the trial is live",
			s.name(), s.endpoint), exitFailed)
	}
	v, err := s.find(ctx, policy, id)
	if err != nil {
		return err
	}
	for _, t := range tags {
		if remove {
			err = s.versions.Untag(ctx, policy, v.Version, t)
		} else {
			err = s.versions.Tag(ctx, policy, v.Version, t)
		}
		if err != nil {
			return versionExit(err)
		}
	}
	if len(meta) > 0 {
		if err := s.versions.SetMetadata(ctx, policy, v.Version, meta); err != nil {
			return versionExit(err)
		}
	}
	v, err = s.find(ctx, policy, strconv.FormatInt(v.Version, 10))
	if err != nil {
		return err
	}
	return writeVersions(c.App.Writer, []paramstream.Version{v})
}

// metaKeyPattern is what may name a metadata key (paramstream's key
// segment), checked before anything is written.
var metaKeyPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)

// versionExit is the exit of a failed write to a kept version: one that
// is not kept (any more) is a bad argument, anything else a failure.
func versionExit(err error) error {
	if errors.Is(err, paramstream.ErrNoVersion) {
		return cli.Exit(err.Error(), exitUsage)
	}
	return cli.Exit(err.Error(), exitFailed)
}

// versionsSession is what rlctl versions and rlctl tag work with: the
// trial, its directory, and its kept versions on its name server.
type versionsSession struct {
	dir      controller.TrialDir
	trial    names.Trial
	endpoint string
	repo     nameresolve.Repository
	versions *paramstream.Versions
	// saved: the trial's name server is gone and the records are those
	// its last run saved (controller.VersionsFile), to read, not change.
	saved bool
}

// openVersions reaches the kept versions of the trial EXPERIMENT TRIAL
// through its name server, found as rlctl status finds it.
func openVersions(ctx context.Context, c *cli.Context, expArg, trialArg string) (*versionsSession, error) {
	log, err := logger(c)
	if err != nil {
		return nil, err
	}
	expName := experimentName(expArg)
	dir, err := trialDir(c, expName, trialArg)
	if err != nil {
		return nil, err
	}
	trial := names.NewTrial(expName, trialArg)
	rec, recErr := dir.ReadRecord()
	if embeddedGone(rec, recErr) {
		return openSaved(ctx, dir, trial, rec)
	}
	repo, err := openTrialRepo(ctx, c, rec, recErr, log)
	if err != nil {
		return nil, err
	}
	ep, _ := trialNameResolve(c, rec, recErr)
	return &versionsSession{dir: dir, trial: trial, endpoint: ep, repo: repo,
		versions: paramstream.NewVersions(repo, trial)}, nil
}

// openSaved reads the kept versions a finished run of the trial saved in
// its directory, its embedded name server gone with its controller.
func openSaved(ctx context.Context, dir controller.TrialDir, trial names.Trial, rec *controller.Record) (*versionsSession, error) {
	path := dir.Path(controller.VersionsFile)
	entries, err := controller.LoadSavedVersions(path)
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("the controller of trial %s/%s (pid %d) is gone, and with it the embedded name server that held its kept versions; none saved (%v)",
			trial.Experiment, trial.Trial, rec.PID, err), exitFailed)
	}
	repo := nameresolve.NewMemory()
	for _, e := range entries {
		if err := repo.Add(ctx, e.Key, e.Value, nameresolve.AddOptions{Replace: true}); err != nil {
			_ = repo.Close()
			return nil, cli.Exit(err.Error(), exitFailed)
		}
	}
	return &versionsSession{dir: dir, trial: trial, endpoint: path, repo: repo,
		versions: paramstream.NewVersions(repo, trial), saved: true}, nil
}

func (s *versionsSession) Close() error { return s.repo.Close() }

// name is EXPERIMENT/TRIAL.
func (s *versionsSession) name() string { return s.trial.Experiment + "/" + s.trial.Trial }

// checkKnown refuses a trial that has neither a directory nor any kept
// version: a misspelt name, most likely.
func (s *versionsSession) checkKnown(ctx context.Context) error {
	if _, err := os.Stat(string(s.dir)); err == nil {
		return nil
	}
	ps, err := s.versions.Policies(ctx)
	if err != nil {
		return cli.Exit(err.Error(), exitFailed)
	}
	if len(ps) == 0 {
		return cli.Exit(fmt.Sprintf("unknown trial %s: no trial directory %s and no kept versions in the name server at %s",
			s.name(), s.dir, s.endpoint), exitFailed)
	}
	return nil
}

// find returns the kept version of policy that id names: a version
// number, or a tag (the newest version carrying it).
func (s *versionsSession) find(ctx context.Context, policy, id string) (paramstream.Version, error) {
	vs, err := s.versions.List(ctx, policy)
	if err != nil {
		return paramstream.Version{}, cli.Exit(err.Error(), exitFailed)
	}
	if len(vs) == 0 {
		if err := s.checkKnown(ctx); err != nil {
			return paramstream.Version{}, err
		}
		return paramstream.Version{}, cli.Exit(fmt.Sprintf("trial %s: policy %s has no kept versions", s.name(), policy), exitUsage)
	}
	v, err := paramstream.Select(vs, id)
	if err != nil {
		what := "version " + id
		if _, nerr := strconv.ParseInt(id, 10, 64); nerr != nil {
			what = fmt.Sprintf("version tagged %q", id)
		}
		return v, cli.Exit(fmt.Sprintf("trial %s: policy %s has no kept %s (it keeps %s)", s.name(), policy, what, keptRange(vs)), exitUsage)
	}
	return v, nil
}

// keptRange says which versions vs (oldest first, not empty) holds.
func keptRange(vs []paramstream.Version) string {
	if len(vs) == 1 {
		return fmt.Sprintf("version %d", vs[0].Version)
	}
	return fmt.Sprintf("%d versions, %d to %d", len(vs), vs[0].Version, vs[len(vs)-1].Version)
}

// writeVersions prints versions as a table.
func writeVersions(w io.Writer, vs []paramstream.Version) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POLICY\tVERSION\tTAGS\tCREATED\tVALUES\tMETADATA")
	for _, v := range vs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s\n", v.Policy, v.Version, orDash(strings.Join(v.Tags, ",")),
			v.Created.Format(time.RFC3339), v.Values, orDash(formatMetadata(v.Metadata)))
	}
	return tw.Flush()
}

// formatMetadata is metadata as key=value pairs sorted by key, each value
// compact JSON: games=200 note="vs v12" win_rate=0.75.
func formatMetadata(md map[string]any) string {
	parts := make([]string, 0, len(md))
	for _, k := range slices.Sorted(maps.Keys(md)) {
		b, err := json.Marshal(md[k])
		if err != nil {
			b = []byte(fmt.Sprint(md[k]))
		}
		parts = append(parts, k+"="+string(b))
	}
	return strings.Join(parts, " ")
}
