package rpc

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/distrl/distrl/internal/zsock"
	zmq "github.com/pebbe/zmq4"
)

// CurveKeyPair is a CurveZMQ key pair, each key Z85-encoded (40 characters).
type CurveKeyPair struct {
	Public string
	Secret string
}

// NewCurveKeyPair generates a fresh CurveZMQ key pair.
func NewCurveKeyPair() (CurveKeyPair, error) {
	pub, sec, err := zmq.NewCurveKeypair()
	if err != nil {
		return CurveKeyPair{}, fmt.Errorf("rpc: generate curve key pair: %w", err)
	}
	return CurveKeyPair{Public: pub, Secret: sec}, nil
}

// CurveClientKeys are what a client needs to talk to a CURVE server: the
// server's public key and the client's own key pair (any pair will do; the
// server does not authenticate clients beyond their knowing its public key).
type CurveClientKeys struct {
	ServerPublic string
	Client       CurveKeyPair
}

func setServerCurve(s *zmq.Socket, kp *CurveKeyPair) error {
	if err := s.SetCurveServer(1); err != nil {
		return fmt.Errorf("set CURVE_SERVER: %w", err)
	}
	if err := s.SetCurveSecretkey(kp.Secret); err != nil {
		return fmt.Errorf("set CURVE_SECRETKEY: %w", err)
	}
	return nil
}

func setClientCurve(s *zmq.Socket, k *CurveClientKeys) error {
	if err := s.SetCurveServerkey(k.ServerPublic); err != nil {
		return fmt.Errorf("set CURVE_SERVERKEY: %w", err)
	}
	if err := s.SetCurvePublickey(k.Client.Public); err != nil {
		return fmt.Errorf("set CURVE_PUBLICKEY: %w", err)
	}
	if err := s.SetCurveSecretkey(k.Client.Secret); err != nil {
		return fmt.Errorf("set CURVE_SECRETKEY: %w", err)
	}
	return nil
}

// curveKeyFile is the on-disk form of an experiment's key pair.
type curveKeyFile struct {
	Public string `json:"public"`
	Secret string `json:"secret"`
}

// WriteCurveKeyFile stores kp as JSON readable by its owner only. It
// refuses to overwrite an existing file, so a running experiment's key is
// never replaced by accident.
func WriteCurveKeyFile(path string, kp CurveKeyPair) error {
	b, err := json.MarshalIndent(curveKeyFile(kp), "", "  ")
	if err != nil {
		return fmt.Errorf("rpc: encode key file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("rpc: write key file: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("rpc: write key file %s: %w", path, err)
	}
	return f.Close()
}

// ReadCurveKeyFile loads a key pair written by WriteCurveKeyFile.
func ReadCurveKeyFile(path string) (CurveKeyPair, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return CurveKeyPair{}, fmt.Errorf("rpc: read key file: %w", err)
	}
	var k curveKeyFile
	if err := json.Unmarshal(b, &k); err != nil {
		return CurveKeyPair{}, fmt.Errorf("rpc: key file %s: %w", path, err)
	}
	if len(k.Public) != 40 || len(k.Secret) != 40 {
		return CurveKeyPair{}, fmt.Errorf("rpc: key file %s: want 40-character Z85 public and secret keys", path)
	}
	return CurveKeyPair(k), nil
}

// ClientKeys are the client keys for servers that use kp: with one key pair
// per experiment, holding the pair is what lets a client in.
func (kp CurveKeyPair) ClientKeys() *CurveClientKeys {
	return &CurveClientKeys{ServerPublic: kp.Public, Client: kp}
}

// SocketKeys are kp for the data plane's sockets (zsock.Options.Curve),
// which all use the experiment's one pair; nil for a nil kp (no CURVE).
func (kp *CurveKeyPair) SocketKeys() *zsock.Curve {
	if kp == nil {
		return nil
	}
	return &zsock.Curve{Public: kp.Public, Secret: kp.Secret}
}
