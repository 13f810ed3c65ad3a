"""The candidate: sums over a moving window of 16 floats.

kernel(x) gets a list of n floats (n >= 16) and returns n - 15 floats (a list,
a tuple, an array('d')...): out[i] = x[i] + x[i+1] + ... + x[i+15]. Any way
of summing is fine within the grader's tolerance (n^2 2^-50 absolute; the
inputs lie in +-[1, 2)). This first version is the baseline's algorithm,
deliberately plain.
"""
W = 16


def kernel(x):
    out = []
    for i in range(len(x) - W + 1):
        s = 0.0
        for j in range(i, i + W):
            s += x[j]
        out.append(s)
    return out
