// Package pidfile sweeps the files that processes name after themselves
// (shared-memory listeners and doorbells, ipc:// socket files) once their
// process is gone: a killed process leaves them behind, and nothing else
// would remove them.
package pidfile
