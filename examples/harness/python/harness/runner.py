"""runner.py MODULE FD: serves calls of MODULE's kernel(x) for grader.py, which
starts it (never by hand) with an environment of PATH, HOME and LC_ALL: it
never learns the seed or the results path. FD is a shared memory file. A
request "NONCE N M" on stdin: the first N doubles of FD go to kernel() as a
list of floats, its M results are written right after them, and the answer
is "NONCE ok" (or "NONCE error WHY"). The grader keeps this process stopped
(SIGSTOP) between calls."""
import ctypes, importlib.util, mmap, os, sys, traceback
from array import array


def main():
    module, fd = sys.argv[1], int(sys.argv[2])
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the kernel's print() goes to the log, never into the answers
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # not dumpable: another process of this user cannot read its memory
    doubles = memoryview(mmap.mmap(fd, 0)).cast("d")
    os.close(fd)
    sys.path.insert(0, os.path.dirname(os.path.abspath(module)))  # the kernel may import its own modules
    spec = importlib.util.spec_from_file_location("kernel", module)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    kernel = mod.kernel
    answers.write("ready\n")
    for line in iter(sys.stdin.readline, ""):
        nonce, n, m = line.split()
        n, m = int(n), int(m)
        try:
            out = array("d", kernel(doubles[:n].tolist()))  # a new list every call
            if len(out) != m:
                raise ValueError(f"kernel returned {len(out)} values, not {m}, for {n} inputs")
            doubles[n:n + m] = out
            answers.write(f"{nonce} ok\n")
        except Exception as e:
            traceback.print_exc()
            answers.write(f"{nonce} error " + f"{type(e).__name__}: {e}"[:300].replace("\n", " ") + "\n")


main()
