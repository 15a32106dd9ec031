// Package shm is a same-host message channel between two processes over
// shared memory: a pair of single-producer single-consumer rings in one
// file under /dev/shm, with a FIFO "doorbell" per process that a peer rings
// only when the reader said it is about to sleep.
//
// It exists because waking a thread is what a message costs on a small
// machine: a ZeroMQ round trip between two processes wakes about four
// threads (each side's I/O thread and application thread), a doorbell
// round trip two, and a busy reader none, since it finds the next message
// in memory without a system call.
//
// A Listener (the server's side) is a directory holding its doorbell and a
// control word; a client Dials it by creating a channel file there, bumping
// the control word and ringing the doorbell. Accept maps new channel files
// and unlinks them, so that the memory of a channel lives exactly as long as
// one of its two processes has it mapped and nothing is left behind by a
// process that is killed after that point. Listen removes the directories of
// listeners whose process is gone.
//
// Everything read from shared memory is checked: a peer that writes garbage
// makes Recv fail with ErrCorrupt, never read or write outside the mapping.
// Each type is for one goroutine.
package shm
