// Package curvetest helps tests show that a CURVE socket lets in only
// peers holding the trial's key pair: fresh key pairs, raw peers with or
// without keys, and a monitor that sees the server refuse a handshake (the
// one event that proves a peer was kept out, rather than just slow).
package curvetest
