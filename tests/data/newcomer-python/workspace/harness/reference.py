"""The reference: a sliding sum over a window of 24 values."""

W = 24


def window_sum(xs):
    return [sum(xs[max(0, i - W + 1):i + 1]) for i in range(len(xs))]
