package zsock

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	zmq "github.com/pebbe/zmq4"
)

// Options are the socket options Configure sets. LINGER is always set; a
// zero field of any other kind is left at ZMQ's default.
type Options struct {
	// Linger is how long Close waits for queued messages; 0 drops them.
	Linger time.Duration
	// MaxMsgSize: ZMQ drops the connection of a peer whose message exceeds
	// it, before allocating the message, so hostile length prefixes cannot
	// balloon memory. Set when nonzero.
	MaxMsgSize int64
	// SendHWM and RecvHWM bound the queues per peer; set when > 0.
	SendHWM, RecvHWM int
	// Immediate queues messages only on completed connections, so nothing
	// waits in a pipe to a peer that is down or not up yet; a send with no
	// live peer fails with EAGAIN.
	Immediate bool
	// IPv6 lets the socket bind to or connect to IPv6 addresses.
	IPv6 bool
	// RouterMandatory makes a ROUTER's send to a peer that is gone, or
	// whose queue is full, fail at once instead of dropping the message
	// silently.
	RouterMandatory bool
	// Curve, when set, makes the socket speak CurveZMQ with the trial's
	// one key pair: a socket from Bind is the server, one from New a
	// client. A peer without the key never completes the handshake: the
	// socket neither receives its messages nor sends it any.
	Curve *Curve
	// curveServer: Bind's sockets take the server role.
	curveServer bool
}

// Curve is a CurveZMQ key pair, both keys Z85-encoded (40 characters).
// A trial uses one pair for every socket, so holding it (the key file) is
// what lets a process in.
type Curve struct {
	Public, Secret string
}

// SetCurve makes sock a CURVE server (server) or a client of servers that
// use k.
func SetCurve(sock *zmq.Socket, k *Curve, server bool) error {
	if server {
		if err := sock.SetCurveServer(1); err != nil {
			return fmt.Errorf("set CURVE_SERVER: %w", err)
		}
	} else if err := sock.SetCurveServerkey(k.Public); err != nil {
		return fmt.Errorf("set CURVE_SERVERKEY: %w", err)
	} else if err := sock.SetCurvePublickey(k.Public); err != nil {
		return fmt.Errorf("set CURVE_PUBLICKEY: %w", err)
	}
	if err := sock.SetCurveSecretkey(k.Secret); err != nil {
		return fmt.Errorf("set CURVE_SECRETKEY: %w", err)
	}
	return nil
}

// Configure sets o on sock.
func Configure(sock *zmq.Socket, o Options) error {
	if err := sock.SetLinger(o.Linger); err != nil {
		return fmt.Errorf("set LINGER: %w", err)
	}
	if o.MaxMsgSize != 0 {
		if err := sock.SetMaxmsgsize(o.MaxMsgSize); err != nil {
			return fmt.Errorf("set MAXMSGSIZE: %w", err)
		}
	}
	if o.SendHWM > 0 {
		if err := sock.SetSndhwm(o.SendHWM); err != nil {
			return fmt.Errorf("set SNDHWM: %w", err)
		}
	}
	if o.RecvHWM > 0 {
		if err := sock.SetRcvhwm(o.RecvHWM); err != nil {
			return fmt.Errorf("set RCVHWM: %w", err)
		}
	}
	if o.Immediate {
		if err := sock.SetImmediate(true); err != nil {
			return fmt.Errorf("set IMMEDIATE: %w", err)
		}
	}
	if o.IPv6 {
		if err := sock.SetIpv6(true); err != nil {
			return fmt.Errorf("set IPV6: %w", err)
		}
	}
	if o.RouterMandatory {
		if err := sock.SetRouterMandatory(1); err != nil {
			return fmt.Errorf("set ROUTER_MANDATORY: %w", err)
		}
	}
	if o.Curve != nil {
		return SetCurve(sock, o.Curve, o.curveServer)
	}
	return nil
}

// New creates a socket of type t with options o. On error nothing is left
// open.
func New(t zmq.Type, o Options) (*zmq.Socket, error) {
	sock, err := zmq.NewSocket(t)
	if err != nil {
		return nil, fmt.Errorf("new %v socket: %w", t, err)
	}
	if err := Configure(sock, o); err != nil {
		sock.Close()
		return nil, err
	}
	return sock, nil
}

// Bind is the one shape of every bound (receiving) socket: it creates a
// socket of type t with options o, binds it to a free TCP port of host and
// returns it with the address ("host:port") peers connect to. IPV6 is set
// when host is an IPv6 literal, bracketed or not. On error nothing is left
// open.
func Bind(t zmq.Type, host string, o Options) (*zmq.Socket, string, error) {
	o.IPv6 = o.IPv6 || strings.Contains(host, ":")
	o.curveServer = true
	sock, err := New(t, o)
	if err != nil {
		return nil, "", err
	}
	addr, err := BindRandomPort(sock, host)
	if err != nil {
		sock.Close()
		return nil, "", err
	}
	return sock, addr, nil
}

// BindRandomPort binds sock to a free TCP port of host (an IPv6 literal
// with or without brackets) and returns the address ("host:port") peers
// should connect to. Binding an IPv6 address needs Options.IPv6.
func BindRandomPort(sock *zmq.Socket, host string) (string, error) {
	ep := "tcp://" + bracketed(host) + ":0"
	if err := sock.Bind(ep); err != nil {
		return "", fmt.Errorf("bind %s: %w", ep, err)
	}
	last, err := sock.GetLastEndpoint()
	if err != nil {
		return "", fmt.Errorf("bound endpoint of %s: %w", ep, err)
	}
	return strings.TrimPrefix(last, "tcp://"), nil
}

// bracketed puts an IPv6 literal in brackets, as an endpoint needs it.
func bracketed(host string) string {
	if strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
		return "[" + host + "]"
	}
	return host
}

// IsEAGAIN reports whether err is ZMQ's EAGAIN: nothing to receive, or no
// room (or no peer) for a non-blocking send.
func IsEAGAIN(err error) bool {
	return err != nil && zmq.AsErrno(err) == zmq.Errno(syscall.EAGAIN)
}

// IsHostUnreachable reports whether err is a ROUTER_MANDATORY send to a
// peer that is gone.
func IsHostUnreachable(err error) bool {
	return err != nil && zmq.AsErrno(err) == zmq.Errno(syscall.EHOSTUNREACH)
}

// Undeliverable reports whether err is a ROUTER_MANDATORY reply that could
// not go out, its peer gone (EHOSTUNREACH) or its queue full (EAGAIN with
// DONTWAIT): the servers count such replies and drop them, since the
// peer asks again or times out.
func Undeliverable(err error) bool { return IsEAGAIN(err) || IsHostUnreachable(err) }
