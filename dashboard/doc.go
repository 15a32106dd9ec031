// Package dashboard serves a live trial over HTTP: one self-contained page
// (the workers table with HUNG and LOST, curves of mean return, env
// steps/s and policy lag, the configuration and a worker's log tail), the
// JSON API the page polls, Prometheus HTTP service discovery (/sd) for the
// trial's workers and the dashboard itself, and the trial-level metrics
// (/metrics).
//
// What it shows comes from a Source; TrialSource is the one for a trial
// run by a controller: the workers' records and stats through a
// panel.ControlPanel, the rest from the trial directory. The controller's
// own dashboard (rlctl start --dashboard) and the one for a trial already
// running (rlctl dashboard) are the same Handler over a TrialSource.
//
// Security: a dashboard bound to loopback serves anyone on the machine, as
// the workers' own ports do. On any other address it requires a token
// (128 random bits in hex unless one is given): every request carries it as
// "Authorization: Bearer TOKEN" or "?token=TOKEN" (the page reads it from
// its own URL and passes it on to its API calls), and others get 401. The
// comparison takes constant time. The token travels in plain HTTP: on an
// untrusted network put the dashboard behind a TLS proxy, or reach it
// through an SSH tunnel to a loopback bind.
package dashboard
