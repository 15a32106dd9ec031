// Package nrtest is the conformance suite every nameresolve.Repository
// backend must pass. It is a normal package so that backend tests in other
// packages can import it; it is not meant for production code.
package nrtest
