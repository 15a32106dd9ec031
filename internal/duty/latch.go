package duty

// Latch is a bound a note gives with hysteresis: set when a share reaches
// On, cleared when it falls below Off (Off < On), kept in between, so that
// a share hovering at On does not make the note come and go.
type Latch struct {
	On, Off float64
	set     bool
}

// At takes the latest share and reports whether the bound holds.
func (l *Latch) At(share float64) bool {
	switch {
	case share >= l.On:
		l.set = true
	case share < l.Off:
		l.set = false
	}
	return l.set
}

// Reset clears the bound.
func (l *Latch) Reset() { l.set = false }
