"""A cooperative multi-agent environment in PettingZoo's parallel API.

``n_agents`` agents move on a plane (actions: stay, left, right, down, up)
to cover as many landmarks; every agent gets the same reward, minus the sum
over landmarks of the distance to the nearest agent. Episodes are truncated
after ``max_cycles`` steps. Each agent observes its own position and
velocity, the landmarks and the other agents relative to itself.
"""

import math
import random

from distrl.spaces import Box, Discrete

_MOVES = ((0.0, 0.0), (-1.0, 0.0), (1.0, 0.0), (0.0, -1.0), (0.0, 1.0))


class Spread:
    def __init__(self, n_agents=3, max_cycles=25):
        self.n = int(n_agents)
        self.max_cycles = int(max_cycles)
        self.possible_agents = [f"agent_{i}" for i in range(self.n)]
        self.agents = []
        dim = 4 + 2 * self.n + 2 * (self.n - 1)
        self._obs_space = Box(-math.inf, math.inf, shape=(dim,))
        self._act_space = Discrete(len(_MOVES))
        self.rng = random.Random(0)

    def observation_space(self, agent):
        return self._obs_space

    def action_space(self, agent):
        return self._act_space

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.rng.seed(seed)
        u = self.rng.uniform
        self.pos = [[u(-1, 1), u(-1, 1)] for _ in range(self.n)]
        self.vel = [[0.0, 0.0] for _ in range(self.n)]
        self.landmarks = [[u(-1, 1), u(-1, 1)] for _ in range(self.n)]
        self.t = 0
        self.agents = list(self.possible_agents)
        return self._observe(), {a: {} for a in self.agents}

    def _observe(self):
        out = {}
        for i, a in enumerate(self.possible_agents):
            px, py = self.pos[i]
            o = [px, py, self.vel[i][0], self.vel[i][1]]
            for lx, ly in self.landmarks:
                o += [lx - px, ly - py]
            for j in range(self.n):
                if j != i:
                    o += [self.pos[j][0] - px, self.pos[j][1] - py]
            out[a] = o
        return out

    def step(self, actions):
        for i, a in enumerate(self.possible_agents):
            dx, dy = _MOVES[actions[a]]
            v = self.vel[i]
            v[0] = 0.75 * v[0] + 0.1 * dx
            v[1] = 0.75 * v[1] + 0.1 * dy
            self.pos[i][0] += v[0]
            self.pos[i][1] += v[1]
        self.t += 1
        cover = sum(min(math.dist(l, p) for p in self.pos) for l in self.landmarks)
        done = self.t >= self.max_cycles
        obs = self._observe()
        rewards = {a: -cover for a in self.agents}
        terms = {a: False for a in self.agents}
        truncs = {a: done for a in self.agents}
        infos = {a: {"coverage_distance": cover} for a in self.agents}
        if done:
            self.agents = []
        return obs, rewards, terms, truncs, infos

    def close(self):
        pass


def make_env(n_agents=3, max_cycles=25):
    """The factory distrl calls (env_config: {module: distrl.examples.spread})."""
    return Spread(n_agents, max_cycles)
