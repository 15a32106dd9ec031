import math
import unittest

from distrl import wire


class WireTest(unittest.TestCase):
    def test_round_trip(self):
        for dtype, values in [("float32", [1.5, -2.0, math.inf]), ("float64", [0.1, 1e300]),
                              ("int64", [-(2**63), 2**63 - 1]), ("uint8", [0, 255]), ("int32", [-1, 7])]:
            m = wire.encode(values, [len(values)], dtype)
            self.assertEqual(m["dtype"], dtype)
            got, shape, _ = wire.decode(m)
            self.assertEqual(shape, [len(values)])
            self.assertEqual(got, values)

    def test_little_endian_bytes(self):
        self.assertEqual(wire.encode([1], [1], "int32")["data"], b"\x01\x00\x00\x00")
        self.assertEqual(wire.encode([1.0], [], "float32")["data"], b"\x00\x00\x80\x3f")

    def test_float32_rounding_and_overflow(self):
        got, _, _ = wire.decode(wire.encode([0.1, 1e39], [2]))
        self.assertEqual(got[0], 0.10000000149011612)
        self.assertEqual(got[1], math.inf)

    def test_rejects(self):
        with self.assertRaises(wire.WireError):
            wire.encode([1, 2], [3])
        with self.assertRaises(wire.WireError):
            wire.encode([1], [1], "complex64")
        with self.assertRaises(wire.WireError):
            wire.decode({"dtype": "float32", "shape": [2], "data": b"\x00" * 4})
        with self.assertRaises(wire.WireError):
            wire.decode({"dtype": "float32", "shape": [-1], "data": b""})
        with self.assertRaises(wire.WireError):
            wire.decode([1, 2])


if __name__ == "__main__":
    unittest.main()
