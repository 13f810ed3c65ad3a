"""Who else uses the GPU: the co-tenant check (standard library only).

A process that is not the harness's (another user's job on a shared GPU, or
the agent's own GPU process) slows whichever calls it overlaps and can make
the timing cross-checks fire on a correct kernel.  The grader reads the
device's list of compute processes before a scenario's calls, between timing
rounds and after them; a process that is not the harness's voids the timing
of that scenario ("cannot_tell") instead of deciding from it.

Sources, in this order:

* NVML through ctypes (``libnvidia-ml.so.1``): the device is found by the
  PCI bus id of the CUDA device in use (index 0 where that is not known);
  ``nvmlDeviceGetComputeRunningProcesses`` v3, else v2, else v1, gives the
  processes that hold a context; ``nvmlDeviceGetProcessUtilization``, where
  the driver supports it, names every process that kept the SMs or memory
  busy since a time stamp, also one that has exited since.
* ``nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name,used_memory``,
  filtered to the device's bus id (slower, so polled at most once a second).
* Neither: the check is reported as ``unavailable: ...`` on every line; it
  never counts as passed.

Which processes are the harness's (``classify``): the grader, its runners
(also runners it started earlier and has since stopped, which the driver may
still list for a moment), every descendant of the grader (a process the
candidate started is its own doing and is failed by the process-hygiene
check, not excused here), and for each of these every PID that
``/proc/PID/status`` NSpid gives it.  The driver reports PIDs of the PID
namespace it sees, which inside a container is not this one (or it reports
0).  So the PIDs are first tested: if every process known to hold a context
(the grader and its live runners) is listed under its own PID, the PIDs are
this namespace's and any other listed PID is another process's.  If not, the
harness cannot map PIDs and counts instead: the processes listed beyond the
number the harness itself holds the device with are others'; all listed
PIDs are then named as the driver gave them.
"""
from __future__ import annotations

import ctypes
import os
import subprocess
import time
from dataclasses import dataclass, field

NVML_SUCCESS = 0
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_VALUE_NOT_AVAILABLE = (1 << 64) - 1
COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}
NVML_MIN_INTERVAL_S = 0.0     # NVML is cheap enough to read between every timing round
SMI_MIN_INTERVAL_S = 1.0      # nvidia-smi takes tens of milliseconds or more per call


class Unavailable(RuntimeError):
    """This source cannot list the device's processes."""


@dataclass(frozen=True)
class Proc:
    pid: int
    name: str = ""
    used_bytes: int | None = None


# ---------------------------------------------------------------------------
# sources
class _ProcessInfoV1(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


class _ProcessInfoV2(ctypes.Structure):   # v2 and v3 share this layout
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class _UtilSample(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("timeStamp", ctypes.c_ulonglong), ("smUtil", ctypes.c_uint),
                ("memUtil", ctypes.c_uint), ("encUtil", ctypes.c_uint), ("decUtil", ctypes.c_uint)]


def norm_bus_id(s: str | None) -> str | None:
    """'00000000:1B:00.0' and '0000:1b:00.0' both become '0000:1b:00.0'."""
    if not s:
        return None
    s = s.strip().lower()
    try:
        dom_bus, devfn = s.rsplit(":", 1)
        dom, bus = dom_bus.rsplit(":", 1) if dom_bus.count(":") else ("0", dom_bus)
        dev, fn = devfn.split(".")
        return f"{int(dom, 16):04x}:{int(bus, 16):02x}:{int(dev, 16):02x}.{int(fn, 16)}"
    except ValueError:
        return s


class NvmlSource:
    name = "NVML"
    min_interval_s = NVML_MIN_INTERVAL_S

    def __init__(self, bus_id: str | None = None, index: int = 0, libname: str = "libnvidia-ml.so.1"):
        try:
            self.lib = ctypes.CDLL(libname)
        except OSError as e:
            raise Unavailable(f"{libname} cannot be loaded ({e})") from None
        init = getattr(self.lib, "nvmlInit_v2", None) or getattr(self.lib, "nvmlInit", None)
        if init is None:
            raise Unavailable("no nvmlInit in the library")
        self._check("nvmlInit", init())
        self.handle = ctypes.c_void_p()
        self.found_by = None
        if bus_id:
            f = getattr(self.lib, "nvmlDeviceGetHandleByPciBusId_v2", None) or \
                getattr(self.lib, "nvmlDeviceGetHandleByPciBusId", None)
            if f is not None and f(bus_id.encode(), ctypes.byref(self.handle)) == NVML_SUCCESS:
                self.found_by = f"PCI bus id {bus_id}"
        if self.found_by is None:
            f = getattr(self.lib, "nvmlDeviceGetHandleByIndex_v2", None) or \
                getattr(self.lib, "nvmlDeviceGetHandleByIndex", None)
            if f is None:
                raise Unavailable("no nvmlDeviceGetHandleByIndex")
            self._check("nvmlDeviceGetHandleByIndex", f(index, ctypes.byref(self.handle)))
            self.found_by = f"index {index}" + (f" (bus id {bus_id} not found)" if bus_id else "")
        self._procs_fn, self._procs_struct, self.procs_api = None, None, None
        for n, st in (("nvmlDeviceGetComputeRunningProcesses_v3", _ProcessInfoV2),
                      ("nvmlDeviceGetComputeRunningProcesses_v2", _ProcessInfoV2),
                      ("nvmlDeviceGetComputeRunningProcesses", _ProcessInfoV1)):
            f = getattr(self.lib, n, None)
            if f is not None:
                self._procs_fn, self._procs_struct, self.procs_api = f, st, n
                break
        if self._procs_fn is None:
            raise Unavailable("no nvmlDeviceGetComputeRunningProcesses")
        self.compute_processes()   # raises Unavailable where the driver refuses
        self._util_fn = getattr(self.lib, "nvmlDeviceGetProcessUtilization", None)
        self.util_supported = None  # learned at the first call

    def _err(self, rc: int) -> str:
        f = getattr(self.lib, "nvmlErrorString", None)
        if f is not None:
            f.restype = ctypes.c_char_p
            try:
                return f"{f(rc).decode(errors='replace')} ({rc})"
            except Exception:
                pass
        return f"NVML error {rc}"

    def _check(self, call: str, rc: int):
        if rc != NVML_SUCCESS:
            raise Unavailable(f"{call}: {self._err(rc)}")

    def compute_processes(self) -> list[Proc]:
        n = 16
        for _ in range(8):
            buf = (self._procs_struct * n)()
            count = ctypes.c_uint(n)
            rc = self._procs_fn(self.handle, ctypes.byref(count), buf)
            if rc == NVML_ERROR_INSUFFICIENT_SIZE:
                n = max(n * 2, count.value + 8)
                continue
            self._check(self.procs_api, rc)
            return [Proc(int(p.pid), "", None if p.usedGpuMemory == NVML_VALUE_NOT_AVAILABLE else
                         int(p.usedGpuMemory)) for p in buf[:count.value]]
        raise Unavailable(f"{self.procs_api}: the list kept growing")

    def busy_since(self, since_us: int) -> list[tuple[int, int, int]] | None:
        """(pid, sm %, memory %) of every process the driver sampled busy after
        ``since_us`` (microseconds since the epoch); None where not supported."""
        if self._util_fn is None or self.util_supported is False:
            return None
        n = 64
        for _ in range(6):
            buf = (_UtilSample * n)()
            count = ctypes.c_uint(n)
            rc = self._util_fn(self.handle, buf, ctypes.byref(count), ctypes.c_ulonglong(since_us))
            if rc == NVML_ERROR_INSUFFICIENT_SIZE:
                n = max(n * 2, count.value + 8)
                continue
            if rc == NVML_ERROR_NOT_FOUND:   # no sample since then
                self.util_supported = True
                return []
            if rc != NVML_SUCCESS:
                self.util_supported = False
                self.util_error = self._err(rc)
                return None
            self.util_supported = True
            out = {}
            for s in buf[:count.value]:
                if s.timeStamp > since_us and (s.smUtil or s.memUtil):
                    sm, mem = out.get(int(s.pid), (0, 0))
                    out[int(s.pid)] = (max(sm, int(s.smUtil)), max(mem, int(s.memUtil)))
            return [(p, sm, mem) for p, (sm, mem) in sorted(out.items())]
        return None

    def compute_mode(self) -> str:
        f = getattr(self.lib, "nvmlDeviceGetComputeMode", None)
        if f is None:
            return "unknown (no nvmlDeviceGetComputeMode)"
        m = ctypes.c_int()
        rc = f(self.handle, ctypes.byref(m))
        if rc != NVML_SUCCESS:
            return f"unknown ({self._err(rc)})"
        return COMPUTE_MODES.get(m.value, f"mode {m.value}")

    def describe(self) -> str:
        return f"NVML ({self.procs_api}, device by {self.found_by})"


class SmiSource:
    name = "nvidia-smi"
    min_interval_s = SMI_MIN_INTERVAL_S

    def __init__(self, bus_id: str | None = None, exe: str = "nvidia-smi", run=subprocess.run):
        self.bus_id, self.exe, self._run = norm_bus_id(bus_id), exe, run
        self.compute_processes()

    def _query(self, args: list[str]) -> str:
        try:
            out = self._run([self.exe] + args, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as e:
            raise Unavailable(f"{self.exe}: {e}") from None
        if out.returncode != 0:
            raise Unavailable(f"{self.exe} {args[0]} exited {out.returncode}: {(out.stderr or out.stdout).strip()[:200]}")
        return out.stdout

    def compute_processes(self) -> list[Proc]:
        text = self._query(["--query-compute-apps=gpu_bus_id,pid,process_name,used_memory",
                            "--format=csv,noheader,nounits"])
        return parse_smi_apps(text, self.bus_id)

    def busy_since(self, since_us: int):
        return None

    def compute_mode(self) -> str:
        args = ["--query-gpu=pci.bus_id,compute_mode", "--format=csv,noheader"]
        try:
            text = self._query(args)
        except Unavailable as e:
            return f"unknown ({e})"
        for line in text.splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 2 and (self.bus_id is None or norm_bus_id(parts[0]) == self.bus_id):
                return parts[1]
        return "unknown (device not in nvidia-smi's list)"

    def describe(self) -> str:
        return f"nvidia-smi --query-compute-apps (device {self.bus_id or 'any'})"


def parse_smi_apps(text: str, bus_id: str | None) -> list[Proc]:
    """Lines 'bus_id, pid, name, used MiB' of the device ``bus_id`` (all if None)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.lower().startswith("no running"):
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4:
            continue
        bus, pid_s, used_s = parts[0], parts[1], parts[-1]
        name = ", ".join(parts[2:-1])
        if bus_id is not None and norm_bus_id(bus) != bus_id:
            continue
        try:
            pid = int(pid_s)
        except ValueError:
            continue
        try:
            used = int(float(used_s) * (1 << 20))
        except ValueError:
            used = None
        out.append(Proc(pid, name, used))
    return out


def open_source(bus_id: str | None, index: int = 0, nvml=NvmlSource, smi=SmiSource):
    """The first source that works, and why the others did not (a list of
    strings); (None, reasons) where none works."""
    reasons = []
    for make in (lambda: nvml(bus_id, index), lambda: smi(bus_id)):
        try:
            return make(), reasons
        except Unavailable as e:
            reasons.append(str(e))
        except Exception as e:  # a broken library must not take the grader down
            reasons.append(f"{type(e).__name__}: {e}")
    return None, reasons


# ---------------------------------------------------------------------------
# whose processes
def nspids(pid: int) -> list[int]:
    """The PIDs of ``pid`` in each PID namespace /proc can see (NSpid)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return [int(x) for x in line.split()[1:]]
    except (OSError, ValueError):
        pass
    return [pid]


def visible(pid: int) -> bool:
    return pid > 0 and os.path.exists(f"/proc/{pid}")


def proc_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def holds_nvidia_device(pid: int) -> bool:
    """Has the process a GPU device node (/dev/nvidia0, /dev/nvidia-uvm...) open?"""
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/dev/nvidia"):
                    return True
            except OSError:
                continue
    except OSError:
        pass
    return False


@dataclass
class Verdict:
    """One poll's reading: the other processes found, and how PIDs were matched."""
    others: list[Proc]
    mapped: bool
    note: str = ""


def classify(listed: list[Proc], own: set[int], holders: set[int], expected: int,
             is_visible=visible, name_of=proc_name) -> Verdict:
    """Which of the device's listed processes are not the harness's.

    ``own``: every PID of the harness's processes (grader, runners past and
    present, descendants, their NSpid aliases); ``holders``: those sure to
    hold a context now (the grader and its live runners); ``expected``: how
    many processes of the harness hold the device now (holders plus
    descendants with a GPU device node open).
    """
    pids = {p.pid for p in listed}
    if holders and holders <= pids:
        # the driver's PIDs are this namespace's: anything not ours is another's,
        # also a PID this namespace cannot see (outside it, or gone)
        others = [Proc(p.pid, p.name or name_of(p.pid) or ("?" if is_visible(p.pid) else "not visible here"),
                       p.used_bytes) for p in listed if p.pid not in own]
        return Verdict(others, True)
    # the PIDs cannot be mapped (another PID namespace, or 0): count
    extra = len(listed) - expected
    if extra <= 0:
        return Verdict([], False, f"PIDs not mapped; {len(listed)} process(es) listed, the harness holds {expected}")
    others = [Proc(p.pid, p.name or "PID of another namespace", p.used_bytes) for p in listed]
    return Verdict(others, False, f"PIDs not mapped; {len(listed)} process(es) listed, {extra} more than the "
                                  f"harness's {expected}")


def classify_busy(busy: list[tuple[int, int, int]], own: set[int], mapped: bool, expected_ever: int,
                  is_visible=visible, name_of=proc_name) -> list[Proc]:
    """Other processes among those the driver sampled busy in a window."""
    if mapped:
        return [Proc(p, (name_of(p) or ("?" if is_visible(p) else "exited or not visible here")) +
                     f", busy: SM {sm}%, memory {mem}%") for p, sm, mem in busy if p not in own]
    if len(busy) > expected_ever:
        return [Proc(p, f"PID of another namespace, busy: SM {sm}%, memory {mem}%") for p, sm, mem in busy]
    return []


def void_timing(fail: str | None, fail_timing: bool, shared: str | None):
    """The scenario's verdict once the co-tenant check is in: (fail, cannot_tell, voided).

    ``shared`` is the co-tenant message (None: no other process seen).  On a
    shared device a failure that came from timing (``fail_timing``: the busy
    gap, the host-time checks, a call that did not answer in time) is set
    aside as ``voided`` and the line says ``cannot_tell``; so does a scenario
    with no failure at all, since its times are not the candidate's alone.
    A failure of an output check stands, with no ``cannot_tell``.
    """
    if shared and (fail is None or fail_timing):
        return None, shared, fail
    return fail, None, None


# ---------------------------------------------------------------------------
@dataclass
class ScenarioWatch:
    """The sightings of one scenario."""
    source: object
    own_fn: object
    since_us: int
    polls: int = 0
    seen: dict = field(default_factory=dict)   # pid -> (Proc, phase)
    notes: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    last: float = -1e9
    mapped: bool = True
    expected_ever: int = 0
    _own: tuple | None = None

    def poll(self, phase: str, force: bool = True) -> bool:
        """Reads the process list; True when another process has been seen so far."""
        if self.source is None:
            return False
        now = time.monotonic()
        if not force and now - self.last < self.source.min_interval_s:
            return bool(self.seen)
        self.last = now
        try:
            listed = self.source.compute_processes()
        except Exception as e:
            self.errors.append(f"{phase}: {e}")
            return bool(self.seen)
        # the harness's processes are read again (a walk of /proc) only when
        # the list holds a PID not known to be ours or misses one of ours
        pids = {p.pid for p in listed}
        if self._own is None or not (pids <= self._own[0] and self._own[1] <= pids):
            self._own = self.own_fn()
        own, holders, expected = self._own
        self.expected_ever = max(self.expected_ever, expected)
        v = classify(listed, own, holders, expected)
        self.polls += 1
        self.mapped = self.mapped and v.mapped
        if v.note and v.note not in self.notes:
            self.notes.append(v.note)
        for p in v.others:
            self.seen.setdefault(p.pid, (p, phase))
        return bool(self.seen)

    def finish(self) -> bool:
        """The last poll, and the busy samples of the whole window."""
        self.poll("after")
        if self.source is not None:
            try:
                busy = self.source.busy_since(self.since_us)
            except Exception as e:
                busy = None
                self.errors.append(f"busy samples: {e}")
            if busy is not None:
                own, _, _ = self.own_fn()
                for p in classify_busy(busy, own, self.mapped, self.expected_ever):
                    self.seen.setdefault(p.pid, (p, "in the process-utilization samples"))
        return bool(self.seen)

    def shared(self) -> bool:
        return bool(self.seen)

    def cannot_tell(self) -> str | None:
        if not self.seen:
            return None
        items = [f"PID {p.pid} ({p.name})" + (f", {p.used_bytes >> 20} MiB" if p.used_bytes else "")
                 + f", seen {phase}" for p, phase in list(self.seen.values())[:6]]
        more = f" and {len(self.seen) - 6} more" if len(self.seen) > 6 else ""
        return "the device was shared with " + "; ".join(items) + more + " during the timed calls"

    def check(self, unavailable: str | None = None) -> str:
        """The `cotenant_check` field: ok / shared / unavailable, never silent."""
        if self.source is None:
            return f"unavailable: {unavailable or 'no source'}"
        if self.polls == 0:
            return f"unavailable: every read of {self.source.describe()} failed: {'; '.join(self.errors[:3])}"
        how = "PIDs matched" if self.mapped else "PIDs not mapped, counted"
        tail = (f"; {len(self.errors)} failed read(s): {self.errors[0]}" if self.errors else "")
        if self.notes and not self.mapped:
            tail += f"; {self.notes[-1]}"
        if self.seen:
            return f"shared: {len(self.seen)} other process(es); {self.polls} reads of {self.source.describe()}, {how}{tail}"
        busy = {True: ", process-utilization samples read", False: "", None: ""}.get(
            getattr(self.source, "util_supported", None), "")
        return f"ok: no other process in {self.polls} reads of {self.source.describe()}, {how}{busy}{tail}"


class Watch:
    """The grader's handle: one source for the run, one ScenarioWatch per scenario."""

    def __init__(self, bus_id: str | None, own_fn, index: int = 0, opener=open_source):
        self.bus_id = bus_id
        self.own_fn = own_fn
        self.source, self.reasons = opener(bus_id, index)
        self.unavailable = None if self.source else "; ".join(self.reasons) or "no source"

    def compute_mode(self) -> str:
        if self.source is None:
            return "unknown (neither NVML nor nvidia-smi answered)"
        try:
            return self.source.compute_mode()
        except Exception as e:
            return f"unknown ({e})"

    def describe(self) -> str:
        if self.source is None:
            return f"unavailable: {self.unavailable}"
        util = getattr(self.source, "_util_fn", None) is not None
        return self.source.describe() + (", process-utilization samples where the driver keeps them" if util else "")

    def scenario(self) -> ScenarioWatch:
        w = ScenarioWatch(self.source, self.own_fn, int(time.time() * 1e6))
        w.poll("before")
        return w
