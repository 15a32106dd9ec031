"""distrl's Python side.

- ``distrl.envhost``: the environment host a distrl actor starts
  (``python3 -m distrl.envhost ADDRESS``); it builds gymnasium-style or
  PettingZoo-parallel environments with a factory of yours and steps them
  in batches for the actor.
- ``distrl.client``: a client for the control protocol, to drive a running
  trial's workers from a script or a notebook.
- ``distrl.spaces``: Box, Discrete and MultiDiscrete for environments
  written without gymnasium (gymnasium's own spaces work as well).
- ``distrl.wire``: the tensor encoding both use.

Only pyzmq and msgpack are required; numpy is used when present.
"""

__version__ = "0.1.0"
