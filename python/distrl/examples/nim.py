"""A two-player game whose players take turns, in PettingZoo's parallel API
with ``acting()``: distrl asks only the player to move for an action.

A pile of ``stones`` (default 10); the players take 1, 2 or 3 in turn
(actions 0, 1, 2), ``player_0`` first, and whoever takes the last stone
wins: +1 to the winner and -1 to the loser on that step, 0 before. The
winning play leaves a multiple of 4. Each player observes the pile as a
one-hot vector of ``stones + 1`` values, whether it is to move, and which
takes the pile allows: ``action_mask_indices`` points a policy at those
three flags, so that it never takes more than is left (a take that does
would take the rest).
"""

from distrl.spaces import Box, Discrete


class Nim:
    def __init__(self, stones=10):
        self.stones = int(stones)
        if self.stones < 1:
            raise ValueError(f"stones must be at least 1, got {stones}")
        self.possible_agents = ["player_0", "player_1"]
        self.agents = []
        self._obs_space = Box(0.0, 1.0, shape=(self.stones + 5,))
        # Action i (take i + 1) is available where the observation holds 1
        # at action_mask_indices[i].
        self.action_mask_indices = [self.stones + 2 + i for i in range(3)]
        self._act_space = Discrete(3)
        self.left = self.stones
        self.mover = 0

    def observation_space(self, agent):
        return self._obs_space

    def action_space(self, agent):
        return self._act_space

    def acting(self):
        """The player whose action the next step applies."""
        return [self.possible_agents[self.mover]]

    def reset(self, seed=None, options=None):
        self.left, self.mover = self.stones, 0
        self.agents = list(self.possible_agents)
        return self._observe(), {a: {} for a in self.agents}

    def _observe(self):
        out = {}
        for i, a in enumerate(self.possible_agents):
            o = [0.0] * (self.stones + 5)
            o[self.left] = 1.0
            o[self.stones + 1] = 1.0 if i == self.mover else 0.0
            for take in range(3):
                o[self.action_mask_indices[take]] = 1.0 if take + 1 <= self.left else 0.0
            out[a] = o
        return out

    def step(self, actions):
        me, other = self.possible_agents[self.mover], self.possible_agents[1 - self.mover]
        self.left -= min(int(actions[me]) + 1, self.left)
        won = self.left == 0
        rewards = {me: 1.0 if won else 0.0, other: -1.0 if won else 0.0}
        self.mover = 1 - self.mover
        obs = self._observe()
        terms = {a: won for a in self.possible_agents}
        truncs = {a: False for a in self.possible_agents}
        if won:
            self.agents = []
        return obs, rewards, terms, truncs, {a: {} for a in self.possible_agents}

    def close(self):
        pass


def make_env(stones=10):
    """The factory distrl calls (env_config: {module: distrl.examples.nim})."""
    return Nim(stones)
