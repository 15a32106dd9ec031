"""Minimal Box, Discrete and MultiDiscrete spaces.

They carry what the environment host describes to distrl, under the same
attribute names as gymnasium's, so an environment can be written without
gymnasium (which distrl never imports). Gymnasium's spaces work as they are.
"""


def _flat(x):
    if hasattr(x, "tolist"):
        x = x.tolist()
    if isinstance(x, (list, tuple)):
        out = []
        for v in x:
            out.extend(_flat(v))
        return out
    return [x]


class Discrete:
    """Integers in ``[start, start + n)``."""

    def __init__(self, n, start=0):
        if int(n) < 1:
            raise ValueError(f"Discrete needs n >= 1, got {n}")
        self.n = int(n)
        self.start = int(start)

    def contains(self, x):
        return isinstance(x, int) and self.start <= x < self.start + self.n

    def __repr__(self):
        return f"Discrete({self.n})" if self.start == 0 else f"Discrete({self.n}, start={self.start})"


class MultiDiscrete:
    """A vector of integers, element i in ``[0, nvec[i])``."""

    def __init__(self, nvec):
        self.nvec = [int(v) for v in _flat(nvec)]
        self.shape = (len(self.nvec),)

    def __repr__(self):
        return f"MultiDiscrete({self.nvec})"


class Box:
    """A float array of ``shape`` with per-element bounds.

    ``low`` and ``high`` are scalars (the same bound for every element) or
    flat sequences of one bound per element, in row-major order.
    """

    def __init__(self, low, high, shape=None, dtype="float32"):
        if shape is None:
            shape = (len(_flat(low)),)
        self.shape = tuple(int(d) for d in (shape if isinstance(shape, (list, tuple)) else (shape,)))
        n = 1
        for d in self.shape:
            n *= d
        self.low = self._bounds(low, n)
        self.high = self._bounds(high, n)
        self.dtype = dtype

    @staticmethod
    def _bounds(b, n):
        flat = _flat(b)
        if len(flat) == 1:
            flat = flat * n
        if len(flat) != n:
            raise ValueError(f"{len(flat)} bounds for {n} elements")
        return [float(v) for v in flat]

    def __repr__(self):
        return f"Box(shape={self.shape})"
