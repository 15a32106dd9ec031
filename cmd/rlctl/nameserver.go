package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/distrl/distrl/nameresolve/etcdserver"
	"github.com/urfave/cli/v2"
)

func nameserverCommand() *cli.Command {
	return &cli.Command{
		Name:  "nameserver",
		Usage: "run an embedded etcd for one machine or a cluster's head node, until SIGINT/SIGTERM",
		Flags: withGlobal(
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:2379", Usage: "client address (host:port); workers point --nameresolve here"},
			&cli.StringFlag{Name: "peer", Value: "127.0.0.1:0", Usage: "peer address (host:port, 0 = any free port)"},
			&cli.StringFlag{Name: "data-dir", Usage: "etcd data directory (default ~/.distrl/etcd)"},
			// etcd's own names for its client TLS.
			&cli.StringFlag{Name: "cert-file", Usage: "serve TLS with this certificate (PEM); clients give --nameresolve-cacert"},
			&cli.StringFlag{Name: "key-file", Usage: "the certificate's private key (PEM)"},
			&cli.StringFlag{Name: "trusted-ca-file", Usage: "CA bundle (PEM) that verifies client certificates"},
			&cli.BoolFlag{Name: "client-cert-auth", Usage: "require a client certificate signed by --trusted-ca-file"},
		),
		Action: func(c *cli.Context) error {
			log, err := logger(c)
			if err != nil {
				return err
			}
			dir := c.String("data-dir")
			if dir == "" {
				home, err := os.UserHomeDir()
				if err != nil {
					return cli.Exit("no --data-dir and no home directory: "+err.Error(), 2)
				}
				dir = filepath.Join(home, ".distrl", "etcd")
			}
			srv, err := etcdserver.Start(c.Context, etcdserver.Config{
				Dir: dir, ClientAddr: c.String("listen"), PeerAddr: c.String("peer"), Logger: log,
				CertFile: c.String("cert-file"), KeyFile: c.String("key-file"),
				TrustedCAFile: c.String("trusted-ca-file"), ClientCertAuth: c.Bool("client-cert-auth"),
			})
			if err != nil {
				return cli.Exit(fmt.Sprintf("nameserver: %v", err), 1)
			}
			// The endpoint line is for scripts that start a nameserver and wait for it.
			fmt.Printf("nameserver listening on %s (data %s)\n", srv.Endpoint(), dir)
			<-c.Context.Done()
			log.Info("nameserver stopping")
			return srv.Close()
		},
	}
}
