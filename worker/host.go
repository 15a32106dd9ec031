package worker

import (
	"fmt"
	"net"
	"strings"
)

// RoutableHost is the address a worker advertises when none is given: the
// first non-loopback IPv4 address of an interface that is up, else
// 127.0.0.1. It reads interfaces only; no name lookup, no traffic. (The
// DefaultHost constants of stream, paramstream and controller are loopback:
// a worker's own default is the one meant for other machines.)
func RoutableHost() string {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "127.0.0.1"
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLinkLocalUnicast() {
				return ipn.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

// RouteHost returns this machine's address on the interface that routes
// to endpoint ("host:port", optionally with a scheme such as http://): the
// address at which the machines that reach endpoint can most likely reach
// this one. On a cluster that is the node's address on the network of the
// name server; with a loopback endpoint it is loopback. It sends nothing:
// connecting a UDP socket only picks the route.
func RouteHost(endpoint string) (string, error) {
	hostport := endpoint
	if i := strings.Index(hostport, "://"); i >= 0 {
		hostport = hostport[i+3:]
	}
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		hostport = net.JoinHostPort(hostport, "2379")
	}
	conn, err := net.Dial("udp", hostport)
	if err != nil {
		return "", fmt.Errorf("worker: no route to the name server %s: %w", endpoint, err)
	}
	defer conn.Close()
	return conn.LocalAddr().(*net.UDPAddr).IP.String(), nil
}
