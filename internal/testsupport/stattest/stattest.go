package stattest

import (
	"fmt"

	"gonum.org/v1/gonum/stat/distuv"
)

// ChiSquare tests observed counts against expected probabilities (which
// sum to 1) and returns the statistic, the degrees of freedom and the
// p-value: the chance of a statistic at least this large if the counts
// were drawn from the probabilities. Bins whose expected count is below 5
// are pooled, as the test's approximation needs.
func ChiSquare(observed []int, probs []float64) (stat float64, dof int, p float64, err error) {
	if len(observed) != len(probs) {
		return 0, 0, 0, fmt.Errorf("stattest: %d counts, %d probabilities", len(observed), len(probs))
	}
	total := 0
	for _, o := range observed {
		total += o
	}
	var obs, exp []float64
	var po, pe float64
	for i, o := range observed {
		e := probs[i] * float64(total)
		if e == 0 && o > 0 {
			return 0, 0, 0, fmt.Errorf("stattest: bin %d observed %d times with probability 0", i, o)
		}
		po += float64(o)
		pe += e
		if pe >= 5 {
			obs, exp = append(obs, po), append(exp, pe)
			po, pe = 0, 0
		}
	}
	if len(exp) > 0 { // the remainder joins the last bin
		obs[len(obs)-1] += po
		exp[len(exp)-1] += pe
	}
	if len(exp) < 2 {
		return 0, 0, 0, fmt.Errorf("stattest: %d samples are too few for a test", total)
	}
	for i := range obs {
		d := obs[i] - exp[i]
		stat += d * d / exp[i]
	}
	dof = len(obs) - 1
	return stat, dof, 1 - distuv.ChiSquared{K: float64(dof)}.CDF(stat), nil
}
