import unittest

from distrl import envhost, wire
from distrl.examples import cartpole, spread
from distrl.examples.gomath import PCG, sincos


class GoMathTest(unittest.TestCase):
    def test_pcg_matches_go(self):
        # rand.New(rand.NewPCG(7, 0x9e3779b97f4a7c15)).Float64(), twice, from Go.
        r = PCG(7, 0x9E3779B97F4A7C15)
        self.assertEqual(r.float64(), 0.5437464358405968)
        self.assertEqual(r.float64(), 0.5925997767599991)

    def test_sincos_matches_go(self):
        # math.Sincos(0.1234567) from Go.
        self.assertEqual(sincos(0.1234567), (0.1231433268596996, 0.9923888960734724))
        self.assertEqual(sincos(0.0), (0.0, 1.0))


class HostTest(unittest.TestCase):
    def init(self, module, n=2, **kwargs):
        h = envhost.Host()
        rep = h.handle({"op": "init", "module": module, "factory": "make_env", "kwargs": kwargs, "n": n})
        return h, rep

    def test_cartpole_batch(self):
        h, rep = self.init("distrl.examples.cartpole", max_episode_steps=3)
        self.assertEqual(rep["agents"], ["agent_0"])
        self.assertEqual(rep["action_space"], {"kind": "Discrete", "n": 2, "start": 0})
        self.assertEqual(rep["observation_space"]["shape"], [4])
        out = h.handle({"op": "batch", "reset_envs": [0, 1], "seeds": [5, 5]})
        obs, shape, _ = wire.decode(out["reset_obs"])
        self.assertEqual(shape, [2, 1, 4])
        self.assertEqual(obs[:4], obs[4:])  # same seed, same start
        for t in range(3):
            out = h.handle({"op": "batch", "step_envs": [1, 0], "actions": wire.encode([1, 0], [2, 1], "int64")})
        step = out["step"]
        self.assertEqual(wire.decode(step["truncated"])[0], [1, 1])  # max_episode_steps=3
        self.assertEqual(wire.decode(step["rewards"])[0], [1.0, 1.0])
        self.assertIn("x", step["info"])

    def test_parallel_env(self):
        h, rep = self.init("distrl.examples.spread", n=1, n_agents=2, max_cycles=2)
        self.assertEqual(rep["agents"], ["agent_0", "agent_1"])
        dim = envhost._space_size(rep["observation_space"])
        h.handle({"op": "batch", "reset_envs": [0], "seeds": [1]})
        out = h.handle({"op": "batch", "step_envs": [0], "actions": wire.encode([1, 2], [1, 2], "int64")})
        self.assertEqual(wire.decode(out["step"]["obs"])[1], [1, 2, dim])
        r = wire.decode(out["step"]["rewards"])[0]
        self.assertEqual(r[0], r[1])  # shared reward

    def test_turns_and_mask(self):
        h, rep = self.init("distrl.examples.nim", n=2, stones=4)
        self.assertEqual(rep["action_mask"], [6, 7, 8])  # after the pile's 5 values and the turn flag
        out = h.handle({"op": "batch", "reset_envs": [0, 1], "seeds": [1, 2]})
        self.assertEqual(wire.decode(out["reset_acting"])[:2], ([1, 0, 1, 0], [2, 2]))
        # Env 0: player_0 takes 3 (1 left), player_1 takes the last one.
        out = h.handle({"op": "batch", "step_envs": [0], "actions": wire.encode([2, 0], [1, 2], "int64")})
        self.assertEqual(wire.decode(out["step"]["acting"])[0], [0, 1])
        obs = wire.decode(out["step"]["obs"])[0]
        self.assertEqual(obs[6:9], [1.0, 0.0, 0.0])  # one stone left: only "take 1" is available
        out = h.handle({"op": "batch", "step_envs": [0], "actions": wire.encode([0, 0], [1, 2], "int64")})
        step = out["step"]
        self.assertEqual(wire.decode(step["rewards"])[0], [-1.0, 1.0])
        self.assertEqual(wire.decode(step["terminated"])[0], [1, 1])
        self.assertEqual(wire.decode(step["acting"])[0], [1, 1])  # ended: everyone
        # Without acting() there is no acting at all.
        h2, rep2 = self.init("distrl.examples.spread", n=1, n_agents=2)
        self.assertNotIn("action_mask", rep2)
        self.assertNotIn("reset_acting", h2.handle({"op": "batch", "reset_envs": [0], "seeds": [1]}))

    def test_errors(self):
        h, _ = self.init("distrl.examples.cartpole")
        cases = [
            ({"op": "nope"}, "bad_request"),
            ({"op": "init", "module": "x", "n": 1}, "bad_request"),  # twice
            ({"op": "batch", "step_envs": [0], "actions": wire.encode([1.0], [1, 1], "float32")}, "bad_request"),
            ({"op": "batch", "step_envs": [7], "actions": wire.encode([1], [1, 1], "int64")}, "bad_request"),
            ({"op": "batch", "step_envs": [0], "actions": wire.encode([5], [1, 1], "int64")}, "env_error"),
        ]
        h.handle({"op": "batch", "reset_envs": [0], "seeds": [1]})
        for msg, typ in cases:
            with self.subTest(msg=msg):
                with self.assertRaises(envhost.HostError) as cm:
                    h.handle(msg)
                self.assertEqual(cm.exception.type, typ)

    def test_parallel_agents_must_share_spaces(self):
        from distrl.spaces import Discrete

        class Mixed:
            possible_agents = ["a", "b"]

            def observation_space(self, agent):
                return Discrete(3 if agent == "a" else 4)

            def action_space(self, agent):
                return Discrete(2)

        with self.assertRaises(envhost.HostError) as cm:
            envhost.adapt(Mixed())
        self.assertEqual(cm.exception.type, "unsupported_space")

    def test_not_an_env(self):
        with self.assertRaises(envhost.HostError) as cm:
            envhost.adapt(object())
        self.assertEqual(cm.exception.type, "unsupported_env")

    def test_box_actions_without_numpy(self):
        # With numpy absent, a Box action arrives as (nested) lists.
        from distrl.spaces import Box
        saved, envhost.np = envhost.np, None
        self.addCleanup(setattr, envhost, "np", saved)
        seen = []

        class Env:
            observation_space = Box(0.0, 1.0, shape=(1,))
            action_space = Box(-1.0, 1.0, shape=(2, 2))

            def reset(self, seed=None, options=None):
                return [0.5], {}

            def step(self, action):
                seen.append(action)
                return (0.25,), 1, False, False, {}

        h = envhost.Host()
        h.envs = [envhost.adapt(Env())]
        h.agents, h.obs_dim, h.action = ["agent_0"], 1, envhost.describe_space(Env.action_space)
        h.handle({"op": "batch", "reset_envs": [0], "seeds": [0]})
        out = h.handle({"op": "batch", "step_envs": [0], "actions": wire.encode([1.0, 2.0, 3.0, 4.0], [1, 1, 4], "float32")})
        self.assertEqual(seen, [[[1.0, 2.0], [3.0, 4.0]]])
        self.assertEqual(wire.decode(out["step"]["obs"])[0], [0.25])

    def test_spaces_described(self):
        self.assertEqual(envhost.describe_space(cartpole.Discrete(3, start=1)), {"kind": "Discrete", "n": 3, "start": 1})
        self.assertEqual(envhost.describe_space(spread.Spread(2).action_space("agent_0"))["n"], 5)
        self.assertEqual(envhost.describe_space(object()), {"kind": "object"})


if __name__ == "__main__":
    unittest.main()
