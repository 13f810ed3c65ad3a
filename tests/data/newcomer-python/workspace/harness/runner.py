"""Runs one module's window_sum on the inputs in a file, times REPEAT
calls with its own clock, and writes the last output and the times."""
import importlib.util
import json
import sys
import time

REPEAT = 5

path, inputs, output = sys.argv[1:4]
spec = importlib.util.spec_from_file_location("candidate", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
xs = json.load(open(inputs))
times = []
out = None
for _ in range(REPEAT):
    t0 = time.perf_counter()
    out = module.window_sum(xs)
    times.append(time.perf_counter() - t0)
json.dump({"out": out, "times": times}, open(output, "w"))
