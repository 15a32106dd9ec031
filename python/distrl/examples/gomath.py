"""Go's math/rand/v2 PCG generator and math.Sincos, in pure Python.

They let a Python environment reproduce a Go environment bit for bit:
Python's math.sin and math.cos come from C's libm, which may round the last
bit differently from Go's Cephes-based Sincos, and a CartPole trajectory
amplifies such a bit within a few dozen steps.
"""

_M64 = (1 << 64) - 1
_MUL = (2549297995355413924 << 64) | 4865540595714422341
_INC = (6364136223846793005 << 64) | 1442695040888963407
_CHEAP_MUL = 0xDA942042E4DD58B5


class PCG:
    """Go's rand.PCG (128-bit LCG, DXSM output) with rand.Rand.Float64."""

    def __init__(self, seed1=0, seed2=0):
        self.seed(seed1, seed2)

    def seed(self, seed1, seed2):
        self.state = ((seed1 & _M64) << 64) | (seed2 & _M64)

    def uint64(self):
        self.state = (self.state * _MUL + _INC) & ((1 << 128) - 1)
        hi, lo = self.state >> 64, self.state & _M64
        hi ^= hi >> 32
        hi = (hi * _CHEAP_MUL) & _M64
        hi ^= hi >> 48
        return (hi * (lo | 1)) & _M64

    def float64(self):
        return (self.uint64() & ((1 << 53) - 1)) / (1 << 53)


_SIN = (1.58962301576546568060e-10, -2.50507477628578072866e-8, 2.75573136213857245213e-6,
        -1.98412698295895385996e-4, 8.33333333332211858878e-3, -1.66666666666666307295e-1)
_COS = (-1.13585365213876817300e-11, 2.08757008419747316778e-9, -2.75573141792967388112e-7,
        2.48015872888517045348e-5, -1.38888888888730564116e-3, 4.16666666666665929218e-2)
_PI4A = 7.85398125648498535156e-1
_PI4B = 3.77489470793079817668e-8
_PI4C = 2.69515142907905952645e-15
_4_OVER_PI = float.fromhex("0x1.45f306dc9c883p+0")  # Go's constant 4/Pi, rounded once
_REDUCE_THRESHOLD = 1 << 29


def sincos(x):
    """Go's math.Sincos for |x| < 2**29 (far beyond any CartPole angle)."""
    if x == 0:
        return x, 1.0
    if x != x or abs(x) == float("inf") or abs(x) >= _REDUCE_THRESHOLD:
        raise ValueError(f"sincos({x}) is outside the ported range")
    sin_sign = cos_sign = False
    if x < 0:
        x = -x
        sin_sign = True
    j = int(x * _4_OVER_PI)
    y = float(j)
    if j & 1:
        j += 1
        y += 1
    j &= 7
    z = ((x - y * _PI4A) - y * _PI4B) - y * _PI4C
    if j > 3:
        j -= 4
        sin_sign, cos_sign = not sin_sign, not cos_sign
    if j > 1:
        cos_sign = not cos_sign
    zz = z * z
    c = 1.0 - 0.5 * zz + zz * zz * ((((((_COS[0] * zz) + _COS[1]) * zz + _COS[2]) * zz + _COS[3]) * zz + _COS[4]) * zz + _COS[5])
    s = z + z * zz * ((((((_SIN[0] * zz) + _SIN[1]) * zz + _SIN[2]) * zz + _SIN[3]) * zz + _SIN[4]) * zz + _SIN[5])
    if j == 1 or j == 2:
        s, c = c, s
    if cos_sign:
        c = -c
    if sin_sign:
        s = -s
    return s, c
