package e2e

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/etcdtest"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/pytest"
	"github.com/distrl/distrl/internal/testsupport/slurmtest"
	"github.com/distrl/distrl/nameresolve/names"
)

// secureEnv is the environment that points rlctl at srv, with settings
// changed by set ("" deletes a variable).
func secureEnv(base map[string]string, set map[string]string) []string {
	m := maps.Clone(base)
	for k, v := range set {
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	var env []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		env = append(env, k+"="+m[k])
	}
	return env
}

// TestSecureNameServer runs workers, `rlctl ls`, `rlctl request` and a
// whole `rlctl start` against an etcd with TLS and authentication, as a
// shared one: rlctl works with the right settings, refuses the wrong ones
// with one line and exit code 2, and the workers the controller starts
// inherit the settings, the password outside their command lines.
func TestSecureNameServer(t *testing.T) {
	srv := etcdtest.StartSecure(t, etcdtest.Secure{TLS: true, Auth: true})
	pki := srv.PKI
	trial := names.NewTrial("e2e-secure", "t1")
	base := map[string]string{
		"RLCTL_NAMERESOLVE": srv.Endpoint(), "RLCTL_EXPERIMENT": trial.Experiment, "RLCTL_TRIAL": trial.Trial,
		"RLCTL_NAMERESOLVE_CACERT": pki.CA, "RLCTL_NAMERESOLVE_USER": etcdtest.User,
		"RLCTL_NAMERESOLVE_PASSWORD": etcdtest.Password,
	}
	c := &cluster{t: t, endpoint: srv.Endpoint(), trial: trial, env: secureEnv(base, nil)}
	c.worker("echo", 0)
	c.waitRegistered("echo/0")

	t.Run("ls and request", func(t *testing.T) {
		if out, errOut, code := c.rlctl("ls"); code != 0 || !strings.Contains(out, "echo/0") {
			t.Fatalf("rlctl ls: exit %d\n%s%s", code, out, errOut)
		}
		if out, errOut, code := c.rlctl("request", "echo/0", "echo", "msg=over-tls"); code != 0 || !strings.Contains(out, "over-tls") {
			t.Fatalf("rlctl request: exit %d\n%s%s", code, out, errOut)
		}
	})

	t.Run("python client", func(t *testing.T) {
		py := pytest.Python(t)
		pkg, err := filepath.Abs(filepath.Join("..", "python"))
		if err != nil {
			t.Fatal(err)
		}
		const script = `
from distrl.client import Trial
t = Trial("e2e-secure", "t1")
print(" ".join(t.workers()), t.request("echo/0", "ping"))
`
		for _, set := range []map[string]string{nil, {"RLCTL_NAMERESOLVE_PASSWORD": "wrong"}} {
			cmd := exec.Command(py, "-c", script)
			cmd.Env = append(secureEnv(base, set), "PYTHONPATH="+pkg, "PYTHONDONTWRITEBYTECODE=1", "PATH="+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			if set == nil && (err != nil || strings.TrimSpace(string(out)) != "echo/0 pong") {
				t.Errorf("python client: %v\n%s", err, out)
			}
			if set != nil && (err == nil || !strings.Contains(string(out), "authentication failed")) {
				t.Errorf("python client with a wrong password: %v\n%s", err, out)
			}
		}
	})

	missing := filepath.Join(t.TempDir(), "missing.pem")
	cases := []struct {
		name string
		set  map[string]string
		code int
		want string // in stderr (exit != 0) or stdout
	}{
		{"password in the user flag", map[string]string{"RLCTL_NAMERESOLVE_PASSWORD": "",
			"RLCTL_NAMERESOLVE_USER": etcdtest.User + ":" + etcdtest.Password}, 0, "echo/0"},
		{"skip verification", map[string]string{"RLCTL_NAMERESOLVE_CACERT": "",
			"RLCTL_NAMERESOLVE_INSECURE_SKIP_TLS_VERIFY": "true"}, 0, "echo/0"},
		{"wrong password", map[string]string{"RLCTL_NAMERESOLVE_PASSWORD": "wrong"}, 2, "authentication failed"},
		{"no user", map[string]string{"RLCTL_NAMERESOLVE_USER": "", "RLCTL_NAMERESOLVE_PASSWORD": ""}, 2, "authentication failed"},
		{"no CA", map[string]string{"RLCTL_NAMERESOLVE_CACERT": ""}, 2, "failed the TLS handshake"},
		{"another CA", map[string]string{"RLCTL_NAMERESOLVE_CACERT": pki.OtherCA}, 2, "unknown authority"},
		{"missing CA file", map[string]string{"RLCTL_NAMERESOLVE_CACERT": missing}, 2, "--nameresolve-cacert " + missing + ":"},
		{"key of another cert", map[string]string{"RLCTL_NAMERESOLVE_CERT": pki.ClientCert,
			"RLCTL_NAMERESOLVE_KEY": pki.ServerKey}, 2, "--nameresolve-key " + pki.ServerKey + ":"},
		{"user without password", map[string]string{"RLCTL_NAMERESOLVE_PASSWORD": ""}, 2, "--nameresolve-password:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, code := runRlctl(t, secureEnv(base, tc.set), "ls")
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Fatalf("rlctl ls: exit %d, want %d with %q:\n%s", code, tc.code, tc.want, out)
			}
			if code != 0 && strings.Count(strings.TrimSpace(out), "\n") != 0 {
				t.Errorf("not one line:\n%s", out)
			}
		})
	}

	t.Run("start refuses wrong credentials", func(t *testing.T) {
		// No fallback to an embedded etcd: the user meant this one.
		out, code := runRlctl(t, secureEnv(base, map[string]string{"RLCTL_NAMERESOLVE_PASSWORD": "wrong"}),
			"start", "echo-64", "refused", "--workdir", t.TempDir(), "--set", "workers.echo.count=1")
		if code != 2 || !strings.Contains(out, "authentication failed") || strings.Contains(out, "embedded etcd") {
			t.Fatalf("rlctl start: exit %d, want 2 (authentication failed):\n%s", code, out)
		}
	})

	t.Run("start passes the settings on", func(t *testing.T) {
		work := t.TempDir()
		// The password on rlctl's command line: the workers must get it some other way.
		env := secureEnv(base, map[string]string{"RLCTL_NAMERESOLVE_USER": "", "RLCTL_NAMERESOLVE_PASSWORD": ""})
		p := start(t, "rlctl-start", env, "start", "echo-64", "t2", "--workdir", work,
			"--nameresolve-user", etcdtest.User+":"+etcdtest.Password,
			"--set", "workers.echo.count=2", "--set", "stop.wall_time=8s")
		dir := filepath.Join(work, "echo-64", "t2")
		var pids map[string]int
		eventually.NoError(t, 30*time.Second, "workers running", func() error {
			out := readFile(t, p.log)
			if !strings.Contains(out, "all 2 workers running") {
				return fmt.Errorf("output so far:\n%s", out)
			}
			pids = readRecord(t, dir).Workers
			return nil
		})
		for name, pid := range pids {
			cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			args := string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
			if strings.Contains(args, etcdtest.Password) || !strings.Contains(args, "--nameresolve-user "+etcdtest.User+" ") ||
				!strings.Contains(args, "--nameresolve-cacert "+pki.CA) {
				t.Errorf("%s runs %q: want the user and CA there, not the password", name, args)
			}
			if !bytes.Contains(environ, []byte("RLCTL_NAMERESOLVE_PASSWORD="+etcdtest.Password+"\x00")) {
				t.Errorf("%s: the password is not in its environment", name)
			}
		}
		// rlctl status reads the workers from the secured etcd with the same settings.
		if out, code := runRlctl(t, secureEnv(base, nil), "status", "echo-64", "t2", "--workdir", work); code != 0 ||
			!strings.Contains(out, "echo/1") || strings.Contains(out, "name resolve:") {
			t.Errorf("rlctl status: exit %d:\n%s", code, out)
		}
		if code := p.wait(t, 60*time.Second); code != 0 {
			t.Fatalf("rlctl start exited with %d:\n%s", code, readFile(t, p.log))
		}
		out := readFile(t, p.log)
		if !strings.Contains(out, "name resolve: etcd at "+srv.Endpoint()) || strings.Contains(out, "embedded etcd") {
			t.Errorf("the trial did not use the secured etcd:\n%s", out)
		}
		if rec := readRecord(t, dir); rec.State != "completed" {
			t.Errorf("trial %s: %s", rec.State, rec.Message)
		}
	})
}

// TestClientCertNameServer: with --client-cert-auth and authentication on,
// a client certificate alone authenticates (etcd takes its common name as
// the user); without one, the TLS handshake fails.
func TestClientCertNameServer(t *testing.T) {
	srv := etcdtest.StartSecure(t, etcdtest.Secure{ClientCertAuth: true, Auth: true})
	pki := srv.PKI
	trial := names.NewTrial("e2e-certs", "t1")
	base := map[string]string{
		"RLCTL_NAMERESOLVE": srv.Endpoint(), "RLCTL_EXPERIMENT": trial.Experiment, "RLCTL_TRIAL": trial.Trial,
		"RLCTL_NAMERESOLVE_CACERT": pki.CA, "RLCTL_NAMERESOLVE_CERT": pki.ClientCert, "RLCTL_NAMERESOLVE_KEY": pki.ClientKey,
	}
	c := &cluster{t: t, endpoint: srv.Endpoint(), trial: trial, env: secureEnv(base, nil)}
	c.worker("echo", 0)
	c.waitRegistered("echo/0")
	out, code := runRlctl(t, secureEnv(base, map[string]string{"RLCTL_NAMERESOLVE_CERT": "", "RLCTL_NAMERESOLVE_KEY": ""}), "ls")
	if code != 2 || !strings.Contains(out, "certificate required") {
		t.Fatalf("rlctl ls without a client certificate: exit %d, want 2 (certificate required):\n%s", code, out)
	}
}

// TestSlurmSecureNameServer: a trial on the 3-node SLURM cluster against an
// etcd with TLS and authentication: the sbatch jobs inherit the settings
// (the password given only on rlctl's command line reaches them through
// sbatch's environment, never their scripts) and the trial completes.
func TestSlurmSecureNameServer(t *testing.T) {
	sc := slurmtest.Get(t)
	srv := etcdtest.StartSecure(t, etcdtest.Secure{TLS: true, Auth: true, Host: sc.HostAddr})
	work := t.TempDir()
	trial := names.NewTrial("echo-64", fmt.Sprintf("secure%d", time.Now().UnixNano()%1e6))
	t.Cleanup(func() { _ = sc.Command("scancel", "--name=distrl."+trial.Experiment+"."+trial.Trial+".echo").Run() })
	env := append([]string{"RLCTL_NAMERESOLVE=" + srv.Endpoint(), "RLCTL_NAMERESOLVE_CACERT=" + srv.PKI.CA}, sc.Env()...)
	p := start(t, "rlctl-start", env, "start", trial.Experiment, trial.Trial, "--scheduler", "slurm", "--workdir", work,
		"--nameresolve-user", etcdtest.User+":"+etcdtest.Password,
		"--set", "workers.echo.count=3", "--set", "stop.wall_time=6s")
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("rlctl start exited with %d:\n%s", code, readFile(t, p.log))
	}
	if out := readFile(t, p.log); !strings.Contains(out, "name resolve: etcd at "+srv.Endpoint()) || !strings.Contains(out, "all 3 workers running") {
		t.Errorf("want a run on the secured etcd:\n%s", out)
	}
	script := readFile(t, filepath.Join(work, trial.Experiment, trial.Trial, "slurm", "echo.sbatch"))
	if strings.Contains(script, etcdtest.Password) || !strings.Contains(script, "--nameresolve-user "+etcdtest.User+" ") ||
		!strings.Contains(script, "--nameresolve-cacert "+srv.PKI.CA) {
		t.Errorf("want the user and CA in the script, not the password:\n%s", script)
	}
}
