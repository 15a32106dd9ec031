package etcd

// CloseWithoutCleanup closes the client without deleting or revoking
// anything, as if the process had died.
func (r *Repository) CloseWithoutCleanup() error { return r.abandon() }
