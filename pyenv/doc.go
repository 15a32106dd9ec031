// Package pyenv runs gymnasium-style Python environments (and PettingZoo
// parallel ones) for distrl's actors.
//
// A [Host] is one Python process, `python3 -m distrl.envhost`, holding a
// batch of environments built by a factory of the user's module. The Go
// side binds a ZeroMQ PAIR socket on an ipc:// path in a private temporary
// directory; the host connects and answers msgpack requests one at a time:
// init (import, build, describe the spaces), batch (reset some
// environments and step others, all in one message, observations and
// actions as the tensor encoding of docs/protocol.md) and close. The
// Python package is embedded in the binary (package python), so nothing
// needs installing but pyzmq and msgpack.
//
// Failures are errors, never hangs: a Python exception comes back as an
// [*Error] with its message (the traceback goes to the log with the rest
// of the host's output); a host that exits, or does not answer within its
// deadline, is killed and reported ([ErrExited], [ErrTimeout]); a space
// distrl cannot use is [ErrUnsupportedSpace]. No host outlives its
// process: on Linux the kernel kills it when its parent dies (Pdeathsig),
// and the host itself exits when its parent is gone.
//
// [Register] makes the environments available as `env: python`; see
// docs/python-envs.md for the configuration and a complete example.
package pyenv
