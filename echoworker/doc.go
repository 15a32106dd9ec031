// Package echoworker is the smallest worker type: it answers "echo" with its
// kwargs and does no work of its own. It is there to check a deployment
// (name resolve, sockets, the control panel) without any RL in the way.
package echoworker
