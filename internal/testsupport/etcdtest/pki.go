package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI is a throwaway certificate authority and the certificates a shared
// etcd and its clients use, as PEM files in one directory.
type PKI struct {
	// CA signed ServerCert and ClientCert.
	CA string
	// ServerCert is valid for 127.0.0.1, ::1, localhost and the hosts
	// given to NewPKI.
	ServerCert, ServerKey string
	// ClientCert's common name is ClientUser: with --client-cert-auth and
	// authentication enabled, etcd takes it as that user.
	ClientCert, ClientKey string
	// OtherCA signed nothing here: a client trusting it rejects the server.
	OtherCA string
}

// ClientUser is the common name of PKI.ClientCert.
const ClientUser = "distrl"

// NewPKI writes a CA, a server and a client certificate into dir. The
// server's is valid for loopback and for hosts (IP addresses or names).
func NewPKI(dir string, hosts ...string) (PKI, error) {
	p := PKI{
		CA: filepath.Join(dir, "ca.pem"), OtherCA: filepath.Join(dir, "other-ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
	}
	ca, caKey, err := newCert(&x509.Certificate{
		Subject: pkix.Name{CommonName: "distrl test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil, nil, p.CA, "")
	if err != nil {
		return p, err
	}
	if _, _, err := newCert(&x509.Certificate{
		Subject: pkix.Name{CommonName: "distrl other CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign,
	}, nil, nil, p.OtherCA, ""); err != nil {
		return p, err
	}
	server := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "etcd"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, DNSNames: []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			server.IPAddresses = append(server.IPAddresses, ip)
		} else {
			server.DNSNames = append(server.DNSNames, h)
		}
	}
	if _, _, err := newCert(server, ca, caKey, p.ServerCert, p.ServerKey); err != nil {
		return p, err
	}
	_, _, err = newCert(&x509.Certificate{
		Subject:     pkix.Name{CommonName: ClientUser},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, caKey, p.ClientCert, p.ClientKey)
	return p, err
}

// newCert creates a certificate from tmpl, signed by parent (self-signed
// when nil), and writes it to certPath and its key to keyPath (if given).
func newCert(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, certPath, keyPath string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("etcdtest: certificate %s: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return nil, nil, err
	}
	if keyPath != "" {
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		if err := writePEM(keyPath, "PRIVATE KEY", kder); err != nil {
			return nil, nil, err
		}
	}
	return cert, key, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
