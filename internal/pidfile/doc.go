// Package pidfile sweeps the files that processes name after themselves
// (shared-memory listeners and doorbells, ipc:// socket files) once their
// process is gone: a killed process leaves them behind, and nothing else
// would remove them.
//
// A pid is gone when kill(pid, 0) says there is no such process. Processes
// in different PID namespaces that share the directory would take each
// other's files for a dead process's, so the directories swept are meant
// for one PID namespace (the temporary directory and /dev/shm of a node).
package pidfile
