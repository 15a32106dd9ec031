// Package pytest finds, for tests, a Python interpreter that has pyzmq and
// msgpack (the Debian packages python3-zmq and python3-msgpack that `make
// deps` installs), or skips the test; and extracts the Python examples of
// the docs for tests to run.
package pytest
