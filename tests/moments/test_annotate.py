"""Tests of the labelling tools (issue 48): spans found from quotes, Fleiss'
kappa, a merge of three annotations, and the committed labels being the
majority of the committed annotations. Run by .ci/run:

    python3 -m unittest discover -s tests/moments
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import annotate  # noqa: E402

LABELS_DIR = os.path.join(HERE, "..", "data", "moments")


class FindSpan(unittest.TestCase):
    def test_exact_loose_and_absent(self):
        text = "I profiled it.\nWe are at the **memory bandwidth** limit.  All done."
        self.assertEqual(annotate.find_span(text, "I profiled it."), [0, 14])
        # White space and emphasis marks loosened.
        sp = annotate.find_span(text, "We are at the memory bandwidth limit.")
        self.assertIsNotNone(sp)
        self.assertEqual(text[sp[0]:sp[1]], "We are at the **memory bandwidth** limit.")
        self.assertIsNone(annotate.find_span(text, "we beat cuBLAS"))
        self.assertIsNone(annotate.find_span(text, "   "))


class Kappa(unittest.TestCase):
    def test_perfect_agreement_is_one_and_chance_is_about_zero(self):
        self.assertAlmostEqual(annotate.fleiss([3, 0, 0, 3, 0]), 1.0)
        # Every item split 2 to 1: agreement no better than chance.
        self.assertLess(annotate.fleiss([2, 1, 2, 1]), 0.0)
        self.assertIsNone(annotate.fleiss([]))


class Merge(unittest.TestCase):
    def test_three_annotations_become_majority_labels_with_offsets(self):
        with tempfile.TemporaryDirectory() as d:
            msgs = [
                {"id": "s/f#L1", "source": "s", "file": "f", "locator": "L1", "text": "All tests pass. The task is complete.", "context": ""},
                {"id": "s/f#L2", "source": "s", "file": "f", "locator": "L2", "text": "Let me look at the profile.", "context": ""},
            ]
            with open(os.path.join(d, "m.jsonl"), "w") as f:
                f.writelines(json.dumps(m) + "\n" for m in msgs)
            os.makedirs(os.path.join(d, "b"))
            with open(os.path.join(d, "b", "index.jsonl"), "w") as f:
                f.write('{"n": "b00-0000", "id": "s/f#L1"}\n{"n": "b00-0001", "id": "s/f#L2"}\n')
            votes = {"a1": "The task is complete.", "a2": "The task is complete.", "a3": None}
            for who, quote in votes.items():
                os.makedirs(os.path.join(d, "ann", who))
                with open(os.path.join(d, "ann", who, "b00.jsonl"), "w") as f:
                    f.write(json.dumps({"n": "b00-0000", "labels": {"completion_claim": quote} if quote else {}}) + "\n")
                    f.write(json.dumps({"n": "b00-0001", "labels": {}}) + "\n")
            out = os.path.join(d, "out")
            r = subprocess.run([sys.executable, os.path.join(HERE, "annotate.py"), "merge", "--messages", os.path.join(d, "m.jsonl"),
                                "--batches", os.path.join(d, "b"), "--annotations", os.path.join(d, "ann"), "--out", out],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            rows = [json.loads(l) for l in open(os.path.join(out, "labels.jsonl"))]
            self.assertEqual(rows[0]["labels"], ["completion_claim"])
            self.assertEqual(rows[0]["spans"]["completion_claim"], [16, 37])
            self.assertEqual(rows[0]["votes"], {"completion_claim": 2})
            self.assertEqual(rows[1]["labels"], [])
            self.assertIn("kappa", open(os.path.join(out, "kappa.md")).read().lower())


class CommittedLabels(unittest.TestCase):
    """The committed labels are the majority of the committed annotations,
    with no text copied in."""

    def test_labels_are_the_majority_of_the_annotations(self):
        labels = [json.loads(l) for l in open(os.path.join(LABELS_DIR, "labels.jsonl"))]
        ann = {}
        for who in ("a1", "a2", "a3"):
            ann[who] = {r["id"]: r["labels"] for r in map(json.loads, open(os.path.join(LABELS_DIR, "annotations", who + ".jsonl")))}
        self.assertGreaterEqual(len(labels), 4000)
        self.assertEqual(len({r["source"] for r in labels}), 14, "every corpus source")
        for r in labels:
            votes = {l: sum(1 for w in ann if l in ann[w][r["id"]]) for l in annotate.LABELS}
            self.assertEqual(r["labels"], [l for l in annotate.LABELS if votes[l] >= 2], r["id"])
            self.assertEqual(set(r), {"id", "source", "file", "locator", "labels", "spans", "votes"}, "references only")
            for l, sp in r["spans"].items():
                self.assertIn(l, r["labels"])
                self.assertLess(sp[0], sp[1])


if __name__ == "__main__":
    unittest.main()
