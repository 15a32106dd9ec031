package worker

import (
	"net"
	"testing"
)

func TestRouteHost(t *testing.T) {
	for _, tt := range []struct {
		endpoint, want string
	}{
		{"127.0.0.1:2379", "127.0.0.1"},
		{"http://127.0.0.1:2379", "127.0.0.1"},
		{"127.0.0.1", "127.0.0.1"}, // no port: the etcd default is assumed
	} {
		got, err := RouteHost(tt.endpoint)
		if err != nil || got != tt.want {
			t.Errorf("RouteHost(%q) = %q, %v; want %q", tt.endpoint, got, err, tt.want)
		}
	}
	// A non-loopback endpoint is reached from an address of this machine.
	if h := RoutableHost(); h != "127.0.0.1" {
		got, err := RouteHost(net.JoinHostPort(h, "2379"))
		if err != nil || got != h {
			t.Errorf("RouteHost(own address %s) = %q, %v", h, got, err)
		}
	}
	if _, err := RouteHost("no-such-host.invalid:2379"); err == nil {
		t.Error("RouteHost of an unresolvable name: no error")
	}
}
