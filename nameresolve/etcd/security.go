package etcd

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Security is how the client meets an etcd shared with others: TLS and
// etcd's role-based authentication. The fields follow etcdctl's flags of
// the same names. The zero value is plaintext without authentication.
type Security struct {
	// CACert is a PEM bundle that verifies the servers' certificates
	// (--cacert). Without it, TLS verifies against the system's roots.
	CACert string
	// Cert and Key are a client certificate and its key (--cert, --key),
	// for etcd's --client-cert-auth. With authentication on, etcd takes the
	// certificate's common name as the user when no User is given.
	Cert, Key string
	// InsecureSkipTLSVerify accepts any server certificate
	// (--insecure-skip-tls-verify): for testing only.
	InsecureSkipTLSVerify bool
	// User is a user name, or "name:password" when Password is empty (--user).
	User string
	// Password is User's password (--password).
	Password string
}

// TLS reports whether the client speaks TLS to endpoints without a
// scheme. (https:// endpoints always get TLS, http:// ones never.)
func (s Security) TLS() bool {
	return s.CACert != "" || s.Cert != "" || s.Key != "" || s.InsecureSkipTLSVerify
}

// Credentials returns the user name and password, User split at its first
// colon when Password is empty (as etcdctl does). A user without a password
// is an error: rlctl runs daemons, it cannot prompt.
func (s Security) Credentials() (user, password string, err error) {
	user, password = s.User, s.Password
	if password == "" {
		user, password, _ = strings.Cut(s.User, ":")
	} else if strings.Contains(user, ":") {
		return "", "", &SecurityError{Option: "user", Err: errors.New("give the password either after the colon or as the password, not both")}
	}
	if user == "" && password != "" {
		return "", "", &SecurityError{Option: "user", Err: errors.New("a password needs a user name")}
	}
	if user != "" && password == "" {
		return "", "", &SecurityError{Option: "password", Err: fmt.Errorf("user %q has no password (give NAME:PASSWORD, or the password on its own)", user)}
	}
	return user, password, nil
}

// Validate checks what Open would use, connecting nowhere: the files load
// and the credentials are complete. Its errors are *SecurityError.
func (s Security) Validate() error {
	if _, err := s.tlsConfig(); err != nil {
		return err
	}
	_, _, err := s.Credentials()
	return err
}

// tlsConfig loads the files; nil when TLS is off.
func (s Security) tlsConfig() (*tls.Config, error) {
	if !s.TLS() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: s.InsecureSkipTLSVerify}
	if s.CACert != "" {
		b, err := os.ReadFile(s.CACert)
		if err != nil {
			return nil, &SecurityError{Option: "cacert", File: s.CACert, Err: err}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, &SecurityError{Option: "cacert", File: s.CACert, Err: errors.New("no PEM certificate in it")}
		}
		cfg.RootCAs = pool
	}
	if s.Cert == "" && s.Key == "" {
		return cfg, nil
	}
	if s.Cert == "" {
		return nil, &SecurityError{Option: "cert", Err: fmt.Errorf("missing: the key %s needs its certificate", s.Key)}
	}
	if s.Key == "" {
		return nil, &SecurityError{Option: "key", Err: fmt.Errorf("missing: the certificate %s needs its key", s.Cert)}
	}
	certPEM, err := os.ReadFile(s.Cert)
	if err != nil {
		return nil, &SecurityError{Option: "cert", File: s.Cert, Err: err}
	}
	if b, _ := pem.Decode(certPEM); b == nil || b.Type != "CERTIFICATE" {
		return nil, &SecurityError{Option: "cert", File: s.Cert, Err: errors.New("no PEM certificate in it")}
	}
	keyPEM, err := os.ReadFile(s.Key)
	if err != nil {
		return nil, &SecurityError{Option: "key", File: s.Key, Err: err}
	}
	// The certificate parsed above, so what fails here is the key: not
	// PEM, or not the certificate's.
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, &SecurityError{Option: "key", File: s.Key, Err: fmt.Errorf("%w (certificate %s)", err, s.Cert)}
	}
	cfg.Certificates = []tls.Certificate{pair}
	return cfg, nil
}

// SecurityError is a Security field that cannot be used: a file that is
// missing or not what it should be, or an incomplete user/password pair.
// Option is etcdctl's name of the field ("cacert", "cert", "key", "user",
// "password"), so a command can name its own flag.
type SecurityError struct {
	Option string
	File   string // empty when the problem is not a file's
	Err    error
}

func (e *SecurityError) Error() string {
	if e.File == "" {
		return fmt.Sprintf("nameresolve/etcd: %s: %v", e.Option, e.Err)
	}
	return fmt.Sprintf("nameresolve/etcd: %s file %s: %v", e.Option, e.File, e.Err)
}

func (e *SecurityError) Unwrap() error { return e.Err }
