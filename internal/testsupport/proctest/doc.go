// Package proctest is test support for code that reasons about other
// processes by pid: the pid of one that is gone.
package proctest
