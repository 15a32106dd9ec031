package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/controller"
	"github.com/distrl/distrl/internal/testsupport/etcdtest"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/paramstream"
	"github.com/urfave/cli/v2"
)

func TestMain(m *testing.M) {
	code := m.Run()
	etcdtest.Stop()
	os.Exit(code)
}

// runApp runs rlctl in-process with args and returns its stdout, its
// exit code and the message main would print on stderr.
func runApp(t *testing.T, args ...string) (stdout string, code int, msg string) {
	t.Helper()
	app := newApp()
	var out bytes.Buffer
	app.Writer = &out
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := app.RunContext(ctx, append([]string{"rlctl"}, args...))
	var exit cli.ExitCoder
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code, msg = exit.ExitCode(), exit.Error()
	default:
		code, msg = 1, err.Error()
	}
	return out.String(), code, msg
}

const versionsExperiment = "rlctl-versions-test"

// versionsFixture keeps red 1..3 and blue 1 in a trial of its own, whose
// directory exists under the workdir it returns.
func versionsFixture(t *testing.T, trialName string) (workdir string, trial names.Trial) {
	t.Helper()
	ctx := context.Background()
	trial = names.NewTrial(versionsExperiment, trialName)
	workdir = t.TempDir()
	if err := os.MkdirAll(filepath.Join(workdir, versionsExperiment, trialName), 0o755); err != nil {
		t.Fatal(err)
	}
	vs := paramstream.NewVersions(etcdtest.Repo(t), trial)
	dir := t.TempDir()
	keep := func(policy string, version int64, n int, tags ...string) {
		t.Helper()
		if _, err := vs.Keep(ctx, policy, version, 7, dir, make([]float32, n), tags...); err != nil {
			t.Fatal(err)
		}
	}
	keep("red", 1, 10, "pool")
	keep("red", 2, 10, "pool")
	keep("red", 3, 10, "pool", "best")
	keep("blue", 1, 4)
	if err := vs.SetMetadata(ctx, "red", 3, map[string]any{"win_rate": 0.75, "note": "vs v2"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r := etcdtest.Repo(t)
		_ = r.ClearSubtree(context.Background(), trial.Prefix())
	})
	return workdir, trial
}

// tableRows splits a versions table into its rows' fields, header checked.
func tableRows(t *testing.T, out string) [][]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if want := []string{"POLICY", "VERSION", "TAGS", "CREATED", "VALUES", "METADATA"}; !slices.Equal(strings.Fields(lines[0]), want) {
		t.Fatalf("header %q, want %v\n%s", lines[0], want, out)
	}
	var rows [][]string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 6 {
			t.Fatalf("row %q: want 6 columns", l)
		}
		if _, err := time.Parse(time.RFC3339, f[3]); err != nil {
			t.Errorf("row %q: CREATED: %v", l, err)
		}
		// The metadata column is the rest of the line.
		rows = append(rows, append(f[:3:3], f[4], strings.Join(f[5:], " ")))
	}
	return rows
}

func TestVersionsCommand(t *testing.T) {
	ep := etcdtest.Endpoint(t)
	workdir, trial := versionsFixture(t, "list")
	emptyWorkdir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(emptyWorkdir, versionsExperiment, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A trial whose controller record names the name server: it is used
	// even where --nameresolve points at nothing.
	recWorkdir, _ := versionsFixture(t, "recorded")
	writeRecord(t, recWorkdir, "recorded", controller.Record{PID: 1, State: controller.StateCompleted, NameResolve: ep})
	goneWorkdir := t.TempDir()
	writeRecord(t, goneWorkdir, "gone", controller.Record{PID: os.Getpid(), State: controller.StateCompleted,
		NameResolve: ep, EmbeddedEtcd: true})
	// A finished run whose embedded etcd is gone, its kept versions saved
	// in the trial directory: they are read from there.
	savedWorkdir, savedTrial := versionsFixture(t, "saved")
	writeRecord(t, savedWorkdir, "saved", controller.Record{PID: os.Getpid(), State: controller.StateCompleted,
		NameResolve: "127.0.0.1:1", EmbeddedEtcd: true})
	saveFixture(t, savedWorkdir, savedTrial)

	global := func(wd string) []string { return []string{"--nameresolve", ep, "--workdir", wd} }
	red3 := []string{"red", "3", "best,pool", "10", `note="vs v2" win_rate=0.75`}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantMsg  string
		wantRows [][]string // the table, when set
		wantOut  string     // in stdout, when set
	}{
		{name: "all policies", args: append(global(workdir), versionsExperiment, "list"),
			wantRows: [][]string{{"blue", "1", "-", "4", "-"}, {"red", "1", "pool", "10", "-"}, {"red", "2", "pool", "10", "-"}, red3}},
		{name: "one policy, flags after the arguments", args: append([]string{versionsExperiment, "list", "red"}, global(workdir)...),
			wantRows: [][]string{{"red", "1", "pool", "10", "-"}, {"red", "2", "pool", "10", "-"}, red3}},
		{name: "policy without versions", args: append(global(workdir), versionsExperiment, "list", "green"),
			wantOut: "trial rlctl-versions-test/list: no kept versions of green\n"},
		{name: "trial without versions", args: append(global(emptyWorkdir), versionsExperiment, "empty"),
			wantOut: "trial rlctl-versions-test/empty: no kept versions\n"},
		{name: "trial without versions, json", args: append(global(emptyWorkdir), versionsExperiment, "empty", "--json"),
			wantOut: "[]\n"},
		{name: "name server of the controller record",
			args:     []string{"--nameresolve", "127.0.0.1:1", "--workdir", recWorkdir, versionsExperiment, "recorded", "red"},
			wantRows: [][]string{{"red", "1", "pool", "10", "-"}, {"red", "2", "pool", "10", "-"}, red3}},
		{name: "unknown trial", args: append(global(emptyWorkdir), versionsExperiment, "nosuch"),
			wantCode: exitFailed, wantMsg: "unknown trial rlctl-versions-test/nosuch"},
		{name: "embedded etcd gone with its controller", args: append(global(goneWorkdir), versionsExperiment, "gone"),
			wantCode: exitFailed, wantMsg: "is gone"},
		{name: "embedded etcd gone, versions saved", args: []string{"--workdir", savedWorkdir, versionsExperiment, "saved", "red"},
			wantRows: [][]string{{"red", "1", "pool", "10", "-"}, {"red", "2", "pool", "10", "-"}, red3}},
		{name: "name server unreachable", args: []string{"--nameresolve", "127.0.0.1:1", "--workdir", workdir, versionsExperiment, "list"},
			wantCode: exitFailed, wantMsg: "rlctl nameserver"},
		{name: "missing trial", args: append(global(workdir), versionsExperiment),
			wantCode: exitUsage, wantMsg: "usage: rlctl versions"},
		{name: "bad trial name", args: append(global(workdir), versionsExperiment, "a/b"),
			wantCode: exitUsage, wantMsg: "trial \"a/b\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, code, msg := runApp(t, append([]string{"versions"}, tc.args...)...)
			if code != tc.wantCode || !strings.Contains(msg, tc.wantMsg) {
				t.Fatalf("exit %d %q, want %d with %q; stdout:\n%s", code, msg, tc.wantCode, tc.wantMsg, out)
			}
			if tc.wantCode != 0 && out != "" {
				t.Errorf("stdout %q on an error", out)
			}
			if tc.wantOut != "" && out != tc.wantOut {
				t.Errorf("stdout %q, want %q", out, tc.wantOut)
			}
			if tc.wantRows != nil {
				if rows := tableRows(t, out); !slices.EqualFunc(rows, tc.wantRows, slices.Equal) {
					t.Errorf("rows %q, want %q\n%s", rows, tc.wantRows, out)
				}
			}
		})
	}

	t.Run("json", func(t *testing.T) {
		out, code, msg := runApp(t, append(append([]string{"versions"}, global(workdir)...), versionsExperiment, "list", "--json")...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, msg)
		}
		var got []paramstream.Version
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		want, err := paramstream.NewVersions(etcdtest.Repo(t), trial).List(context.Background(), "red")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 4 || got[0].Policy != "blue" || got[0].Values != 4 {
			t.Fatalf("got %+v, want blue 1 then red 1 to 3", got)
		}
		for i, w := range want {
			g := got[i+1]
			if g.Policy != w.Policy || g.Version != w.Version || g.Epoch != w.Epoch || g.Path != w.Path ||
				g.Values != w.Values || !g.Created.Equal(w.Created) || !slices.Equal(g.Tags, w.Tags) ||
				len(g.Metadata) != len(w.Metadata) || g.Metadata["win_rate"] != w.Metadata["win_rate"] {
				t.Errorf("version %d: got %+v, want %+v", w.Version, g, w)
			}
		}
		if _, err := os.Stat(got[3].Path); err != nil {
			t.Errorf("the file of red 3: %v", err)
		}
	})
}

// writeRecord writes the controller record of a trial directory.
func writeRecord(t *testing.T, workdir, trialName string, rec controller.Record) {
	t.Helper()
	host, _ := os.Hostname()
	rec.Host, rec.Experiment, rec.Trial = host, versionsExperiment, trialName
	dir := controller.NewTrialDir(workdir, versionsExperiment, trialName)
	if err := os.MkdirAll(string(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir.Path(controller.RecordFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestTagCommand(t *testing.T) {
	ep := etcdtest.Endpoint(t)
	workdir, trial := versionsFixture(t, "tag")
	vs := paramstream.NewVersions(etcdtest.Repo(t), trial)
	global := []string{"--nameresolve", ep, "--workdir", workdir}

	// The cases run in order, each on what the ones before left.
	tests := []struct {
		name     string
		args     []string // after EXPERIMENT TRIAL
		wantCode int
		wantMsg  string
		// Then version check of red carries wantTags and wantMeta (JSON).
		check    int64
		wantTags []string
		wantMeta string
	}{
		{name: "add", args: []string{"red", "2", "best"}, check: 2, wantTags: []string{"best", "pool"}},
		{name: "add two", args: []string{"red", "1", "champion", "eval.v2"}, check: 1, wantTags: []string{"champion", "eval.v2", "pool"}},
		{name: "add again", args: []string{"red", "2", "best"}, check: 2, wantTags: []string{"best", "pool"}},
		{name: "by tag: the newest carrying it", args: []string{"red", "best", "champion"}, check: 3,
			wantTags: []string{"best", "champion", "pool"}, wantMeta: `{"note":"vs v2","win_rate":0.75}`},
		{name: "remove", args: []string{"red", "2", "best", "--remove"}, check: 2, wantTags: []string{"pool"}},
		{name: "remove a tag it does not carry", args: []string{"red", "2", "best", "--remove"}, check: 2, wantTags: []string{"pool"}},
		{name: "metadata", args: []string{"red", "1", "--meta", "games=200", "--meta", "note=hello, world", "--meta", `cfg={"a":[1,2]}`},
			check: 1, wantTags: []string{"champion", "eval.v2", "pool"}, wantMeta: `{"cfg":{"a":[1,2]},"games":200,"note":"hello, world"}`},
		{name: "tag and metadata", args: []string{"red", "1", "seen", "--meta", "games=201"},
			check: 1, wantTags: []string{"champion", "eval.v2", "pool", "seen"}, wantMeta: `{"cfg":{"a":[1,2]},"games":201,"note":"hello, world"}`},

		{name: "version not kept", args: []string{"red", "9", "best"}, wantCode: exitUsage, wantMsg: "policy red has no kept version 9 (it keeps 3 versions, 1 to 3)"},
		{name: "version not kept, remove", args: []string{"red", "9", "best", "--remove"}, wantCode: exitUsage, wantMsg: "no kept version 9"},
		{name: "tag no version carries", args: []string{"red", "nosuch", "best"}, wantCode: exitUsage, wantMsg: `no kept version tagged "nosuch"`},
		{name: "policy without versions", args: []string{"green", "1", "best"}, wantCode: exitUsage, wantMsg: "policy green has no kept versions"},
		{name: "numeric tag", args: []string{"red", "1", "42"}, wantCode: exitUsage, wantMsg: `tag "42"`},
		{name: "tag latest", args: []string{"red", "1", "latest"}, wantCode: exitUsage, wantMsg: `tag "latest"`},
		{name: "tag with a slash", args: []string{"red", "1", "a/b"}, wantCode: exitUsage, wantMsg: `tag "a/b"`},
		{name: "no tag nor metadata", args: []string{"red", "1"}, wantCode: exitUsage, wantMsg: "give a TAG"},
		{name: "remove and metadata", args: []string{"red", "1", "x", "--remove", "--meta", "a=1"}, wantCode: exitUsage, wantMsg: "--remove"},
		{name: "bad metadata", args: []string{"red", "1", "--meta", "novalue"}, wantCode: exitUsage, wantMsg: "want key=value"},
		{name: "bad metadata key", args: []string{"red", "1", "--meta", "a/b=1"}, wantCode: exitUsage, wantMsg: `key "a/b"`},
		{name: "missing arguments", args: []string{"red"}, wantCode: exitUsage, wantMsg: "usage: rlctl tag"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"tag"}, global...), append([]string{versionsExperiment, "tag"}, tc.args...)...)
			out, code, msg := runApp(t, args...)
			if code != tc.wantCode || !strings.Contains(msg, tc.wantMsg) {
				t.Fatalf("exit %d %q, want %d with %q; stdout:\n%s", code, msg, tc.wantCode, tc.wantMsg, out)
			}
			if tc.wantCode != 0 {
				return
			}
			list, err := vs.List(context.Background(), "red")
			if err != nil {
				t.Fatal(err)
			}
			v, err := paramstream.Select(list, fmtInt(tc.check))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(v.Tags, tc.wantTags) {
				t.Errorf("tags of red %d: %v, want %v", tc.check, v.Tags, tc.wantTags)
			}
			if tc.wantMeta != "" {
				if b, _ := json.Marshal(v.Metadata); string(b) != tc.wantMeta {
					t.Errorf("metadata of red %d: %s, want %s", tc.check, b, tc.wantMeta)
				}
			}
			// It prints the version as rlctl versions does.
			rows := tableRows(t, out)
			if len(rows) != 1 || rows[0][0] != "red" || rows[0][1] != fmtInt(tc.check) || rows[0][2] != strings.Join(tc.wantTags, ",") {
				t.Errorf("printed %q, want the row of red %d", rows, tc.check)
			}
		})
	}

	t.Run("unknown trial", func(t *testing.T) {
		_, code, msg := runApp(t, append(append([]string{"tag"}, global...), versionsExperiment, "nosuch", "red", "1", "best")...)
		if code != exitFailed || !strings.Contains(msg, "unknown trial rlctl-versions-test/nosuch") {
			t.Errorf("exit %d %q, want %d: unknown trial", code, msg, exitFailed)
		}
	})
	t.Run("name server unreachable", func(t *testing.T) {
		_, code, msg := runApp(t, "tag", "--nameresolve", "127.0.0.1:1", "--workdir", workdir, versionsExperiment, "tag", "red", "1", "best")
		if code != exitFailed || !strings.Contains(msg, "rlctl nameserver") {
			t.Errorf("exit %d %q, want %d: unreachable", code, msg, exitFailed)
		}
	})
}

func fmtInt(n int64) string { return strconv.FormatInt(n, 10) }

// saveFixture writes the trial's kept versions' records to its directory
// as a run's end does (controller.VersionsFile).
func saveFixture(t *testing.T, workdir string, trial names.Trial) {
	t.Helper()
	entries, err := etcdtest.Repo(t).Find(context.Background(), trial.VersionsPrefix())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	dir := controller.NewTrialDir(workdir, trial.Experiment, trial.Trial)
	if err := os.WriteFile(dir.Path(controller.VersionsFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A finished run's saved versions are listed, not changed.
func TestTagRefusedOnSavedVersions(t *testing.T) {
	workdir, trial := versionsFixture(t, "saved-tag")
	writeRecord(t, workdir, "saved-tag", controller.Record{PID: os.Getpid(), State: controller.StateCompleted,
		NameResolve: "127.0.0.1:1", EmbeddedEtcd: true})
	saveFixture(t, workdir, trial)
	_, code, msg := runApp(t, "tag", "--workdir", workdir, versionsExperiment, "saved-tag", "red", "2", "best")
	if code != exitFailed || !strings.Contains(msg, "no live name server") {
		t.Errorf("tag on saved versions: exit %d %q", code, msg)
	}
}
