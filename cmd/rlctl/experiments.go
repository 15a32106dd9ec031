package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/distrl/distrl/controller"
	"github.com/distrl/distrl/experiment"
	"github.com/urfave/cli/v2"
)

func experimentsCommand() *cli.Command {
	return &cli.Command{
		Name:      "experiments",
		Usage:     "list the built-in experiments, or print one's configuration to copy and edit",
		ArgsUsage: "[NAME]",
		Action: func(c *cli.Context) error {
			if name := c.Args().First(); name != "" {
				b, err := experiment.BuiltinYAML(name)
				if err != nil {
					return cli.Exit(fmt.Sprintf("%v (built-in: %s)", err, strings.Join(experiment.Names(), ", ")), 2)
				}
				_, err = os.Stdout.Write(b)
				return err
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "EXPERIMENT\tWORKERS\tDESCRIPTION")
			for _, name := range experiment.Names() {
				cfg, err := experiment.Builtin(name)
				if err != nil {
					return err
				}
				var ws []string
				for _, g := range cfg.Groups() {
					ws = append(ws, fmt.Sprintf("%v %s", cfg.Workers[g].Count, g))
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", name, strings.Join(ws, ", "), cfg.Description)
			}
			return tw.Flush()
		},
	}
}

// Flags shared by the commands that work on a trial directory.
const flagWorkdir = "workdir"

func workdirFlag() cli.Flag {
	return &cli.StringFlag{
		Name: flagWorkdir, EnvVars: []string{"RLCTL_WORKDIR"},
		Usage: "where trial directories go: WORKDIR/EXPERIMENT/TRIAL (default ~/.distrl/trials)",
	}
}

// loadExperiment reads EXPERIMENT|FILE: a path to a YAML file (it has a
// separator or a .yaml/.yml/.json suffix, or names a file that exists),
// else a built-in experiment.
func loadExperiment(arg string) (*experiment.Config, error) {
	ext := filepath.Ext(arg)
	_, statErr := os.Stat(arg)
	if strings.ContainsRune(arg, os.PathSeparator) || slices.Contains([]string{".yaml", ".yml", ".json"}, ext) || statErr == nil {
		return experiment.Load(arg)
	}
	return experiment.Builtin(arg)
}

// experimentName is the experiment name of EXPERIMENT|FILE: a file's
// name field, else the argument itself (a stopped built-in, or one from a
// file since deleted, is still found by name).
func experimentName(arg string) string {
	if cfg, err := loadExperiment(arg); err == nil && cfg.Name != "" {
		return cfg.Name
	}
	return arg
}

// trialDir is the directory of a trial of the experiment named expName.
func trialDir(c *cli.Context, expName, trial string) (controller.TrialDir, error) {
	if err := checkTrialName(trial); err != nil {
		return "", err
	}
	workdir := c.String(flagWorkdir)
	if workdir == "" {
		var err error
		if workdir, err = controller.DefaultWorkdir(); err != nil {
			return "", cli.Exit(err.Error(), 2)
		}
	}
	return controller.NewTrialDir(workdir, expName, trial), nil
}

// trialArgs takes the arguments EXPERIMENT TRIAL of the command named
// command (a usage error otherwise) and returns the trial's directory.
func trialArgs(c *cli.Context, command string, args []string) (controller.TrialDir, error) {
	if len(args) != 2 {
		return "", cli.Exit("usage: rlctl "+command+" EXPERIMENT TRIAL", exitUsage)
	}
	return trialDir(c, experimentName(args[0]), args[1])
}

// checkTrialName refuses trial names that would escape the trial's
// directory or its etcd key space.
func checkTrialName(trial string) error {
	if trial == "" || trial == "." || trial == ".." || strings.ContainsAny(trial, "/\\*? \t\n") {
		return cli.Exit(fmt.Sprintf("trial %q: want a name of letters, digits, '.', '_' and '-'", trial), 2)
	}
	return nil
}

// interspersed lets a command take flags after its positional arguments
// (`rlctl start cartpole-sink t1 --set stop.env_steps=20000`): urfave/cli
// v2 stops parsing flags at the first argument, so action gets the
// positional arguments and the flags after them are set on the context.
func interspersed(action func(c *cli.Context, args []string) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		bools := map[string]bool{}
		known := map[string]string{} // any name -> the flag's first name
		for _, f := range c.Command.Flags {
			_, isBool := f.(*cli.BoolFlag)
			for _, n := range f.Names() {
				known[n] = f.Names()[0]
				bools[n] = isBool
			}
		}
		var args []string
		in := c.Args().Slice()
		for i := 0; i < len(in); i++ {
			a := in[i]
			if a == "--" {
				args = append(args, in[i+1:]...)
				break
			}
			if !strings.HasPrefix(a, "-") || a == "-" {
				args = append(args, a)
				continue
			}
			name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			canonical, ok := known[name]
			if !ok {
				return cli.Exit(fmt.Sprintf("flag provided but not defined: %s", a), 2)
			}
			switch {
			case hasValue:
			case bools[name]:
				value = "true"
			case i+1 < len(in):
				i++
				value = in[i]
			default:
				return cli.Exit(fmt.Sprintf("flag needs an argument: %s", a), 2)
			}
			// By its first name: global() looks the flag up by that name, so
			// an alias (-n) set after the arguments would otherwise be lost.
			if err := c.Set(canonical, value); err != nil {
				return cli.Exit(fmt.Sprintf("%s: %v", a, err), 2)
			}
		}
		return action(c, args)
	}
}

// setList is the value of --set: every occurrence appended, commas kept
// (a YAML flow list holds them: --set start_order=[policy,actor]).
type setList []string

func (s *setList) Set(v string) error { *s = append(*s, v); return nil }
func (s *setList) String() string     { return strings.Join(*s, " ") }
