"""Environments as gymnasium writes them: numpy observations, rewards and
spaces. Skipped where numpy is not installed (it is optional)."""

import sys
import types
import unittest

from distrl import envhost, wire

try:
    import numpy as np
except ImportError:  # pragma: no cover - depends on the machine
    np = None


class _Space:
    pass


def _box(low, high, shape):
    s = _Space()
    s.__class__ = type("Box", (), {})
    s.low = np.full(shape, low, dtype=np.float32)
    s.high = np.full(shape, high, dtype=np.float32)
    s.shape = shape
    return s


class NumpyEnv:
    """Observations are float64 arrays of shape (2, 2); actions a Box(3)."""

    def __init__(self):
        self.observation_space = _box(-np.inf, np.inf, (2, 2))
        self.action_space = _box(-1.0, 1.0, (3,))
        self.rng = np.random.default_rng(0)

    def reset(self, seed=None, options=None):
        self.rng = np.random.default_rng(seed)
        self.t = 0
        return self.rng.standard_normal((2, 2)), {}

    def step(self, action):
        assert isinstance(action, np.ndarray) and action.shape == (3,) and action.dtype == np.float32
        self.t += 1
        obs = np.full((2, 2), float(action.sum()))
        return obs, np.float32(action[0]), np.bool_(False), self.t >= 2, {"sum": np.float64(action.sum()), "t": np.int64(self.t)}


@unittest.skipIf(np is None, "numpy not installed")
class NumpyTest(unittest.TestCase):
    def setUp(self):
        mod = types.ModuleType("numpy_envs_for_test")
        mod.make_env = NumpyEnv
        sys.modules[mod.__name__] = mod
        self.addCleanup(sys.modules.pop, mod.__name__)

    def run_host(self):
        h = envhost.Host()
        rep = h.handle({"op": "init", "module": "numpy_envs_for_test", "n": 2})
        self.assertEqual(rep["observation_space"]["shape"], [2, 2])
        self.assertEqual(rep["action_space"]["kind"], "Box")
        out = h.handle({"op": "batch", "reset_envs": [0, 1], "seeds": [3, 3]})
        obs, shape, _ = wire.decode(out["reset_obs"])
        self.assertEqual(shape, [2, 1, 4])
        want = np.random.default_rng(3).standard_normal((2, 2)).astype(np.float32).ravel().tolist()
        self.assertEqual(obs[:4], want)
        acts = wire.encode([0.5, 0.25, 0.0, -1.0, 1.0, 1.0], [2, 1, 3], "float32")
        step = h.handle({"op": "batch", "step_envs": [0, 1], "actions": acts})["step"]
        self.assertEqual(wire.decode(step["obs"])[0], [0.75] * 4 + [1.0] * 4)
        self.assertEqual(wire.decode(step["rewards"])[0], [0.5, -1.0])
        self.assertEqual(wire.decode(step["info"]["sum"])[0], [0.75, 1.0])
        self.assertEqual(wire.decode(step["info"]["t"])[0], [1.0, 1.0])
        step = h.handle({"op": "batch", "step_envs": [1], "actions": wire.encode([0.0] * 3, [1, 1, 3], "float32")})["step"]
        self.assertEqual(wire.decode(step["truncated"])[0], [1])
        self.assertEqual(wire.decode(step["terminated"])[0], [0])

    def test_with_numpy(self):
        self.run_host()

    def test_mixed_rows(self):
        # A list observation first, then arrays: one buffer takes both.
        buf = envhost.ObsBuffer(3, 2)
        buf.add(0, [1.0, 2.0])
        buf.add(1, np.array([3.0, 4.0]))
        buf.add(2, [5, 6])
        self.assertEqual(wire.decode(buf.encode([3, 2]))[0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        with self.assertRaises(envhost.HostError):
            buf.add(0, np.zeros(3))


if __name__ == "__main__":
    unittest.main()
