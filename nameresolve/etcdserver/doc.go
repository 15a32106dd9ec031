// Package etcdserver runs an embedded single-member etcd: the name server of
// a single machine or of a cluster's head node.
//
// Start it on a data directory, hand Endpoint to nameresolve/etcd.Open, and
// Close it last: close every client first (see Server.Close). Restarting on
// the same Dir and ClientAddr resumes the same member with its data.
package etcdserver
