"""The baseline and the reference: the campaign's initial kernel, run by the
grader in a runner of its own. Keep it identical to the initial
kernel/kernel.py: its speed is what the speedup is measured against, its
output what the candidate's is checked against."""
W = 16


def kernel(x):
    out = []
    for i in range(len(x) - W + 1):
        s = 0.0
        for j in range(i, i + W):
            s += x[j]
        out.append(s)
    return out
