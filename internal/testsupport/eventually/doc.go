// Package eventually is the one way tests wait for something that another
// goroutine or process makes true (a state reached, a record written, a
// batch arrived): check a condition until it holds or a timeout passes.
// Tests wait on a condition or a signal, never a fixed settle sleep.
package eventually
