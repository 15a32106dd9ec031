package etcd

import "time"

// CloseWithoutCleanup closes the client without deleting or revoking
// anything, as if the process had died.
func (r *Repository) CloseWithoutCleanup() error { return r.abandon() }

// SetProgressTimeout sets how long a mirror waits for a progress answer,
// until the returned function restores it.
func SetProgressTimeout(d time.Duration) (restore func()) {
	old := progressTimeout
	progressTimeout = d
	return func() { progressTimeout = old }
}
