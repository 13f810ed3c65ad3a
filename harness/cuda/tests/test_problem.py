import random
import unittest

import _paths


class AttentionProblemTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.P = _paths.load_attention()

    def test_names_round_trip(self):
        P = self.P
        self.assertGreaterEqual(len(P.SCENARIOS), 12)
        self.assertEqual(len(set(P.SCENARIOS)), len(P.SCENARIOS))
        for s in P.SCENARIOS:
            self.assertEqual(P.name(P.parse(s)), s)
            self.assertIn(P.parse(s).head_dim, P.HEAD_DIMS)
        sh = P.parse("b2_h8_q512_k3000_d64_full")
        self.assertEqual((sh.batch, sh.heads, sh.seq_q, sh.seq_k, sh.head_dim, sh.causal), (2, 8, 512, 3000, 64, False))
        self.assertAlmostEqual(sh.scale, 0.125)

    def test_scenarios_cover_the_issue(self):
        shapes = [self.P.parse(s) for s in self.P.SCENARIOS]
        self.assertGreater(len({s.batch for s in shapes}), 2)
        self.assertGreater(len({s.heads for s in shapes}), 2)
        self.assertGreater(len({s.seq_q for s in shapes}), 4)
        self.assertEqual({s.head_dim for s in shapes}, {64, 128})
        self.assertEqual({s.causal for s in shapes}, {True, False})
        self.assertTrue(any(s.seq_k % 64 for s in shapes))

    def test_bad_names(self):
        for bad in ("b1_h1_s0_d64_full", "x", "b1_h2_s64_d64_causalx", "b1_h2_q64_k128_d64_causal"):
            with self.assertRaises(ValueError):
                self.P.parse(bad)

    def test_variant(self):
        P = self.P
        for s in P.SCENARIOS:
            sh = P.parse(s)
            a = P.variant(sh, random.Random(7))
            b = P.variant(sh, random.Random(7))
            self.assertEqual(a, b)                                  # deterministic per seed
            self.assertEqual((a.head_dim, a.causal), (sh.head_dim, sh.causal))
            self.assertTrue(a.seq_q % 64 and a.seq_k % 64)           # never tile-aligned
            self.assertNotEqual((a.seq_q, a.seq_k), (sh.seq_q, sh.seq_k))
            self.assertLessEqual(abs(a.seq_q - sh.seq_q), 63)
            self.assertEqual(a.seq_q == a.seq_k, sh.seq_q == sh.seq_k)
            P.parse(P.name(a))

    def test_abi(self):
        P = self.P
        sh = P.parse("b2_h3_s5_d64_causal")
        ids = {n: f"id_{n}" for n in P.buffers(sh)}
        args = P.so_args(sh, ids)
        self.assertEqual([a["t"] for a in args], P.SO_ARGTYPES)
        self.assertEqual([a.get("v") for a in args[4:11]], [2, 3, 5, 5, 64, 1, 0.125])
        self.assertEqual(len(P.py_args(sh, ids)), 6)
        self.assertEqual(P.buffers(sh)["q"], (2, 3, 5, 64))
        self.assertEqual(P.where(sh, 0), "o[b=0, h=0, q=0, d=0]")
        self.assertEqual(P.where(sh, ((1 * 3 + 2) * 5 + 4) * 64 + 63), "o[b=1, h=2, q=4, d=63]")

    def test_roofline_numbers(self):
        P = self.P
        sh = P.parse("b1_h16_s4096_d64_full")
        self.assertEqual(P.flops(sh), 4 * 16 * 4096 * 4096 * 64)
        self.assertEqual(P.nbytes(sh), 2 * 16 * 4096 * 64 * 4)


if __name__ == "__main__":
    unittest.main()
