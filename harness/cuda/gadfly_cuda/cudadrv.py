"""A small ctypes binding of the CUDA driver API (libcuda.so.1); no torch.

Used by the runner (the candidate's process, which for a shared-library
candidate never imports torch) and by the grader for the exchange buffers
that are shared with the runner through CUDA IPC.  Both work in the
device's primary context, the one the CUDA runtime and torch use.
"""
from __future__ import annotations

import ctypes
import threading

CUdeviceptr = ctypes.c_uint64
CU_STREAM_NON_BLOCKING = 1
CU_EVENT_DEFAULT = 0
CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1
ATTR = {"clock_khz": 13, "sm_count": 16, "mem_clock_khz": 36, "bus_width": 37, "l2_bytes": 38,
        "cc_major": 75, "cc_minor": 76}


class CudaError(RuntimeError):
    def __init__(self, call: str, code: int, name: str):
        super().__init__(f"{call} failed: {name} ({code})")
        self.code = code
        self.call = call
        self.name = name


class IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * 64)]  # not c_char: that reads back cut at the first NUL


_lib = None
_lock = threading.Lock()


def lib():
    global _lib
    with _lock:
        if _lib is None:
            _lib = ctypes.CDLL("libcuda.so.1")
        return _lib


def _fn(*names):
    L = lib()
    for n in names:
        f = getattr(L, n, None)
        if f is not None:
            return f
    raise AttributeError(f"libcuda has none of {names}")


def _check(call: str, rc: int):
    if rc != 0:
        name = ctypes.c_char_p()
        try:
            lib().cuGetErrorName(rc, ctypes.byref(name))
            nm = name.value.decode() if name.value else "?"
        except Exception:
            nm = "?"
        raise CudaError(call, rc, nm)


class Driver:
    """Bound driver entry points for one device's primary context."""

    def __init__(self, ordinal: int = 0):
        L = lib()
        _check("cuInit", L.cuInit(0))
        dev = ctypes.c_int()
        _check("cuDeviceGet", L.cuDeviceGet(ctypes.byref(dev), ordinal))
        self.dev = dev.value
        ctx = ctypes.c_void_p()
        _check("cuDevicePrimaryCtxRetain", L.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), self.dev))
        self.ctx = ctx.value
        self.make_current()
        self._alloc = _fn("cuMemAlloc_v2")
        self._free = _fn("cuMemFree_v2")
        self._ipc_get = _fn("cuIpcGetMemHandle")
        self._ipc_open = _fn("cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle")
        self._ipc_open.argtypes = [ctypes.POINTER(CUdeviceptr), IpcHandle, ctypes.c_uint]
        self._ipc_close = _fn("cuIpcCloseMemHandle")
        self._memset16 = _fn("cuMemsetD16Async")
        self._memset16.argtypes = [CUdeviceptr, ctypes.c_ushort, ctypes.c_size_t, ctypes.c_void_p]
        self._memset32 = _fn("cuMemsetD32Async")
        self._memset32.argtypes = [CUdeviceptr, ctypes.c_uint, ctypes.c_size_t, ctypes.c_void_p]
        self._stream_create = _fn("cuStreamCreate")
        self._stream_sync = _fn("cuStreamSynchronize")
        self._stream_sync.argtypes = [ctypes.c_void_p]
        self._ctx_sync = _fn("cuCtxSynchronize")
        self._event_create = _fn("cuEventCreate")
        self._event_record = _fn("cuEventRecord")
        self._event_record.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self._event_sync = _fn("cuEventSynchronize")
        self._event_sync.argtypes = [ctypes.c_void_p]
        self._elapsed = _fn("cuEventElapsedTime_v2", "cuEventElapsedTime")
        self._elapsed.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_void_p]
        self._reset_l2 = getattr(L, "cuCtxResetPersistingL2Cache", None)

    def make_current(self):
        _check("cuCtxSetCurrent", lib().cuCtxSetCurrent(ctypes.c_void_p(self.ctx)))

    # device facts
    def name(self) -> str:
        buf = ctypes.create_string_buffer(256)
        _check("cuDeviceGetName", lib().cuDeviceGetName(buf, 256, self.dev))
        return buf.value.decode()

    def pci_bus_id(self) -> str | None:
        """'0000:1b:00.0': how NVML and nvidia-smi find this device (None where the driver will not say)."""
        buf = ctypes.create_string_buffer(64)
        try:
            _check("cuDeviceGetPCIBusId", lib().cuDeviceGetPCIBusId(buf, 64, self.dev))
        except (CudaError, AttributeError):
            return None
        return buf.value.decode() or None

    def attribute(self, key: str) -> int:
        v = ctypes.c_int()
        _check("cuDeviceGetAttribute", lib().cuDeviceGetAttribute(ctypes.byref(v), ATTR[key], self.dev))
        return v.value

    # memory
    def alloc(self, nbytes: int) -> int:
        p = CUdeviceptr()
        _check("cuMemAlloc", self._alloc(ctypes.byref(p), ctypes.c_size_t(nbytes)))
        return p.value

    def free(self, ptr: int):
        _check("cuMemFree", self._free(CUdeviceptr(ptr)))

    def ipc_handle(self, ptr: int) -> bytes:
        h = IpcHandle()
        _check("cuIpcGetMemHandle", self._ipc_get(ctypes.byref(h), CUdeviceptr(ptr)))
        return ctypes.string_at(ctypes.addressof(h), 64)

    def ipc_open(self, handle: bytes) -> int:
        h = IpcHandle()
        ctypes.memmove(ctypes.addressof(h), handle, 64)
        p = CUdeviceptr()
        _check("cuIpcOpenMemHandle", self._ipc_open(ctypes.byref(p), h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
        return p.value

    def ipc_close(self, ptr: int):
        _check("cuIpcCloseMemHandle", self._ipc_close(CUdeviceptr(ptr)))

    def memset16(self, ptr: int, value: int, count: int, stream: int):
        _check("cuMemsetD16Async", self._memset16(CUdeviceptr(ptr), value, count, ctypes.c_void_p(stream)))

    def memset32(self, ptr: int, value: int, count: int, stream: int):
        _check("cuMemsetD32Async", self._memset32(CUdeviceptr(ptr), value, count, ctypes.c_void_p(stream)))

    # streams, events
    def stream(self, flags: int = CU_STREAM_NON_BLOCKING) -> int:
        s = ctypes.c_void_p()
        _check("cuStreamCreate", self._stream_create(ctypes.byref(s), flags))
        return s.value

    def stream_sync(self, stream: int):
        _check("cuStreamSynchronize", self._stream_sync(ctypes.c_void_p(stream)))

    def ctx_sync(self):
        _check("cuCtxSynchronize", self._ctx_sync())

    def event(self) -> int:
        e = ctypes.c_void_p()
        _check("cuEventCreate", self._event_create(ctypes.byref(e), CU_EVENT_DEFAULT))
        return e.value

    def record(self, event: int, stream: int):
        _check("cuEventRecord", self._event_record(ctypes.c_void_p(event), ctypes.c_void_p(stream)))

    def event_sync(self, event: int):
        _check("cuEventSynchronize", self._event_sync(ctypes.c_void_p(event)))

    def elapsed_ms(self, start: int, end: int) -> float:
        ms = ctypes.c_float()
        _check("cuEventElapsedTime", self._elapsed(ctypes.byref(ms), ctypes.c_void_p(start), ctypes.c_void_p(end)))
        return float(ms.value)

    def reset_persisting_l2(self) -> bool:
        """Drops persisting L2 lines (defeats an access-policy window, trick 16).
        Returns False, and stops trying, where the driver refuses it."""
        if self._reset_l2 is None:
            return False
        if self._reset_l2() != 0:
            self._reset_l2 = None
            return False
        return True
