// Package panel is the client side of a trial's members: the ControlPanel
// that resolves workers' names, keeps one connection per address and makes
// plain, async and group requests, each naming its worker, and that reads
// their status and loop records to tell LOST and HUNG workers apart.
//
// It imports the contract (worker/member), not the worker base (package
// worker): the controller and rlctl drive workers without linking the loop
// that runs them.
package panel
