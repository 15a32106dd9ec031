package etcdserver

import (
	"cmp"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Defaults for the zero fields of Config.
const (
	DefaultClientAddr = "127.0.0.1:2379"
	DefaultPeerAddr   = "127.0.0.1:0"
	DefaultName       = "distrl"
)

// Config says where the embedded etcd keeps its data and listens.
type Config struct {
	// Dir is the data directory (required). Restarting on the same Dir keeps
	// the member and its records.
	Dir string
	// ClientAddr is host:port for clients; DefaultClientAddr if empty.
	// Port 0 picks a free port (see freePort for the caveat).
	ClientAddr string
	// PeerAddr is host:port for raft peers; DefaultPeerAddr (a free port) if
	// empty. A single member never dials its peers, so a different port
	// after a restart is harmless.
	PeerAddr string
	// Name is the member name; DefaultName if empty.
	Name string
	// Logger receives start/stop lines and etcd's own errors; nil discards them.
	Logger *slog.Logger

	// TLS on the client port, as etcd's flags of the same names. CertFile
	// and KeyFile (--cert-file, --key-file) make it serve TLS only;
	// TrustedCAFile (--trusted-ca-file) verifies client certificates, and
	// with ClientCertAuth (--client-cert-auth) a client must present one.
	CertFile, KeyFile string
	TrustedCAFile     string
	ClientCertAuth    bool
	// BcryptCost is the cost of hashing users' passwords (etcd's
	// --bcrypt-cost); etcd's default (10) if zero. Each authentication pays it.
	BcryptCost uint
	// AuthTokenTTL is how long an unused authentication token lives
	// (etcd's --auth-token-ttl, whole seconds); etcd's default (5 min) if zero.
	AuthTokenTTL time.Duration
	// NoFsync skips etcd's fsync of its log (etcd's --unsafe-no-fsync): a
	// write waits for no disk, and a crash of the machine, not of the
	// process, may lose the newest records. For a name server that lives
	// and dies with one trial on one machine (rlctl start's embedded one),
	// where a loaded disk would otherwise slow every registration.
	NoFsync bool
}

// tls reports whether the client port serves TLS.
func (c Config) tls() bool { return c.CertFile != "" || c.KeyFile != "" }

// withDefaults validates c and fills in defaults, resolving port 0 to a
// concrete free port so that Endpoint is known before etcd starts.
func (c Config) withDefaults() (Config, error) {
	if c.Dir == "" {
		return c, fmt.Errorf("etcdserver: Config.Dir is required")
	}
	if c.ClientAddr == "" {
		c.ClientAddr = DefaultClientAddr
	}
	if c.PeerAddr == "" {
		c.PeerAddr = DefaultPeerAddr
	}
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return c, fmt.Errorf("etcdserver: TLS needs both a certificate and a key file (got cert %q, key %q)", c.CertFile, c.KeyFile)
	}
	if c.ClientCertAuth && (c.TrustedCAFile == "" || !c.tls()) {
		return c, fmt.Errorf("etcdserver: client certificate authentication needs TLS and a trusted CA file")
	}
	var err error
	if c.ClientAddr, err = resolvePort(c.ClientAddr); err != nil {
		return c, fmt.Errorf("etcdserver: client address: %w", err)
	}
	if c.PeerAddr, err = resolvePort(c.PeerAddr); err != nil {
		return c, fmt.Errorf("etcdserver: peer address: %w", err)
	}
	return c, nil
}

// picksPorts reports whether Start chooses a port itself for the client or
// the peer address (port 0, or the defaults when those ask for port 0).
func (c Config) picksPorts() bool {
	for _, addr := range []string{cmp.Or(c.ClientAddr, DefaultClientAddr), cmp.Or(c.PeerAddr, DefaultPeerAddr)} {
		if _, port, err := net.SplitHostPort(addr); err == nil && port == "0" {
			return true
		}
	}
	return false
}

// resolvePort replaces port 0 in addr with a free port.
func resolvePort(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("parse %q: %w", addr, err)
	}
	if port != "0" {
		return addr, nil
	}
	p, err := freePort(host)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, p), nil
}

// freePort asks the kernel for a free port on host and releases it at once.
// etcd wants a URL, not a listener, so there is a small window in which
// another process could take the port; etcd then fails to bind and Start
// returns that error.
func freePort(host string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("pick a free port on %q: %w", host, err)
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	if err != nil {
		return "", fmt.Errorf("pick a free port on %q: %w", host, err)
	}
	return port, nil
}
