package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/etcd"
	"github.com/distrl/distrl/nameresolve/etcdserver"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/worker/panel"
)

// openNameResolve connects to the configured etcd, or runs an embedded one
// when none answers.
func (c *Controller) openNameResolve(ctx context.Context) error {
	if c.opts.RemoteWorkers {
		return c.openRemoteNameResolve(ctx)
	}
	if len(c.opts.NameResolve) > 0 && anyAnswers(ctx, c.opts.NameResolve) {
		repo, err := etcd.Open(ctx, c.nameResolveConfig())
		if err == nil {
			c.repo, c.endpoint = repo, strings.Join(c.opts.NameResolve, ",")
			c.out.event("name resolve: etcd at %s", c.endpoint)
			c.record.NameResolve = c.endpoint
			return nil
		}
		// Given TLS or credentials, the user meant this etcd: its refusal
		// fails the start, where an embedded etcd would hide it.
		if c.opts.NameResolveSecurity != (etcd.Security{}) && refused(err) {
			return fmt.Errorf("%w: %w", ErrNameResolve, err)
		}
		c.log.Warn("the name server answers but not as etcd: running an embedded etcd", "endpoints", c.opts.NameResolve, "err", err)
	}
	// The embedded etcd lives as long as this run: its data from an
	// earlier run of the trial is of no use.
	dir := c.dir.Path(EtcdDir)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("controller: embedded etcd: %w", err)
	}
	etcdLog := slog.New(quietable{Handler: c.log.Handler(), quiet: &c.etcdQuiet})
	srv, err := etcdserver.Start(ctx, etcdserver.Config{Dir: dir, ClientAddr: net.JoinHostPort(c.opts.Host, "0"), Logger: etcdLog, NoFsync: true})
	if err != nil {
		return fmt.Errorf("controller: embedded etcd: %w", err)
	}
	c.etcd = srv
	repo, err := etcd.Open(ctx, etcd.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: etcdDialTimeout, Logger: c.log})
	if err != nil {
		return fmt.Errorf("controller: embedded etcd: %w", err)
	}
	c.repo, c.endpoint = repo, srv.Endpoint()
	c.record.NameResolve, c.record.EmbeddedEtcd = c.endpoint, true
	c.out.event("name resolve: embedded etcd at %s (none answered at %s)", c.endpoint, strings.Join(c.opts.NameResolve, ","))
	c.writeRecord()
	return nil
}

// openRemoteNameResolve connects to the etcd of NameResolve, which workers
// on other machines must reach: loopback is refused, and nothing is embedded.
func (c *Controller) openRemoteNameResolve(ctx context.Context) error {
	if err := CheckRemoteNameResolve(c.opts.NameResolve); err != nil {
		return err
	}
	if !anyAnswers(ctx, c.opts.NameResolve) {
		return fmt.Errorf("%w: nothing answers at %s (start one with `rlctl nameserver --listen ADDR` on a host the nodes reach)",
			ErrNameResolve, strings.Join(c.opts.NameResolve, ","))
	}
	repo, err := etcd.Open(ctx, c.nameResolveConfig())
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNameResolve, err)
	}
	c.repo, c.endpoint = repo, strings.Join(c.opts.NameResolve, ",")
	c.out.event("name resolve: etcd at %s", c.endpoint)
	c.record.NameResolve = c.endpoint
	return nil
}

// nameResolveConfig is the client configuration of the etcd of NameResolve.
func (c *Controller) nameResolveConfig() etcd.Config {
	return etcd.Config{Endpoints: c.opts.NameResolve, DialTimeout: etcdDialTimeout, Logger: c.log, Security: c.opts.NameResolveSecurity}
}

// refused reports whether etcd answered but refused this client: settings
// that cannot be used, a failed TLS handshake, refused credentials.
func refused(err error) bool {
	var se *etcd.SecurityError
	return errors.As(err, &se) || errors.Is(err, etcd.ErrTLS) || errors.Is(err, etcd.ErrAuth)
}

// nameResolveArgs are the worker flags for the TLS and authentication of
// the name server, and the environment that carries the password: a
// command line would show it in ps and in SLURM's scripts. The embedded
// etcd is plaintext and needs neither.
func (c *Controller) nameResolveArgs() (args, env []string) {
	if c.etcd != nil {
		return nil, nil
	}
	s := c.opts.NameResolveSecurity
	for _, f := range []struct{ flag, value string }{
		{"--nameresolve-cacert", s.CACert}, {"--nameresolve-cert", s.Cert}, {"--nameresolve-key", s.Key},
	} {
		if f.value != "" {
			args = append(args, f.flag, f.value)
		}
	}
	if s.InsecureSkipTLSVerify {
		args = append(args, "--nameresolve-insecure-skip-tls-verify")
	}
	// Credentials was checked when the repository opened (or, for a dry
	// run, by rlctl): an error here leaves the user out.
	if user, password, err := s.Credentials(); err == nil && user != "" {
		args = append(args, "--nameresolve-user", user)
		env = append(env, EnvNameResolvePassword+"="+password)
	}
	return args, env
}

// CheckRemoteNameResolve refuses endpoints that workers on other machines
// cannot reach: none, or a loopback address or name.
func CheckRemoteNameResolve(endpoints []string) error {
	if len(endpoints) == 0 {
		return fmt.Errorf("%w: no etcd endpoint given", ErrNameResolve)
	}
	for _, ep := range endpoints {
		host := ep
		if i := strings.Index(host, "://"); i >= 0 {
			host = host[i+3:]
		}
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" || host == "" {
			return fmt.Errorf("%w: %s is a loopback address, which workers on other nodes cannot reach "+
				"(run `rlctl nameserver --listen ADDR:2379` on a host the nodes reach, and give --nameresolve ADDR:2379)", ErrNameResolve, ep)
		}
	}
	return nil
}

// anyAnswers reports whether some endpoint accepts a TCP connection: a
// quick check before etcd.Open, which would take its full dial timeout to
// fail on a port nobody listens on.
func anyAnswers(ctx context.Context, endpoints []string) bool {
	d := net.Dialer{Timeout: probeTimeout}
	for _, ep := range endpoints {
		hostport := ep
		if i := strings.Index(ep, "://"); i >= 0 {
			hostport = ep[i+3:]
		}
		if conn, err := d.DialContext(ctx, "tcp", hostport); err == nil {
			conn.Close()
			return true
		}
	}
	return false
}

// clearStaleRecords refuses a trial whose workers are alive and clears the
// records a dead run left behind.
func (c *Controller) clearStaleRecords(ctx context.Context) error {
	c.panel = panel.New(c.repo, c.trial, c.panelOptions())
	ctx, cancel := context.WithTimeout(ctx, shutdownTimeout)
	defer cancel()
	ws, err := c.panel.Workers(ctx)
	if err != nil {
		return fmt.Errorf("controller: read the trial's records: %w", err)
	}
	var alive []string
	for _, w := range ws {
		if w.Address != "" {
			alive = append(alive, w.Name)
		}
	}
	if len(alive) > 0 {
		return &WorkersAliveError{Prefix: c.trial.Prefix(), Workers: alive}
	}
	if err := ClearRecords(ctx, c.repo, c.trial); err != nil {
		return fmt.Errorf("controller: clear the records of an earlier run: %w", err)
	}
	c.owner = true
	if n, err := restoreVersions(ctx, c.repo, c.trial, c.dir.Path(VersionsFile)); err != nil {
		c.log.Warn("the kept versions of an earlier run were not restored", "file", c.dir.Path(VersionsFile), "err", err)
	} else if n > 0 {
		c.out.event("restored %d records of kept versions from %s", n, c.dir.Path(VersionsFile))
	}
	return nil
}

// saveVersions writes the trial's kept versions' records to path (none:
// no file), for a later run on a fresh name server.
func saveVersions(ctx context.Context, repo nameresolve.Repository, trial names.Trial, path string) error {
	entries, err := repo.Find(ctx, trial.VersionsPrefix())
	if err != nil || len(entries) == 0 {
		return err
	}
	b, err := json.MarshalIndent(entries, "", " ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// LoadSavedVersions reads the records a run saved in its trial
// directory's VersionsFile (an error wrapping os.ErrNotExist if there is
// none).
func LoadSavedVersions(path string) ([]nameresolve.Entry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var entries []nameresolve.Entry
	if err := json.Unmarshal(b, &entries); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return entries, nil
}

// restoreVersions puts the records of path back where the name server has
// no kept versions of the trial (a fresh embedded etcd); a name server
// that kept them is left as it is. It returns how many it restored.
func restoreVersions(ctx context.Context, repo nameresolve.Repository, trial names.Trial, path string) (int, error) {
	entries, err := LoadSavedVersions(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	have, err := repo.Find(ctx, trial.VersionsPrefix())
	if err != nil || len(have) > 0 {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Key, trial.VersionsPrefix()) {
			continue // another trial's file copied here: not ours to write
		}
		if err := repo.Add(ctx, e.Key, e.Value, nameresolve.AddOptions{Replace: true}); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func (c *Controller) panelOptions() panel.Options {
	opts := panel.Options{HungAfter: c.opts.HungAfter}
	if c.opts.Curve != nil {
		opts.Curve = c.opts.Curve.ClientKeys()
	}
	return opts
}
