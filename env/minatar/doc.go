// Package minatar implements the five games of MinAtar (Young & Tian 2019,
// "MinAtar: An Atari-inspired testbed for thorough and reproducible
// reinforcement learning experiments", arXiv:1903.03176) as [api.Env]
// environments: Asterix, Breakout, Freeway, Seaquest and Space Invaders.
//
// Every game is played on a 10x10 grid and observed as a float32 Box of
// shape [10, 10, C] (row, column, channel; channels last), with one binary
// channel per kind of object in the order MinAtar defines. Actions are
// MinAtar's full set of six (no-op, left, up, right, down, fire) or, with
// [Options.MinimalActions], the game's minimal set; with probability
// [Options.Sticky] (0.1 by default) the previous action is repeated instead
// of the chosen one. Asterix, Seaquest and Space Invaders get harder as the
// episode goes on unless [Options.Ramping] is off.
//
// The games play as the original implementation (kenjyoung/MinAtar
// v1.0.15) does, rule for rule, quirks included; the Go is our own.
// docs/minatar.md states each rule, and TestConformance measures random
// and scripted returns against the original's. Each Env draws its randomness from its own PCG
// generator seeded by Reset, so the same seed and actions give the same
// trajectory. Step does not allocate: the Step it returns uses the Env's
// own buffers, valid until the next call.
//
// [Factory] builds the environments for the api registry; package env
// registers them as minatar-asterix, minatar-breakout, minatar-freeway,
// minatar-seaquest and minatar-space_invaders.
package minatar
