// Package nameresolve is the name-record repository through which workers
// find each other: a worker adds "its name -> host:port" on a lease that it
// keeps alive, and anyone can get, wait for, find or watch records.
//
// Repository is the contract. Backends: NewMemory (in-process, for unit tests
// only) and the etcd backend in nameresolve/etcd. nameresolve/etcdserver runs
// an embedded etcd for a single machine or a cluster's head node, and
// nameresolve/names holds the key layout.
package nameresolve
