"""Example environments written in plain Python (no gymnasium, no numpy).

- ``distrl.examples.cartpole``: CartPole-v1, step for step the same as
  distrl's built-in Go CartPole (same seeding, same arithmetic).
- ``distrl.examples.spread``: a small cooperative multi-agent environment
  in PettingZoo's parallel API.
"""
