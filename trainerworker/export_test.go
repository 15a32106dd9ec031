package trainerworker

// SetUpdateHook makes f run before each update's arithmetic, on the
// goroutine that runs it, until the returned function undoes it.
func SetUpdateHook(f func()) (undo func()) {
	testHookUpdate.Store(&f)
	return func() { testHookUpdate.Store(nil) }
}
