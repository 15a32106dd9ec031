package nn

import (
	"math"
	"math/rand/v2"
)

// The functions in this file work on one row (one observation's logits, or
// one action's mean and log-std) and are called once per step or sample,
// so they return no error. Misuse (mismatched lengths, an out-of-range
// action) yields NaN, an action of -1, or NaN written into the gradient, so
// that it surfaces in the loss or in ClipGradNorm's norm instead of being
// silently ignored. Internally they compute in float64: the float32 inputs
// are exact in float64, and it keeps log-sum-exp accurate for free.

// halfLog2Pi is log(2π)/2, the per-dimension constant of a Gaussian log-density.
var halfLog2Pi = 0.5 * math.Log(2*math.Pi)

// logSumExp returns log(Σ exp(l_i)), shifted by the maximum so that large
// logits cannot overflow exp. It is -Inf if every logit is -Inf. The
// exponentials and the log are the sampler's expNeg and logAtLeast1 (a
// tenth of a CartPole PPO update went to math.Exp and math.Log).
func logSumExp(l []float32) float64 {
	mx := math.Inf(-1)
	for _, v := range l {
		mx = max(mx, float64(v))
	}
	if math.IsInf(mx, -1) {
		return mx
	}
	var s float64
	for _, v := range l {
		s += expNeg(float64(v) - mx)
	}
	return mx + logAtLeast1(s) // s >= 1: the largest term is exp(0)
}

// SampleCategorical draws an action from the categorical distribution with
// logits logits[:n] (n is the number of actions, so one row of a batched
// logits buffer can be passed without reslicing) and returns it with its
// log-probability. It returns (-1, NaN) if n is out of range, rng is nil,
// or no action has positive finite probability. It draws one number from
// rng (when rng is not nil), valid row or not.
func SampleCategorical(logits []float32, n int, rng *rand.Rand) (action int32, logProb float32) {
	if rng == nil {
		return -1, float32(math.NaN())
	}
	return SampleCategoricalWith(logits, n, rng.Float64())
}

// sampleRowMax is the widest row whose exponentials SampleCategoricalWith
// keeps on the stack; a wider one computes them twice. The buffer is
// zeroed on every call, so it is no wider than the action sets met in
// practice (Atari's full set is 18).
const sampleRowMax = 18

// SampleCategoricalWith is SampleCategorical with the uniform number u in
// [0, 1) drawn by the caller, so that a batch's draws can be made in one
// place and the sampling done elsewhere (on a GPU, by the same inverse CDF).
//
// One exponential per action serves both the normaliser and the walk along
// the cumulative distribution (u·Σe_i against the running sum of e_i =
// exp(l_i − max)): a policy worker samples every row it serves, and taking
// the exponentials again against the log-sum-exp was a quarter of its
// forward pass on CartPole. The exponentials and the logarithm are expNeg
// and logAtLeast1, within 1e-14 of math.Exp and math.Log and, on a
// CartPole row, about 1.5 times as fast (BenchmarkSampleCategorical).
func SampleCategoricalWith(logits []float32, n int, u float64) (action int32, logProb float32) {
	if n <= 0 || n > len(logits) || n > math.MaxInt32 {
		return -1, float32(math.NaN())
	}
	l := logits[:n]
	mx := math.Inf(-1)
	for _, v := range l {
		mx = max(mx, float64(v)) // NaN if any logit is
	}
	if math.IsInf(mx, 0) || math.IsNaN(mx) {
		return -1, float32(math.NaN())
	}
	var buf [sampleRowMax]float64
	var e []float64
	if n <= sampleRowMax {
		e = buf[:n]
	}
	var sum float64
	for i, v := range l {
		x := expNeg(float64(v) - mx)
		if e != nil {
			e[i] = x
		}
		sum += x
	}
	lse := mx + logAtLeast1(sum) // sum >= 1: the largest term is exp(0)
	target := u * sum
	last := -1 // last action with positive probability, the fallback below
	var c float64
	for i, v := range l {
		var x float64
		if e != nil {
			x = e[i]
		} else {
			x = expNeg(float64(v) - mx)
		}
		if x > 0 {
			last = i
		}
		c += x
		if target < c {
			return int32(i), float32(float64(v) - lse)
		}
	}
	// Rounding can leave the cumulative sum a hair below u·Σ; the mass
	// that went missing belongs to the last possible action.
	return int32(last), float32(float64(l[last]) - lse)
}

// expNeg is exp(x) for x <= 0, as the shifted logits of a row are: 2^k
// times a Taylor polynomial of degree 11 on |r| <= ln2/2, within 1e-14
// relative of math.Exp, with the terms evaluated side by side (math.Exp
// handles the whole line and evaluates its polynomial in one chain). Below
// -708, where 2^k would leave the normal range, and for -Inf and NaN it
// is math.Exp's.
func expNeg(x float64) float64 {
	if !(x >= -708) {
		return math.Exp(x)
	}
	// ln2 split in two so that k·ln2Hi is exact for |k| < 2^20.
	const ln2Hi, ln2Lo = 6.93147180369123816490e-01, 1.90821492927058770002e-10
	k := math.Floor(x*math.Log2E + 0.5)
	r := x - k*ln2Hi - k*ln2Lo
	// Estrin's scheme: the powers of r let the terms be computed side by
	// side instead of in one chain of twelve dependent multiply-adds.
	r2 := r * r
	r4 := r2 * r2
	b0 := 1 + r + r2*(1.0/2+r*(1.0/6))
	b1 := 1.0/24 + r*(1.0/120) + r2*(1.0/720+r*(1.0/5040))
	b2 := 1.0/40320 + r*(1.0/362880) + r2*(1.0/3628800+r*(1.0/39916800))
	p := b0 + r4*(b1+r4*b2)
	return p * math.Float64frombits(uint64(int64(k)+1023)<<52)
}

// logAtLeast1 is log(x) for finite x >= 1, as a row's Σexp(l_i − max) is:
// x = m·2^e with m in [√½, √2), and log m = 2·atanh(s) for s =
// (m−1)/(m+1), |s| < 0.172, by its series to s^17 (within 1e-14 of
// math.Log).
func logAtLeast1(x float64) float64 {
	if !(x >= 1) || math.IsInf(x, 1) {
		return math.Log(x)
	}
	bits := math.Float64bits(x)
	e := int64(bits>>52) - 1023
	m := math.Float64frombits(bits&(1<<52-1) | 1023<<52)
	if m > math.Sqrt2 {
		m *= 0.5
		e++
	}
	s := (m - 1) / (m + 1)
	s2 := s * s
	s4 := s2 * s2
	p := 1 + s2*(1.0/3) + s4*(1.0/5+s2*(1.0/7)) + s4*s4*(1.0/9+s2*(1.0/11)+s4*(1.0/13+s2*(1.0/15)+s4*(1.0/17)))
	return float64(e)*math.Ln2 + 2*s*p
}

// GreedyCategorical returns the action with the largest logit, the lowest
// index among ties, or -1 for empty logits. NaN logits are never chosen.
func GreedyCategorical(logits []float32) int32 {
	best := int32(-1)
	for i, v := range logits {
		if best < 0 && !math.IsNaN(float64(v)) || best >= 0 && v > logits[best] {
			best = int32(i)
		}
	}
	return best
}

// CategoricalLogProb returns log p(a) under the categorical distribution
// with the given logits, computed as a log-softmax so it stays finite for
// large logits. It returns NaN if a is out of range.
func CategoricalLogProb(logits []float32, a int32) float32 {
	if a < 0 || int(a) >= len(logits) {
		return float32(math.NaN())
	}
	return float32(float64(logits[a]) - logSumExp(logits))
}

// CategoricalEntropy returns the entropy, in nats, of the categorical
// distribution with the given logits, or NaN for empty logits.
func CategoricalEntropy(logits []float32) float32 {
	if len(logits) == 0 {
		return float32(math.NaN())
	}
	return float32(entropy(logits, logSumExp(logits)))
}

// entropy is the categorical entropy of logits whose log-sum-exp is lse.
func entropy(logits []float32, lse float64) float64 {
	var h float64
	for _, v := range logits {
		lp := float64(v) - lse
		// p log p -> 0 as p -> 0: skip zeros to avoid 0·(-Inf) = NaN, but let
		// a NaN through so that NaN logits give a NaN entropy.
		if p := expNeg(lp); p != 0 { // lp <= 0: lse >= every logit
			h -= p * lp
		}
	}
	return h
}

// CategoricalLogProbGrad adds scale · ∂log p(a)/∂logits to dLogits, that
// is scale·(1[j=a] − p_j) to element j. A policy-gradient loss
// −A·log p(a) uses scale = −A (times any averaging factor). If a is out of
// range or the lengths differ, it writes NaN into dLogits instead.
func CategoricalLogProbGrad(logits []float32, a int32, scale float32, dLogits []float32) {
	if len(dLogits) != len(logits) || a < 0 || int(a) >= len(logits) {
		poison(dLogits)
		return
	}
	lse := logSumExp(logits)
	s := float64(scale)
	for j, v := range logits {
		dLogits[j] -= float32(s * expNeg(float64(v)-lse))
	}
	dLogits[a] += scale
}

// CategoricalEntropyGrad adds scale · ∂H/∂logits to dLogits, that is
// −scale·p_j·(log p_j + H) to element j. An entropy bonus subtracted from
// the loss uses a negative scale. If the lengths differ or logits is empty,
// it writes NaN into dLogits instead.
func CategoricalEntropyGrad(logits []float32, scale float32, dLogits []float32) {
	if len(dLogits) != len(logits) || len(logits) == 0 {
		poison(dLogits)
		return
	}
	lse := logSumExp(logits)
	h := entropy(logits, lse)
	s := float64(scale)
	for j, v := range logits {
		lp := float64(v) - lse
		if p := expNeg(lp); p != 0 {
			dLogits[j] -= float32(s * p * (lp + h))
		}
	}
}

// SampleGaussian draws out = mean + exp(logStd)·z with z standard normal,
// elementwise, and returns the log-density of out. All three slices must
// have the same length; otherwise out is left alone and NaN is returned
// (also when rng is nil).
func SampleGaussian(mean, logStd []float32, rng *rand.Rand, out []float32) (logProb float32) {
	if len(logStd) != len(mean) || len(out) != len(mean) || rng == nil {
		return float32(math.NaN())
	}
	var lp float64
	for i, mu := range mean {
		ls := float64(logStd[i])
		z := rng.NormFloat64()
		out[i] = float32(float64(mu) + math.Exp(ls)*z)
		// Use z itself rather than recomputing it from the rounded out[i]:
		// it is the exact standardised value of the draw.
		lp += -0.5*z*z - ls - halfLog2Pi
	}
	return float32(lp)
}

// GaussianLogProb returns the log-density of action under the diagonal
// Gaussian with the given mean and log standard deviations, or NaN if the
// lengths differ.
func GaussianLogProb(mean, logStd, action []float32) float32 {
	if len(logStd) != len(mean) || len(action) != len(mean) {
		return float32(math.NaN())
	}
	var lp float64
	for i, mu := range mean {
		ls := float64(logStd[i])
		z := (float64(action[i]) - float64(mu)) * math.Exp(-ls)
		lp += -0.5*z*z - ls - halfLog2Pi
	}
	return float32(lp)
}

// GaussianLogProbGrad adds scale · ∂log p(action)/∂mean to dMean and
// scale · ∂log p(action)/∂logStd to dLogStd: with z = (action−mean)/std,
// these are scale·z/std and scale·(z²−1). Either destination may be nil to
// skip it. If the lengths differ, it writes NaN into both instead.
func GaussianLogProbGrad(mean, logStd, action []float32, scale float32, dMean, dLogStd []float32) {
	n := len(mean)
	if len(logStd) != n || len(action) != n ||
		(dMean != nil && len(dMean) != n) || (dLogStd != nil && len(dLogStd) != n) {
		poison(dMean)
		poison(dLogStd)
		return
	}
	s := float64(scale)
	for i, mu := range mean {
		invStd := math.Exp(-float64(logStd[i]))
		z := (float64(action[i]) - float64(mu)) * invStd
		if dMean != nil {
			dMean[i] += float32(s * z * invStd)
		}
		if dLogStd != nil {
			dLogStd[i] += float32(s * (z*z - 1))
		}
	}
}

// GaussianEntropy returns the entropy, in nats, of a diagonal Gaussian with
// the given log standard deviations. It does not depend on the mean.
func GaussianEntropy(logStd []float32) float32 {
	var h float64
	for _, ls := range logStd {
		h += float64(ls) + 0.5 + halfLog2Pi
	}
	return float32(h)
}

// GaussianEntropyGrad adds scale · ∂H/∂logStd, which is scale for every
// element, to dLogStd.
func GaussianEntropyGrad(logStd []float32, scale float32, dLogStd []float32) {
	if len(dLogStd) != len(logStd) {
		poison(dLogStd)
		return
	}
	for i := range dLogStd {
		dLogStd[i] += scale
	}
}

// poison fills g with NaN so that a misused gradient helper cannot go
// unnoticed: the NaN reaches the loss, ClipGradNorm's norm and the update.
func poison(g []float32) {
	nan := float32(math.NaN())
	for i := range g {
		g[i] = nan
	}
}
