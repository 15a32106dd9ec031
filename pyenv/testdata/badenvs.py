"""Environments that fail in every way the Go side must report clearly."""

import os
import time

from distrl.examples.cartpole import CartPole
from distrl.examples.nim import Nim
from distrl.spaces import Box, Discrete, MultiDiscrete


class RaiseAtStep(CartPole):
    def step(self, action):
        if self.steps == 2:
            raise ValueError("the pole broke at step 3")
        return super().step(action)


class HangAtStep(CartPole):
    def step(self, action):
        if self.steps == 2:
            time.sleep(3600)
        return super().step(action)


class DieAtStep(CartPole):
    def step(self, action):
        if self.steps == 2:
            os._exit(3)
        return super().step(action)


class MultiDiscreteActions(CartPole):
    def __init__(self):
        super().__init__()
        self.action_space = MultiDiscrete([3, 3])


class Dict:  # named like gymnasium's Dict space
    pass


class DictObservations(CartPole):
    def __init__(self):
        super().__init__()
        self.observation_space = Dict()


class MultiDiscreteObservations:
    observation_space = MultiDiscrete([4, 5, 6])
    action_space = Box(-1.0, 1.0, shape=(2,))

    def reset(self, seed=None, options=None):
        self.t = 0
        return [1, 2, 3], {}

    def step(self, action):
        self.t += 1
        return [self.t % 4, 0, 5], float(sum(action)), False, self.t >= 3, {"norm": sum(a * a for a in action)}


def raise_at_step(**kwargs):
    return RaiseAtStep()


def hang_at_step(**kwargs):
    return HangAtStep()


def die_at_step(**kwargs):
    return DieAtStep()


def multidiscrete_actions(**kwargs):
    return MultiDiscreteActions()


def dict_observations(**kwargs):
    return DictObservations()


def multidiscrete_observations(**kwargs):
    return MultiDiscreteObservations()


def factory_raises(**kwargs):
    raise RuntimeError(f"no licence for {kwargs}")


not_callable = 42


class BadActing(Nim):
    """Nim whose acting() names nobody, or an agent it does not have."""

    def __init__(self, names):
        super().__init__(stones=5)
        self.names = names

    def acting(self):
        return self.names


def acting_nobody(**kwargs):
    return BadActing([])


def acting_stranger(**kwargs):
    return BadActing(["player_7"])


def mask_too_short(**kwargs):
    env = Nim(stones=5)
    env.action_mask_indices = env.action_mask_indices[:2]
    return env


def mask_out_of_range(**kwargs):
    env = Nim(stones=5)
    env.action_mask_indices = [0, 1, 99]
    return env
