import unittest

import _paths  # noqa: F401
from gadfly_cuda import roofline


class RooflineTest(unittest.TestCase):
    def test_pairs_match_brute_force(self):
        for sq, sk in ((1, 1), (5, 5), (7, 3), (3, 7), (64, 64), (100, 37)):
            brute = sum(1 for i in range(sq) for j in range(sk) if j <= i)
            self.assertEqual(roofline.attention_pairs(sq, sk, True), brute, (sq, sk))
            self.assertEqual(roofline.attention_pairs(sq, sk, False), sq * sk)

    def test_flops_and_bytes(self):
        # FlashAttention's formula: 4*B*H*S*S*D, about half when causal.
        self.assertEqual(roofline.attention_flops(2, 16, 2048, 2048, 128, False), 4 * 2 * 16 * 2048 * 2048 * 128)
        causal = roofline.attention_flops(2, 16, 2048, 2048, 128, True)
        self.assertAlmostEqual(causal / (4 * 2 * 16 * 2048 * 2048 * 128), (2048 + 1) / (2 * 2048))
        self.assertEqual(roofline.attention_bytes(1, 1, 10, 20, 8), 2 * (10 * 8 + 20 * 16 + 10 * 8))
        self.assertEqual(roofline.attention_bytes(1, 4, 10, 20, 8, h_kv=1), 2 * (4 * 10 * 8 + 20 * 16 + 4 * 10 * 8))

    def test_bound_on_h200(self):
        dev = roofline.device_for("NVIDIA H200")
        self.assertEqual(dev.name, "H200")
        # compute-bound: 989.4 TFLOP/s dense bf16, never the sparse 1979
        f = roofline.attention_flops(1, 16, 4096, 4096, 64, False)
        b = roofline.attention_bytes(1, 16, 4096, 4096, 64)
        self.assertAlmostEqual(roofline.bound_us(f, b, dev, "bfloat16"), f / 989.4e12 * 1e6)
        # memory-bound: 4.8 TB/s
        self.assertAlmostEqual(roofline.bound_us(1.0, 4.8e9, dev, "bfloat16"), 1000.0)
        with self.assertRaises(KeyError):
            roofline.bound_us(1.0, 1.0, dev, "int4")

    def test_device_names(self):
        self.assertEqual(roofline.device_for("NVIDIA H100 80GB HBM3").peak_bw, 3.35e12)
        self.assertEqual(roofline.device_for("NVIDIA H100 PCIe").name, "H100 PCIe")
        self.assertIsNone(roofline.device_for("Some GPU"))

    def test_flags(self):
        dev = roofline.DEVICES["h200"]
        f, b = 1e12, 1e6
        bound = roofline.bound_us(f, b, dev, "bfloat16")
        reject, _ = roofline.flags(bound * 0.5, 1e6, f, b, dev, "bfloat16", bound)
        self.assertIn("below the speed-of-light bound", reject)
        reject, notes = roofline.flags(bound * 1.05, bound * 100, f, b, dev, "bfloat16", bound)
        self.assertIsNone(reject)
        self.assertTrue(any("TFLOP/s" in n for n in notes))              # > 90% of measured 788
        self.assertTrue(any("speedup" in n and "> 10x" in n for n in notes))
        reject, notes = roofline.flags(bound * 5, bound * 15, f, b, dev, "bfloat16", bound)
        self.assertEqual(notes, ["NOTE: speedup 3.0x over the initial kernel (> 2x)"])


if __name__ == "__main__":
    unittest.main()
