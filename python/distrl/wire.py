"""The tensor encoding of docs/protocol.md ("Numeric arrays").

A tensor travels as a msgpack map ``{"dtype": name, "shape": [...], "data":
bin}`` holding the raw little-endian values in row-major order. This module
needs no numpy: it works on flat Python lists with the ``array`` module.
"""

import array
import sys

# dtype name -> array typecode; every code's itemsize is checked below.
_CODES = {
    "float32": "f",
    "float64": "d",
    "int8": "b",
    "uint8": "B",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "uint64": "Q",
    "bool": "B",
}
_SIZES = {"float32": 4, "float64": 8, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2,
          "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "bool": 1}
for _name, _code in _CODES.items():
    assert array.array(_code).itemsize == _SIZES[_name], _name

_BIG = sys.byteorder == "big"


class WireError(ValueError):
    """A message does not follow the encoding."""


def _count(shape):
    n = 1
    for d in shape:
        if not isinstance(d, int) or isinstance(d, bool) or d < 0:
            raise WireError(f"bad shape {shape!r}")
        n *= d
    return n


def encode(values, shape, dtype="float32"):
    """Encodes the flat sequence ``values`` as a tensor of ``shape``.

    Floats are rounded to float32 as C does (round to nearest even);
    values out of float32's range become infinities rather than errors.
    """
    code = _CODES.get(dtype)
    if code is None:
        raise WireError(f"unsupported dtype {dtype!r}")
    shape = list(shape)
    if _count(shape) != len(values):
        raise WireError(f"{len(values)} values for shape {shape}")
    a = array.array(code, values)
    if _BIG:
        a.byteswap()
    return {"dtype": dtype, "shape": shape, "data": a.tobytes()}


def decode(msg):
    """Decodes a tensor map into ``(values, shape, dtype)``, values a flat list."""
    if not isinstance(msg, dict):
        raise WireError(f"tensor is a {type(msg).__name__}, want a map")
    dtype, shape, data = msg.get("dtype"), msg.get("shape"), msg.get("data")
    code = _CODES.get(dtype)
    if code is None:
        raise WireError(f"unsupported dtype {dtype!r}")
    if not isinstance(shape, (list, tuple)) or not isinstance(data, (bytes, bytearray)):
        raise WireError("tensor needs a shape array and bin data")
    n = _count(shape)
    if len(data) != n * _SIZES[dtype]:
        raise WireError(f"{len(data)} data bytes for shape {list(shape)} of {dtype}")
    a = array.array(code)
    a.frombytes(data)
    if _BIG:
        a.byteswap()
    values = a.tolist()
    if dtype == "bool":
        values = [bool(v) for v in values]
    return values, list(shape), dtype
