"""CartPole-v1 in plain Python, the same as distrl's built-in Go CartPole.

Dynamics, constants and order of operations are gymnasium's; the initial
state is drawn like the Go environment does (Go's PCG seeded with the
seed), and sin/cos are Go's, so a seed and a sequence of actions give the
Go CartPole's trajectory to the last bit. Use it as the template of your
own environment: ``make_env`` is the factory distrl calls.
"""

import math

from distrl.examples.gomath import PCG, sincos
from distrl.spaces import Box, Discrete

GRAVITY = 9.8
MASS_CART = 1.0
MASS_POLE = 0.1
TOTAL_MASS = MASS_POLE + MASS_CART
LENGTH = 0.5  # half the pole's length
POLE_MASS_LENGTH = MASS_POLE * LENGTH
FORCE_MAG = 10.0
TAU = 0.02
X_THRESHOLD = 2.4
THETA_THRESHOLD = 12 * 2 * math.pi / 360
PCG_STREAM = 0x9E3779B97F4A7C15
FLOAT32_MAX = 3.4028234663852886e38


class CartPole:
    """Push the cart left (0) or right (1); reward 1 per step; terminated
    when |x| > 2.4 or |theta| > 12 degrees, truncated after max_episode_steps."""

    def __init__(self, max_episode_steps=500):
        self.max_episode_steps = int(max_episode_steps)
        high = [2 * X_THRESHOLD, FLOAT32_MAX, 2 * THETA_THRESHOLD, FLOAT32_MAX]
        self.observation_space = Box([-h for h in high], high, shape=(4,))
        self.action_space = Discrete(2)
        self.rng = PCG(0, PCG_STREAM)
        self.state = (0.0, 0.0, 0.0, 0.0)
        self.steps = 0

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.rng.seed(seed, PCG_STREAM)
        self.state = tuple(-0.05 + 0.1 * self.rng.float64() for _ in range(4))
        self.steps = 0
        return list(self.state), {}

    def step(self, action):
        if action not in (0, 1):
            raise ValueError(f"action {action!r} is not 0 or 1")
        force = FORCE_MAG if action == 1 else -FORCE_MAG
        x, x_dot, theta, theta_dot = self.state
        sin, cos = sincos(theta)
        temp = (force + POLE_MASS_LENGTH * (theta_dot * theta_dot) * sin) / TOTAL_MASS
        theta_acc = (GRAVITY * sin - cos * temp) / (LENGTH * (4.0 / 3.0 - MASS_POLE * (cos * cos) / TOTAL_MASS))
        x_acc = temp - POLE_MASS_LENGTH * theta_acc * cos / TOTAL_MASS
        self.state = (x + TAU * x_dot, x_dot + TAU * x_acc, theta + TAU * theta_dot, theta_dot + TAU * theta_acc)
        self.steps += 1
        terminated = abs(self.state[0]) > X_THRESHOLD or abs(self.state[2]) > THETA_THRESHOLD
        truncated = self.steps >= self.max_episode_steps
        return list(self.state), 1.0, terminated, truncated, {"x": self.state[0]}

    def close(self):
        pass


def make_env(max_episode_steps=500):
    """The factory distrl calls (env_config: {module: distrl.examples.cartpole})."""
    return CartPole(max_episode_steps)
