// Package e2e holds the end-to-end tests: the rlctl binary built fresh,
// a real name server (embedded etcd in an `rlctl nameserver` process) and
// workers as real processes talking over loopback.
package e2e
