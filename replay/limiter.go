package replay

import (
	"fmt"
	"math"
)

// Limiter paces inserts against samples, as Reverb's SampleToInsertRatio.
//
// No sample is allowed before the table holds MinSize items. With
// SamplesPerInsert > 0 the limiter also keeps
//
//	diff = inserts*SamplesPerInsert - samples
//
// within [SamplesPerInsert*MinSize - ErrorBuffer, SamplesPerInsert*MinSize + ErrorBuffer]:
// a sample of n items waits while diff - n would fall below the lower
// bound (samplers outrun the actors), an insert waits while diff +
// SamplesPerInsert would rise above the upper bound (actors outrun the
// learner). Inserts are always allowed while the table is below MinSize.
// Each sampled item counts as one sample.
type Limiter struct {
	MinSize          int     `msgpack:"min_size" json:"min_size"`
	SamplesPerInsert float64 `msgpack:"samples_per_insert" json:"samples_per_insert"`
	ErrorBuffer      float64 `msgpack:"error_buffer" json:"error_buffer"`
}

func (l Limiter) validate() error {
	switch {
	case l.MinSize < 0:
		return fmt.Errorf("%w: min_size %d is negative", ErrBadOptions, l.MinSize)
	case l.SamplesPerInsert < 0 || math.IsNaN(l.SamplesPerInsert) || math.IsInf(l.SamplesPerInsert, 0):
		return fmt.Errorf("%w: samples_per_insert %v must be finite and >= 0 (0: no ratio)", ErrBadOptions, l.SamplesPerInsert)
	case l.SamplesPerInsert > 0 && !(l.ErrorBuffer >= (l.SamplesPerInsert+1)/2) || math.IsInf(l.ErrorBuffer, 0):
		// The window must hold one insert and one sample (maxBatch >= 1).
		return fmt.Errorf("%w: error_buffer %v must be finite and >= (samples_per_insert+1)/2 = %v", ErrBadOptions, l.ErrorBuffer, (l.SamplesPerInsert+1)/2)
	}
	return nil
}

func (l Limiter) bounds() (lo, hi float64) {
	c := l.SamplesPerInsert * float64(l.MinSize)
	return c - l.ErrorBuffer, c + l.ErrorBuffer
}

// canInsert reports whether one insert may go ahead, and if not why.
func (l Limiter) canInsert(size int, inserts, samples int64) (bool, string) {
	if l.SamplesPerInsert == 0 || size < l.MinSize {
		return true, ""
	}
	_, hi := l.bounds()
	if diff := float64(inserts)*l.SamplesPerInsert - float64(samples); diff+l.SamplesPerInsert > hi {
		return false, fmt.Sprintf("samples per insert %v: %.0f samples behind the ratio, %v allowed", l.SamplesPerInsert, diff-(hi-l.ErrorBuffer), l.ErrorBuffer)
	}
	return true, ""
}

// canSample reports whether n samples may go ahead, and if not why.
func (l Limiter) canSample(size, n int, inserts, samples int64) (bool, string) {
	if size < max(l.MinSize, 1) {
		return false, fmt.Sprintf("%d items, min size %d", size, max(l.MinSize, 1))
	}
	if l.SamplesPerInsert == 0 {
		return true, ""
	}
	lo, _ := l.bounds()
	if diff := float64(inserts)*l.SamplesPerInsert - float64(samples); diff-float64(n) < lo {
		return false, fmt.Sprintf("samples per insert %v: %.0f samples ahead of the ratio, %v allowed", l.SamplesPerInsert, lo+l.ErrorBuffer-diff+float64(n), l.ErrorBuffer)
	}
	return true, ""
}

// maxBatch is the largest sample the limiter always lets through
// eventually. A blocked sample of n waits at diff < lo+n, where an insert
// is allowed if lo+n+spi <= hi; a blocked insert waits at diff > hi-spi,
// where a sample of n is allowed if hi-spi-n >= lo. Both hold for
// n <= 2*ErrorBuffer - SamplesPerInsert.
func (l Limiter) maxBatch() int {
	if l.SamplesPerInsert == 0 {
		return math.MaxInt
	}
	return int(2*l.ErrorBuffer - l.SamplesPerInsert)
}
