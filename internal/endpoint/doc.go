// Package endpoint is the one shape of a data-plane endpoint, which the
// inference, sample and replay streams and the parameter stream share: a
// bound socket registered in name resolve on a lease (Bind), removed from
// it before it closes (Close), and the connecting side's view of every
// endpoint under a prefix (Watch), with a socket kept connected to all of
// them (Peers).
package endpoint
