"""The co-tenant check's decisions, on fake process lists (no GPU needed)."""
import os
import subprocess
import unittest

import _paths  # noqa: F401
from gadfly_cuda import cotenant, results
from gadfly_cuda.cotenant import Proc

GRADER, CAND, BASE = 1000, 1001, 1002
OWN = {GRADER, CAND, BASE}


class FakeSource:
    """A process list that changes from read to read."""
    name = "fake"
    min_interval_s = 0.0

    def __init__(self, lists, busy=None, fail_at=()):
        self.lists, self.busy, self.fail_at, self.reads = list(lists), busy, set(fail_at), 0

    def compute_processes(self):
        self.reads += 1
        if self.reads in self.fail_at:
            raise cotenant.Unavailable("driver said no")
        return self.lists[min(self.reads, len(self.lists)) - 1]

    def busy_since(self, since_us):
        return self.busy

    def compute_mode(self):
        return "Default"

    def describe(self):
        return "fake list"


def own_fn(expected=3, holders=OWN):
    return lambda: (set(OWN), set(holders), expected)


def ours():
    return [Proc(GRADER), Proc(CAND), Proc(BASE)]


def watch(source, fn=None):
    return cotenant.ScenarioWatch(source, fn or own_fn(), 0)


def names_visible(pid):
    return pid in (4242,)


class ClassifyTest(unittest.TestCase):
    def classify(self, listed, expected=3):
        return cotenant.classify(listed, set(OWN), set(OWN), expected, is_visible=names_visible,
                                 name_of=lambda p: "python3" if p == 4242 else "")

    def test_alone_is_not_shared(self):
        v = self.classify(ours())
        self.assertTrue(v.mapped)
        self.assertEqual(v.others, [])

    def test_another_visible_process_is_named(self):
        v = self.classify(ours() + [Proc(4242, "", 5 << 30)])
        self.assertTrue(v.mapped)
        self.assertEqual([(p.pid, p.name) for p in v.others], [(4242, "python3")])

    def test_unknown_pid_in_a_mapped_list_counts_as_another(self):
        # our own processes are listed under their PIDs, so the list is this
        # namespace's: a PID this namespace cannot see is not ours
        v = self.classify(ours() + [Proc(77777)])
        self.assertEqual([(p.pid, p.name) for p in v.others], [(77777, "not visible here")])

    def test_unmapped_pids_are_counted(self):
        # a container: the driver reports host PIDs (or 0) for everything
        host = [Proc(501), Proc(502), Proc(503)]
        v = self.classify(host)
        self.assertFalse(v.mapped)
        self.assertEqual(v.others, [])
        v = self.classify(host + [Proc(0)])
        self.assertFalse(v.mapped)
        self.assertEqual(len(v.others), 4)
        self.assertIn("1 more than the harness's 3", v.note)

    def test_zero_pids_alone_are_not_guessed_away(self):
        v = self.classify([Proc(0), Proc(0), Proc(0), Proc(0)])
        self.assertFalse(v.mapped)
        self.assertEqual(len(v.others), 4)

    def test_candidate_descendants_are_own(self):
        # a GPU process the candidate started is its own doing (the hygiene
        # check fails it); it does not excuse the scenario
        own = set(OWN) | {1500}
        v = cotenant.classify(ours() + [Proc(1500)], own, set(OWN), 4, is_visible=lambda p: True)
        self.assertEqual(v.others, [])

    def test_busy_samples(self):
        busy = [(GRADER, 30, 10), (CAND, 50, 40), (9999, 80, 20)]
        got = cotenant.classify_busy(busy, set(OWN), True, 3, is_visible=lambda p: False, name_of=lambda p: "")
        self.assertEqual([p.pid for p in got], [9999])
        self.assertIn("exited or not visible here", got[0].name)
        self.assertIn("SM 80%", got[0].name)
        self.assertEqual(cotenant.classify_busy(busy, set(), False, 3), [])
        self.assertEqual(len(cotenant.classify_busy(busy + [(1, 1, 0)], set(), False, 3)), 4)


class WatchTest(unittest.TestCase):
    def test_not_shared(self):
        w = watch(FakeSource([ours()], busy=[]))
        for i in range(5):
            self.assertFalse(w.poll(f"round {i}"))
        self.assertFalse(w.finish())
        self.assertIsNone(w.cannot_tell())
        self.assertTrue(w.check().startswith("ok: no other process in 6 reads of fake list"), w.check())

    def test_shared_midway_names_the_pid_and_phase(self):
        w = watch(FakeSource([ours(), ours(), ours() + [Proc(4242, "python3", 3 << 30)], ours()]))
        self.assertFalse(w.poll("before"))
        self.assertFalse(w.poll("round 1"))
        self.assertTrue(w.poll("round 2"))
        self.assertTrue(w.poll("round 3"))   # sticky for the scenario, though gone now
        w.finish()
        msg = w.cannot_tell()
        self.assertIn("the device was shared with PID 4242 (python3), 3072 MiB, seen round 2", msg)
        self.assertTrue(msg.endswith("during the timed calls"))
        self.assertTrue(w.check().startswith("shared: 1 other process(es)"))

    def test_a_process_that_came_and_went_between_reads_is_caught_by_busy_samples(self):
        w = watch(FakeSource([ours()], busy=[(GRADER, 20, 5), (31337, 90, 60)]))
        self.assertFalse(w.poll("round 1"))
        self.assertTrue(w.finish())
        self.assertIn("PID 31337", w.cannot_tell())
        self.assertIn("process-utilization samples", w.cannot_tell())

    def test_rate_limit_only_when_not_forced(self):
        src = FakeSource([ours()])
        src.min_interval_s = 3600.0
        w = watch(src)
        w.poll("before")
        w.poll("round 1", force=False)
        w.poll("round 2", force=False)
        self.assertEqual(src.reads, 1)
        w.poll("after")
        self.assertEqual(src.reads, 2)

    def test_failed_reads_are_reported_not_hidden(self):
        w = watch(FakeSource([ours()], fail_at={1, 2, 3}))
        w.poll("a")
        w.poll("b")
        w.poll("c")
        self.assertFalse(w.shared())
        self.assertTrue(w.check().startswith("unavailable: every read of fake list failed"), w.check())
        w.poll("d")
        self.assertIn("3 failed read(s)", w.check())
        self.assertTrue(w.check().startswith("ok:"))

    def test_no_source_is_unavailable_never_ok(self):
        w = watch(None)
        self.assertFalse(w.poll("before"))
        self.assertFalse(w.finish())
        self.assertEqual(w.check("NVML: gone; nvidia-smi: gone"), "unavailable: NVML: gone; nvidia-smi: gone")


class SourcesTest(unittest.TestCase):
    def test_nvml_missing_falls_back_to_nvidia_smi_then_to_nothing(self):
        def no_nvml(bus, index):
            raise cotenant.Unavailable("libnvidia-ml.so.1 cannot be loaded")

        class Smi:
            def __init__(self, bus):
                self.bus = bus

        src, why = cotenant.open_source("0000:01:00.0", 0, nvml=no_nvml, smi=Smi)
        self.assertIsInstance(src, Smi)
        self.assertEqual(why, ["libnvidia-ml.so.1 cannot be loaded"])

        def no_smi(bus):
            raise cotenant.Unavailable("nvidia-smi: not found")

        src, why = cotenant.open_source("0000:01:00.0", 0, nvml=no_nvml, smi=no_smi)
        self.assertIsNone(src)
        self.assertEqual(why, ["libnvidia-ml.so.1 cannot be loaded", "nvidia-smi: not found"])
        w = cotenant.Watch("0000:01:00.0", own_fn(), opener=lambda b, i: cotenant.open_source(
            b, i, nvml=no_nvml, smi=no_smi))
        self.assertIsNone(w.source)
        sw = w.scenario()
        sw.finish()
        self.assertEqual(sw.check(w.unavailable),
                         "unavailable: libnvidia-ml.so.1 cannot be loaded; nvidia-smi: not found")
        self.assertTrue(w.compute_mode().startswith("unknown"))

    def test_a_broken_library_does_not_raise(self):
        def boom(bus, index):
            raise OSError("segfault-ish")

        def no_smi(bus):
            raise cotenant.Unavailable("no smi")
        src, why = cotenant.open_source(None, 0, nvml=boom, smi=no_smi)
        self.assertIsNone(src)
        self.assertIn("OSError: segfault-ish", why[0])

    def test_real_nvml_absent_or_present(self):
        # here (CI) there is usually no driver: it must say so, not raise
        try:
            s = cotenant.NvmlSource(None, 0, libname="libnvidia-ml-not-here.so.1")
        except cotenant.Unavailable as e:
            self.assertIn("cannot be loaded", str(e))
        else:  # pragma: no cover
            self.fail(f"loaded {s}")

    def test_nvidia_smi_parsing_and_filtering(self):
        text = ("00000000:1B:00.0, 4242, python3, 3072\n"
                "00000000:1C:00.0, 5555, other, 100\n"
                "00000000:1B:00.0, 6000, /usr/bin/my, odd name, [N/A]\n")
        got = cotenant.parse_smi_apps(text, cotenant.norm_bus_id("0000:1b:00.0"))
        self.assertEqual([(p.pid, p.name, p.used_bytes) for p in got],
                         [(4242, "python3", 3072 << 20), (6000, "/usr/bin/my, odd name", None)])
        self.assertEqual(len(cotenant.parse_smi_apps(text, None)), 3)
        self.assertEqual(cotenant.parse_smi_apps("No running processes found\n", None), [])

    def test_nvidia_smi_source_errors(self):
        def missing(*a, **k):
            raise FileNotFoundError("nvidia-smi")
        with self.assertRaises(cotenant.Unavailable):
            cotenant.SmiSource("0000:1b:00.0", run=missing)

        def failing(cmd, **k):
            return subprocess.CompletedProcess(cmd, 9, "", "NVIDIA-SMI has failed")
        with self.assertRaises(cotenant.Unavailable) as c:
            cotenant.SmiSource("0000:1b:00.0", run=failing)
        self.assertIn("exited 9", str(c.exception))

        def ok(cmd, **k):
            if any("compute_mode" in a for a in cmd):
                return subprocess.CompletedProcess(cmd, 0, "00000000:1B:00.0, Exclusive_Process\n", "")
            return subprocess.CompletedProcess(cmd, 0, "00000000:1B:00.0, 77, x, 1\n", "")
        s = cotenant.SmiSource("0000:1b:00.0", run=ok)
        self.assertEqual([p.pid for p in s.compute_processes()], [77])
        self.assertEqual(s.compute_mode(), "Exclusive_Process")

    def test_bus_ids(self):
        self.assertEqual(cotenant.norm_bus_id("00000000:1B:00.0"), "0000:1b:00.0")
        self.assertEqual(cotenant.norm_bus_id("0000:1b:00.0"), "0000:1b:00.0")
        self.assertIsNone(cotenant.norm_bus_id(""))


class OwnProcessesTest(unittest.TestCase):
    def test_nspid_and_device_nodes_of_this_process(self):
        ns = cotenant.nspids(os.getpid())
        self.assertIn(os.getpid(), ns)
        self.assertFalse(cotenant.holds_nvidia_device(2 ** 22 + 12345))
        self.assertTrue(cotenant.visible(os.getpid()))
        self.assertFalse(cotenant.visible(0))


class VerdictTest(unittest.TestCase):
    """What the grader writes: cotenant.void_timing, then results.make_record."""
    BUSY = "work continued after the timed region: the device was busy a median 900.0 us"
    SHARED = "the device was shared with PID 4242 (python3), seen round 2 during the timed calls"

    def test_timing_failure_on_a_shared_device_is_cannot_tell(self):
        fail, ct, voided = cotenant.void_timing(self.BUSY, True, self.SHARED)
        self.assertIsNone(fail)
        self.assertEqual(ct, self.SHARED)
        self.assertEqual(voided, self.BUSY)
        rec = results.make_record("s", fail is None, 1200.0, 1100.0, reason=fail, cannot_tell=ct, voided=voided)
        self.assertTrue(rec["correct"])
        self.assertEqual(rec["cannot_tell"], self.SHARED)
        self.assertNotIn("reason", rec)
        self.assertEqual(results.validate_line(results.dumps(rec)), [])

    def test_no_failure_on_a_shared_device_is_cannot_tell_too(self):
        self.assertEqual(cotenant.void_timing(None, False, self.SHARED), (None, self.SHARED, None))

    def test_output_failure_stands_on_a_shared_device(self):
        bad = "trial 1: 5 of 100 elements differ from the reference"
        self.assertEqual(cotenant.void_timing(bad, False, self.SHARED), (bad, None, None))

    def test_alone_nothing_changes(self):
        self.assertEqual(cotenant.void_timing(self.BUSY, True, None), (self.BUSY, None, None))
        self.assertEqual(cotenant.void_timing(None, False, None), (None, None, None))

    def test_a_hung_call_on_a_shared_device_may_be_untimed(self):
        rec = results.make_record("s", True, None, 1100.0, cannot_tell=self.SHARED)
        self.assertEqual(rec["time_us"], results.NOT_TIMED_US)
        with self.assertRaises(ValueError):
            results.make_record("s", True, 1.0, 2.0, cannot_tell="")
        self.assertTrue(results.validate_line(
            '{"scenario":"a","correct":true,"time_us":1,"baseline_us":1,"cannot_tell":""}'))


if __name__ == "__main__":
    unittest.main()
