package controller

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/distrl/distrl/experiment"
	"github.com/distrl/distrl/nameresolve/etcd"
	"github.com/distrl/distrl/nameresolve/etcdserver"
	"github.com/distrl/distrl/nameresolve/names"
)

// TestWorkersInheritNameResolveSecurity: workers get the name server's TLS
// and user as flags and the password only in their environment, never in
// their arguments or SLURM scripts; with an embedded etcd they get none.
func TestWorkersInheritNameResolveSecurity(t *testing.T) {
	cfg, err := experiment.Builtin("echo-64")
	if err != nil {
		t.Fatal(err)
	}
	const password = "pw:with colon"
	sec := etcd.Security{CACert: "/pki/ca.pem", Cert: "/pki/c.pem", Key: "/pki/k.pem", InsecureSkipTLSVerify: true, User: "distrl:" + password}
	opts := Options{Config: cfg, Trial: "t1", Dir: TrialDir(t.TempDir()), NameResolve: []string{"https://10.0.0.1:2379"},
		NameResolveSecurity: sec, RemoteWorkers: true}
	trial := names.NewTrial(cfg.Name, "t1")
	groups := PlanGroups(opts)
	if len(groups) == 0 {
		t.Fatal("no groups")
	}
	for _, specs := range groups {
		for _, spec := range specs {
			args := strings.Join(spec.Args, " ")
			for _, want := range []string{"--nameresolve https://10.0.0.1:2379", "--nameresolve-cacert /pki/ca.pem",
				"--nameresolve-cert /pki/c.pem", "--nameresolve-key /pki/k.pem", "--nameresolve-insecure-skip-tls-verify",
				"--nameresolve-user distrl "} {
				if !strings.Contains(args+" ", want) {
					t.Errorf("%s: args %q lack %q", spec.Name, args, want)
				}
			}
			if !slices.Equal(spec.Env, []string{EnvNameResolvePassword + "=" + password}) {
				t.Errorf("%s: env %q; want the password there", spec.Name, spec.Env)
			}
			if strings.Contains(args, password) {
				t.Errorf("%s: the password is on the command line: %s", spec.Name, args)
			}
		}
	}

	// The embedded etcd is plaintext: workers of a controller running one get no settings.
	c := &Controller{opts: opts, trial: trial, etcd: &etcdserver.Server{}}
	if args, env := c.nameResolveArgs(); args != nil || env != nil {
		t.Errorf("with an embedded etcd: args %q env %q; want none", args, env)
	}
}

func TestCheckRemoteNameResolve(t *testing.T) {
	for _, tt := range []struct {
		eps []string
		ok  bool
	}{
		{nil, false},
		{[]string{"127.0.0.1:2379"}, false},
		{[]string{"10.1.2.3:2379", "http://127.0.0.5:2379"}, false},
		{[]string{"localhost:2379"}, false},
		{[]string{"[::1]:2379"}, false},
		{[]string{"10.1.2.3:2379"}, true},
		{[]string{"http://head-node:2379", "10.1.2.4:2379"}, true},
	} {
		err := CheckRemoteNameResolve(tt.eps)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrNameResolve)) {
			t.Errorf("CheckRemoteNameResolve(%q) = %v, want ok=%v", tt.eps, err, tt.ok)
		}
	}
}
