import os
import tempfile
import unittest

import _paths
from gadfly_cuda import buildlib


class BuildlibTest(unittest.TestCase):
    def test_gencode(self):
        self.assertEqual(buildlib.gencode("sm_90a"), "-gencode=arch=compute_90a,code=sm_90a")
        self.assertEqual(buildlib.gencode("sm_80"), "-gencode=arch=compute_80,code=sm_80")
        with self.assertRaises(ValueError):
            buildlib.gencode("hopper")
        flags = buildlib.nvcc_flags("sm_90a", ["kernel"])
        self.assertIn("-O3", flags)
        self.assertEqual(flags[-2:], ["-I", "kernel"])

    def test_cache_key_tracks_content_flags_and_compiler(self):
        with tempfile.TemporaryDirectory() as d:
            a = os.path.join(d, "a.cu")
            h = os.path.join(d, "a.cuh")
            for p, t in ((a, "x"), (h, "y")):
                with open(p, "w") as f:
                    f.write(t)
            k1 = buildlib.cache_key("nvcc 13.0", ["-O3"], [a, h])
            self.assertEqual(k1, buildlib.cache_key("nvcc 13.0", ["-O3"], [h, a]))
            self.assertNotEqual(k1, buildlib.cache_key("nvcc 13.1", ["-O3"], [a, h]))
            self.assertNotEqual(k1, buildlib.cache_key("nvcc 13.0", ["-O2"], [a, h]))
            with open(h, "w") as f:
                f.write("z")
            self.assertNotEqual(k1, buildlib.cache_key("nvcc 13.0", ["-O3"], [a, h]))
            srcs, hdrs = buildlib.collect(d)
            self.assertEqual((srcs, hdrs), ([a], [h]))
            cache = os.path.join(d, "cache")
            out = os.path.join(d, "out", "k.so")
            self.assertFalse(buildlib.cache_get(cache, k1, out))
            buildlib.cache_put(cache, k1, a)
            self.assertTrue(buildlib.cache_get(cache, k1, out))
            with open(out) as f:
                self.assertEqual(f.read(), "x")

    def test_source_scan(self):
        ex = os.path.join(_paths.HARNESS, "exploits")
        hits = buildlib.scan_sources([os.path.join(ex, "e12_dlopen_cublas.cu")])
        self.assertTrue(any("`dlopen`" in h for h in hits), hits)
        base = os.path.join(_paths.HARNESS, "problems", "attention", "baseline.cu")
        self.assertEqual(buildlib.scan_sources([base]), [])
        for c in ("good.cu", "wrong.cu", "cheat_cache.cu", "cheat_side_stream.cu"):
            self.assertEqual(buildlib.scan_sources([os.path.join(_paths.EXAMPLE, "candidates", c)]), [], c)
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "k.cu")
            with open(p, "w") as f:
                f.write("#include <cublas_v2.h>\nusing namespace cute::detail;\n")
            self.assertEqual(len(buildlib.scan_sources([p])), 2)


if __name__ == "__main__":
    unittest.main()
