package env

import (
	"sync"

	"github.com/distrl/distrl/api"
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
	return api.RegisterEnv(SimpleSpreadName, newSimpleSpreadEnv)
})

// Register adds the built-in environments to the api registry under
// [CartPoleName] and [SimpleSpreadName]. Calling it again is a no-op that
// returns the first call's result.
func Register() error { return registerOnce() }
