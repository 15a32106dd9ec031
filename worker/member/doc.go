// Package member is the contract between the members of a trial (its
// workers and the controller's "ctl") and whoever drives them: the
// lifecycle states, the status and loop records a member writes under its
// trial's keys, the standard command names and their handlers (Commands),
// the worker type names and the keys of their "stats" replies that are
// read outside the type.
//
// It is the api of the worker packages, as etcd's api is to its client
// and server: package worker runs members (the server side), package
// worker/panel drives them (the client side), and both, like the
// controller, import this one and not each other.
package member
