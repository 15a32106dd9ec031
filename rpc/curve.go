package rpc

import (
	"fmt"

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
