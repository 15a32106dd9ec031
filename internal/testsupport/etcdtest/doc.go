// Package etcdtest gives a test binary one embedded etcd, started by the
// first test that needs it and stopped by TestMain, so that tests of
// packages above name resolve can run against a real etcd cheaply.
package etcdtest
