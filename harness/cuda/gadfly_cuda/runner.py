"""The candidate's process.  Started by the grader, one per implementation
(candidate or baseline), with a scrubbed environment, an empty temporary
working directory and `python3 -I` (no user site, no cwd on sys.path).

It loads the implementation (a shared library through ctypes, never torch;
or, for a Python/Triton candidate, a module loaded by file path), opens the
exchange buffers the grader shares through CUDA IPC, and times calls.  Per
call, on one non-blocking stream of its own:

    flush L2 (write 2x its size) ; reset persisting L2 lines
    record start ; call the implementation ; record end
    synchronize the whole device (every stream of the context)
    record end_sync ; wait for it

and answers ms = elapsed(start, end) and ms_sync = elapsed(start, end_sync).
It never sees a reference output, a seed or the results path: the grader
fills the inputs, poisons the output and checks it in its own process.
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
import time
import traceback

_HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.dirname(_HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(_HERE))

from gadfly_cuda import protocol  # noqa: E402
from gadfly_cuda.cudadrv import Driver, CudaError  # noqa: E402

_CTYPES = {"ptr": ctypes.c_void_p, "int": ctypes.c_int, "float": ctypes.c_float, "stream": ctypes.c_void_p,
           "int64": ctypes.c_int64, "double": ctypes.c_double}


class _CAI:
    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 3, "strides": None, "stream": None}


class Runner:
    def __init__(self):
        self.drv = Driver(0)
        self.stream = self.drv.stream()
        self.ev = [self.drv.event() for _ in range(3)]
        self.bufs: dict[str, tuple[int, int]] = {}
        self.flush_ptr = 0
        self.flush_words = 0
        self.flush_value = 0
        self.kind = None
        self.fn = None
        self.torch = None
        self.tensors = {}

    # --- setup -----------------------------------------------------------
    def init(self, m):
        nbytes = int(m.get("flush_bytes", 0))
        if nbytes:
            self.flush_ptr = self.drv.alloc(nbytes)
            self.flush_words = nbytes // 4
        self.kind = m["kind"]
        threads_before = len(os.listdir("/proc/self/task"))
        if self.kind == "so":
            lib = ctypes.CDLL(os.path.abspath(m["lib"]), mode=os.RTLD_NOW | os.RTLD_LOCAL)
            fn = getattr(lib, m["entry"])
            fn.restype = ctypes.c_int
            fn.argtypes = [_CTYPES[t] for t in m["argtypes"]]
            self.fn = fn
            self._lib = lib
        elif self.kind == "py":
            import torch  # only Python candidates bring torch into this process
            self.torch = torch
            torch.cuda.init()
            torch.zeros(1, device="cuda")
            self.drv.make_current()
            self.ext_stream = torch.cuda.ExternalStream(self.stream)
            threads_before = len(os.listdir("/proc/self/task"))
            spec = importlib.util.spec_from_file_location("gadfly_candidate", os.path.abspath(m["lib"]))
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            self.fn = getattr(mod, m["entry"])
        else:
            raise ValueError(f"unknown kind {self.kind}")
        self.drv.make_current()
        return {"pid": os.getpid(), "threads_before_load": threads_before,
                "threads": len(os.listdir("/proc/self/task"))}

    def open(self, m):
        ptr = self.drv.ipc_open(bytes.fromhex(m["handle"]))
        self.bufs[m["id"]] = (ptr, int(m["nbytes"]))
        return {}

    def close(self, m):
        ptr, _ = self.bufs.pop(m["id"])
        for k in [k for k in self.tensors if k[0] == m["id"]]:
            del self.tensors[k]
        self.drv.ipc_close(ptr)
        return {}

    # --- calls -----------------------------------------------------------
    def _tensor(self, a):
        key = (a["buf"], tuple(a["shape"]), a["dtype"])
        t = self.tensors.get(key)
        if t is None:
            torch = self.torch
            ptr, nbytes = self.bufs[a["buf"]]
            dt = getattr(torch, a["dtype"])
            numel = 1
            for s in a["shape"]:
                numel *= s
            need = numel * torch.empty((), dtype=dt).element_size()
            raw = torch.as_tensor(_CAI(ptr, need), device="cuda")
            t = raw.view(dt).view(*a["shape"])
            self.tensors[key] = t
        return t

    def _args(self, spec):
        out = []
        for a in spec:
            t = a["t"]
            if t == "ptr":
                out.append(ctypes.c_void_p(self.bufs[a["buf"]][0]))
            elif t == "stream":
                out.append(ctypes.c_void_p(self.stream))
            elif t == "tensor":
                out.append(self._tensor(a))
            elif t in ("int", "int64"):
                out.append(int(a["v"]))
            elif t in ("float", "double"):
                out.append(float(a["v"]))
            elif t == "bool":
                out.append(bool(a["v"]))
            else:
                raise ValueError(f"unknown argument type {t}")
        return out

    def call(self, m, null=False):
        d = self.drv
        args = None if null else self._args(m["args"])
        trace = bool(m.get("trace")) and self.kind == "py"
        t0 = time.perf_counter()
        if self.flush_words and m.get("flush", True):
            self.flush_value = (self.flush_value + 1) & 0xFFFFFFFF
            d.memset32(self.flush_ptr, self.flush_value, self.flush_words, self.stream)
        d.reset_persisting_l2()
        t1 = time.perf_counter()
        d.record(self.ev[0], self.stream)
        rc = 0
        kernels = None
        if not null:
            if self.kind == "so":
                rc = int(self.fn(*args))
            else:
                torch = self.torch
                if trace:
                    from torch.profiler import profile, ProfilerActivity
                    with profile(activities=[ProfilerActivity.CUDA]) as prof:
                        with torch.cuda.stream(self.ext_stream):
                            r = self.fn(*args)
                        torch.cuda.synchronize()
                    kernels = sorted({e.name for e in prof.events()
                                      if str(getattr(e, "device_type", "")).endswith("CUDA")})
                else:
                    with torch.cuda.stream(self.ext_stream):
                        r = self.fn(*args)
                rc = int(r) if isinstance(r, int) and not isinstance(r, bool) else 0
        d.record(self.ev[1], self.stream)
        d.ctx_sync()
        d.record(self.ev[2], self.stream)
        d.event_sync(self.ev[2])
        t2 = time.perf_counter()
        host_ms = (t2 - t0) * 1e3
        out = {"rc": rc, "ms": d.elapsed_ms(self.ev[0], self.ev[1]),
               "ms_sync": d.elapsed_ms(self.ev[0], self.ev[2]), "host_ms": host_ms,
               "region_ms": (t2 - t1) * 1e3,
               "threads": len(os.listdir("/proc/self/task"))}
        if kernels is not None:
            out["kernels"] = kernels
        return out


def serve(req_fd: int, resp_fd: int):
    r = None
    while True:
        m = protocol.recv(req_fd)
        op = m.get("op")
        reply = {"nonce": m.get("nonce"), "op": op}
        try:
            if op == "hello":
                r = Runner()
                reply.update(pid=os.getpid())
            elif op == "init":
                reply.update(r.init(m))
            elif op == "open":
                reply.update(r.open(m))
            elif op == "close":
                reply.update(r.close(m))
            elif op == "call":
                reply.update(r.call(m))
            elif op == "null":
                reply.update(r.call(m, null=True))
            elif op == "exit":
                protocol.send(resp_fd, reply)
                os._exit(0)
            else:
                raise ValueError(f"unknown op {op}")
            reply["ok"] = True
        except CudaError as e:
            reply.update(ok=False, error=str(e), cuda=True)
        except Exception:
            reply.update(ok=False, error=traceback.format_exc(limit=8)[-4000:])
        protocol.send(resp_fd, reply)


def main(argv=None):
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--req-fd", type=int, required=True)
    p.add_argument("--resp-fd", type=int, required=True)
    p.add_argument("--no-dump", action="store_true", help="PR_SET_DUMPABLE 0 (baseline process)")
    a = p.parse_args(argv)
    if a.no_dump:
        try:
            ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
        except Exception:
            pass
    serve(a.req_fd, a.resp_fd)


if __name__ == "__main__":
    main()
