package env

import (
	"sync"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/env/minatar"
	"github.com/distrl/distrl/pyenv"
)

// Registry names of the built-in environments.
const (
	CartPoleName     = "CartPole-v1"
	SimpleSpreadName = "simple_spread"
)

var registerOnce = sync.OnceValue(func() error {
	if err := api.RegisterEnv(CartPoleName, newCartPoleEnv); err != nil {
		return err
	}
	if err := api.RegisterEnv(SimpleSpreadName, newSimpleSpreadEnv); err != nil {
		return err
	}
	if err := api.RegisterEnv(Connect4Name, newConnect4Env); err != nil {
		return err
	}
	for _, g := range minatar.Games() {
		if err := api.RegisterEnv(minatar.EnvName(g), minatar.Factory(g)); err != nil {
			return err
		}
	}
	return pyenv.Register()
})

// Register adds the built-in environments to the api registry under
// [CartPoleName], [SimpleSpreadName] and [Connect4Name], the MinAtar games under
// minatar-<game> (minatar-breakout, ...; package minatar), and Python
// environments under pyenv.Name ("python"). Calling it again is a no-op that
// returns the first call's result.
func Register() error { return registerOnce() }
