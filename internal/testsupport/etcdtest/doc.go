// Package etcdtest gives a test binary one embedded etcd, started by the
// first test that needs it and stopped by TestMain, so that tests of
// packages above name resolve can run against a real etcd cheaply; and,
// for tests of TLS and authentication, etcds of their own secured as a
// shared etcd is (StartSecure), with a throwaway PKI (NewPKI).
package etcdtest
