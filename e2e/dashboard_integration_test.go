package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
	"golang.org/x/net/html"
)

// chromiumBin is Debian's headless browser; the dashboard tests skip
// without it.
const chromiumBin = "/usr/bin/chromium"

// dashboardURL reads the line `rlctl start --dashboard` prints once it
// listens. (prometheus_integration_test.go reads it as dashboardLine.)
var dashboardURL = regexp.MustCompile(`dashboard (http://\S+)`)

// browser runs headless Chromium against a dashboard, each run with a
// profile of its own.
type browser struct {
	t         *testing.T
	artifacts string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	if _, err := os.Stat(chromiumBin); err != nil {
		t.Skipf("no headless browser: %s is missing (Debian's chromium package; make deps installs it)", chromiumBin)
	}
	dir := os.Getenv("DISTRL_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else {
		dir = filepath.Join(dir, t.Name())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return &browser{t: t, artifacts: dir}
}

// run runs Chromium on url with the page given 4 s of virtual time (the
// page polls every second) and returns its stdout.
func (b *browser) run(url string, args ...string) []byte {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + b.t.TempDir(), "--window-size=1400,1000", "--virtual-time-budget=4000"}, args...)
	cmd := exec.CommandContext(ctx, chromiumBin, append(all, url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		b.t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

// page is what a test reads of the dashboard's DOM after its scripts ran.
type page struct {
	states   map[string]string // data-worker -> the text of its state cell
	restarts map[string]string // data-worker -> its restarts cell
	charts   map[string]string // chart id -> its line's points ("" for none)
	png      []byte            // the screenshot of the same moment, if asked for
}

// look loads the page and reads its DOM; with shot, it saves a screenshot
// of the same moment as shot (a PNG among the test's artifacts).
func (b *browser) look(url, shot string) page {
	b.t.Helper()
	args := []string{"--dump-dom"}
	path := filepath.Join(b.artifacts, shot)
	if shot != "" {
		args = append(args, "--screenshot="+path)
	}
	doc, err := html.Parse(bytes.NewReader(b.run(url, args...)))
	if err != nil {
		b.t.Fatal(err)
	}
	p := page{states: map[string]string{}, restarts: map[string]string{}, charts: map[string]string{}}
	if shot != "" {
		if p.png, err = os.ReadFile(path); err != nil || !bytes.HasPrefix(p.png, []byte("\x89PNG")) {
			b.t.Fatalf("screenshot %s: %v (%d bytes)", path, err, len(p.png))
		}
	}
	var walk func(n *html.Node, table, chart string)
	walk = func(n *html.Node, table, chart string) {
		if n.Type == html.ElementNode {
			switch {
			case n.Data == "table":
				table = attr(n, "id")
			case n.Data == "svg":
				chart = attr(n, "id")
				p.charts[chart] = ""
			case n.Data == "tr" && table == "workers" && attr(n, "data-worker") != "":
				p.row(n)
			case n.Data == "polyline" && chart != "":
				p.charts[chart] = attr(n, "points")
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, table, chart)
		}
	}
	walk(doc, "", "")
	return p
}

// row reads a row of the workers table: its state cell and the restarts
// cell after it.
func (p *page) row(tr *html.Node) {
	var cells []*html.Node
	for c := tr.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && c.Data == "td" {
			cells = append(cells, c)
		}
	}
	name := attr(tr, "data-worker")
	for i, c := range cells {
		if attr(c, "class") == "state" {
			p.states[name] = text(c)
			if i+1 < len(cells) {
				p.restarts[name] = text(cells[i+1])
			}
		}
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.TrimSpace(b.String())
}

// startWithDashboard starts a cartpole-sink trial serving its dashboard
// at listen and returns the process, the URL it printed and the trial
// directory. The trial runs on wall time (the experiment's env step limit
// lifted) until the test interrupts it.
func startWithDashboard(t *testing.T, listen string) (*proc, string, string) {
	t.Helper()
	c := newCluster(t)
	work := t.TempDir()
	// --hung-after 1s under a 10 s lease: a stopped actor is HUNG for
	// seconds before it could be LOST (as TestHungActorReplaced).
	p := start(t, "rlctl-start", []string{"RLCTL_NAMERESOLVE=" + c.endpoint}, "start", "cartpole-sink", c.trial.Trial,
		"--workdir", work, "--dashboard", listen, "--hung-after", "1s", "--worker-ttl", "10s",
		"--set", "stop.wall_time=90s", "--set", "stop.env_steps=0")
	u := waitOutput(t, p, dashboardURL, 30*time.Second)[1]
	waitOutput(t, p, regexp.MustCompile(`all 5 workers running`), 30*time.Second)
	return p, u, filepath.Join(work, "cartpole-sink", c.trial.Trial)
}

// interrupt stops the trial as Ctrl-C does and checks it ended so.
func interrupt(t *testing.T, p *proc) {
	t.Helper()
	p.signal(t, syscall.SIGINT)
	if code := p.wait(t, 2*time.Minute); code != 130 {
		t.Errorf("rlctl start exited with %d after SIGINT, want 130", code)
	}
}

// The dashboard of a live trial in a real browser: the workers table lists
// every worker RUNNING, the steps/s curve changes between two looks, and
// an actor whose loop is stuck (SIGSTOP) shows as HUNG, then restarted.
func TestDashboardLiveTrial(t *testing.T) {
	b := newBrowser(t)
	p, u, dir := startWithDashboard(t, "127.0.0.1:0")
	if strings.Contains(u, "token=") {
		t.Errorf("a loopback dashboard asks for a token: %s", u)
	}
	workers := []string{"actor/0", "actor/1", "policy/0", "policy/1", "sink/0"}
	var first page
	eventually.NoError(t, 60*time.Second, "the page lists every worker RUNNING and a curve", func() error {
		first = b.look(u, "dashboard-1.png")
		for _, w := range workers {
			if first.states[w] != "RUNNING" {
				return fmt.Errorf("states %v", first.states)
			}
		}
		if first.charts["chart-rate"] == "" {
			return fmt.Errorf("no steps/s curve yet: %v", first.charts)
		}
		return nil
	})
	if got := slices.Sorted(maps.Keys(first.states)); !slices.Equal(got, workers) {
		t.Errorf("workers table %v, want %v", got, workers)
	}
	var second page
	eventually.NoError(t, 60*time.Second, "the curves to change", func() error {
		second = b.look(u, "dashboard-2.png")
		if second.charts["chart-rate"] == first.charts["chart-rate"] || second.charts["chart-return"] == first.charts["chart-return"] {
			return fmt.Errorf("the curves are as they were: %q", second.charts["chart-rate"])
		}
		return nil
	})
	if bytes.Equal(first.png, second.png) {
		t.Error("the two screenshots are the same")
	}

	pid := readRecord(t, dir).Workers["actor/0"]
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGCONT)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	})
	eventually.NoError(t, 60*time.Second, "actor/0 shows as HUNG", func() error {
		if st := b.look(u, "dashboard-hung.png").states["actor/0"]; st != "HUNG" {
			return fmt.Errorf("actor/0 is %q", st)
		}
		return nil
	})
	for _, shot := range []string{"dashboard-1.png", "dashboard-2.png", "dashboard-hung.png"} {
		t.Logf("screenshot: %s", filepath.Join(b.artifacts, shot))
	}
	// The controller replaces it; the page counts the restart.
	eventually.NoError(t, 90*time.Second, "actor/0 RUNNING again after 1 restart", func() error {
		if now := b.look(u, ""); now.states["actor/0"] != "RUNNING" || now.restarts["actor/0"] != "1" {
			return fmt.Errorf("actor/0 is %q with %q restarts", now.states["actor/0"], now.restarts["actor/0"])
		}
		return nil
	})
	interrupt(t, p)
}

// A dashboard bound beyond loopback prints a URL with a token, refuses a
// request without it and serves one with it; the page, opened at that
// URL, passes it on to its API calls.
func TestDashboardTokenOffLoopback(t *testing.T) {
	host := worker.RoutableHost()
	if ip := net.ParseIP(host); ip == nil || ip.IsLoopback() {
		t.Skipf("this machine has no non-loopback address (RoutableHost: %s)", host)
	}
	b := newBrowser(t)
	p, u, _ := startWithDashboard(t, net.JoinHostPort(host, "0"))
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	token := parsed.Query().Get("token")
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(token) || parsed.Hostname() != host {
		t.Fatalf("dashboard URL %s: want http://%s:PORT/?token=<128 bits in hex>", u, host)
	}
	api := "http://" + parsed.Host + "/api/trial"
	for _, c := range []struct {
		url, bearer string
		want        int
	}{
		{api, "", http.StatusUnauthorized},
		{api, "0123456789abcdef0123456789abcdef", http.StatusUnauthorized},
		{"http://" + parsed.Host + "/", "", http.StatusUnauthorized},
		{"http://" + parsed.Host + "/sd", "", http.StatusUnauthorized},
		{api, token, http.StatusOK},
		{api + "?token=" + token, "", http.StatusOK},
	} {
		code, body := httpStatus(t, c.url, c.bearer)
		if code != c.want {
			t.Errorf("GET %s (bearer %q): %d %s, want %d", c.url, c.bearer, code, body, c.want)
		}
	}
	// /sd lists the worker processes (an actor's hosts its policy worker:
	// 3) and the dashboard itself.
	_, body := httpStatus(t, "http://"+parsed.Host+"/sd", token)
	var groups []struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	if err := json.Unmarshal([]byte(body), &groups); err != nil || len(groups) != 4 ||
		groups[3].Labels["process"] != "ctl" || groups[3].Targets[0] != parsed.Host {
		t.Errorf("sd: %v %s", err, body)
	}
	eventually.NoError(t, 60*time.Second, "the page with the token lists the workers", func() error {
		if st := b.look(u, "dashboard-token.png").states; st["actor/0"] != "RUNNING" || len(st) != 5 {
			return fmt.Errorf("states %v", st)
		}
		return nil
	})
	t.Logf("screenshot: %s", filepath.Join(b.artifacts, "dashboard-token.png"))
	interrupt(t, p)
}

func httpStatus(t *testing.T, u, bearer string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxFor(t, 10*time.Second), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, strings.TrimSpace(buf.String())
}

// With the default bounds (a HUNG verdict after 30 s, far beyond the
// address lease) a SIGSTOPped process loses its lease first: `rlctl
// dashboard` shows its worker LOST. The workers are started by hand, so
// no controller replaces it and it stays LOST while its status record
// lives.
func TestDashboardShowsLost(t *testing.T) {
	b := newBrowser(t)
	c := newCluster(t)
	leases := []string{"--ttl", "2s", "--status-ttl", "5m"}
	stopped := c.worker("echo", 0, leases...)
	c.worker("echo", 1, leases...)
	ctx := ctxFor(t, 2*time.Minute)
	cp := c.panel()
	eventually.NoError(t, 30*time.Second, "both workers registered", func() error {
		names, err := cp.AutoConnect(ctx)
		if err == nil && len(names) != 2 {
			err = fmt.Errorf("registered: %v", names)
		}
		return err
	})
	for _, cmd := range []string{member.CmdConfigure, member.CmdStart} {
		for _, r := range cp.GroupRequest(ctx, []string{"echo/0", "echo/1"}, cmd, nil) {
			if r.Err != nil {
				t.Fatalf("%s %s: %v", cmd, r.Worker, r.Err)
			}
		}
	}
	d := start(t, "rlctl-dashboard", c.env, "dashboard", c.trial.Experiment, c.trial.Trial,
		"--listen", "127.0.0.1:0", "--workdir", t.TempDir())
	u := waitOutput(t, d, dashboardURL, 30*time.Second)[1]
	eventually.NoError(t, 60*time.Second, "both RUNNING on the page", func() error {
		if st := b.look(u, "").states; st["echo/0"] != "RUNNING" || st["echo/1"] != "RUNNING" {
			return fmt.Errorf("states %v", st)
		}
		return nil
	})
	pid := stopped.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	eventually.NoError(t, 60*time.Second, "echo/0 shows as LOST", func() error {
		st := b.look(u, "dashboard-lost.png").states
		if st["echo/0"] != "LOST" || st["echo/1"] != "RUNNING" {
			return fmt.Errorf("states %v", st)
		}
		return nil
	})
	t.Logf("screenshot: %s", filepath.Join(b.artifacts, "dashboard-lost.png"))
}
