// Package stattest holds the statistics tests use to check samplers
// against the distributions they claim (chi-square goodness of fit).
package stattest
