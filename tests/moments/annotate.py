#!/usr/bin/env python3
"""Labels for the moment classifiers on real agent text (issue 48): the
batches annotators read, and the merge of their independent annotations
into the labels this repository keeps (references into ../shared/corpus,
never the text).

    python3 tests/moments/corpus.py extract --out /tmp/messages.jsonl
    python3 tests/moments/annotate.py batches --messages /tmp/messages.jsonl --out /tmp/batches
    # three annotators, each alone, write DIR/<annotator>/<batch>.jsonl
    python3 tests/moments/annotate.py merge --messages /tmp/messages.jsonl --batches /tmp/batches \
        --annotations DIR --out tests/data/moments
    python3 tests/moments/annotate.py kappa --labels tests/data/moments

An annotation file holds one JSON object per message of its batch:
`{"n": "b03-0117", "labels": {"completion_claim": "the words quoted"}}`,
`"labels": {}` for none. Criteria: tests/data/moments/CRITERIA.md.

What `merge` writes under --out:
- `annotations/<annotator>.jsonl`: each annotator's labels, one line per
  message: `{"id", "labels": {label: [start, end] | null}}`, the span as
  offsets (Unicode code points) into the message text that `corpus.py
  extract` gives, null when the quote was not found in it;
- `labels.jsonl`: the majority (2 of 3) per label, with the span of the
  first annotator (in annotator order) whose quote was found;
- `kappa.md`: Fleiss' kappa per label, pooled and per source.
"""

import argparse
import collections
import json
import os
import random
import re
import sys

LABELS = ["limit_claim", "completion_claim", "correctness_dismissal", "suspicious_gain_claim"]

# Optimisation sessions first (the order), then the rest by name.
OPTIMISATION = [
    "mixed-agents-infatoshi-kernelbench.com",
    "claude-code-vsla",
    "claude-code-tatestaples-original_performance_takehome",
    "mixed-agents-yibinlong-anthropic_performance_take_home",
    "claude-code-orban-intent-layer",
    "codex-akashjana18-edgerunner",
]

# What an annotator reads of a message and of its context: a long message
# keeps its start and its end.
TEXT_CAP = 2400
CONTEXT_CAP = 500

# Sources whose messages are sampled rather than all labelled (test-first
# application work, the furthest from an optimisation campaign): this many
# each, drawn with SEED.
SAMPLED = {"mixed-agents-palimondo-bookminder": 100, "claude-code-nikblanchet-claude-code-production-patterns": 100}
SEED = 48


def read_messages(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def order_key(m):
    s = m["source"]
    return (OPTIMISATION.index(s) if s in OPTIMISATION else len(OPTIMISATION), s)


def cut_text(text):
    """A long message keeps its start and its end (where reports put their
    conclusions); what is cut is said in the batch."""
    if len(text) <= TEXT_CAP:
        return text
    head, tail = TEXT_CAP * 2 // 3, TEXT_CAP // 3
    return text[:head] + f"\n[... {len(text) - head - tail} characters cut ...]\n" + text[-tail:]


def select(msgs):
    """Every message but those of SAMPLED sources, of which a seeded
    sample, kept in file order."""
    keep = []
    for src, k in SAMPLED.items():
        ids = [m["id"] for m in msgs if m["source"] == src]
        keep.extend(random.Random(f"{SEED}:{src}").sample(ids, min(k, len(ids))))
    keep = set(keep)
    return [m for m in msgs if m["source"] not in SAMPLED or m["id"] in keep]


def cmd_batches(a):
    msgs = select(read_messages(a.messages))
    # Optimisation sources first; each session in its own order (a stable
    # sort), so an annotator reads a message after the ones before it.
    msgs.sort(key=order_key)
    os.makedirs(a.out, exist_ok=True)
    index = []
    batch, b = [], 0

    def flush():
        nonlocal batch, b
        if not batch:
            return
        name = f"b{b:02d}"
        with open(os.path.join(a.out, name + ".txt"), "w", encoding="utf-8") as f:
            for n, m in batch:
                ctx = m.get("context", "")[-CONTEXT_CAP:]
                f.write(f"=== MESSAGE {n} (source {m['source']}, agent {m.get('agent', 'unknown')})\n")
                f.write("--- CONTEXT (what came just before; may be empty) ---\n")
                f.write(ctx.strip() + "\n")
                f.write("--- TEXT ---\n")
                f.write(cut_text(m["text"]).strip() + "\n\n")
        b += 1
        batch = []

    chars = 0
    for m in msgs:
        n = f"b{b:02d}-{len(batch):04d}"
        batch.append((n, m))
        index.append({"n": n, "id": m["id"]})
        chars += min(len(m["text"]), TEXT_CAP) + min(len(m.get("context", "")), CONTEXT_CAP) + 100
        if chars >= a.chars:
            flush()
            chars = 0
    flush()
    with open(os.path.join(a.out, "index.jsonl"), "w", encoding="utf-8") as f:
        for row in index:
            f.write(json.dumps(row) + "\n")
    print(f"{len(msgs)} messages in {b} batches of about {a.chars} characters under {a.out}")


def json_lines(path, problems, where):
    """(line number, object) of each non-blank line of a JSON-lines file;
    a line that is not JSON is reported as `where(i)` + the error and
    skipped."""
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield i, json.loads(line)
            except json.JSONDecodeError as e:
                problems.append(f"{where(i)}: not JSON: {e}")


def norm(s):
    return re.sub(r"\s+", " ", s).strip()


def find_span(text, quote):
    """Offsets of `quote` in `text`: exact, then with white space and
    markdown emphasis loosened, then case-insensitive. None if absent."""
    if not quote or not quote.strip():
        return None
    q = quote.strip().strip('"').strip()
    i = text.find(q)
    if i >= 0:
        return [i, i + len(q)]
    # Loose: any run of white space or emphasis marks in the quote matches
    # any such run in the text.
    parts = [re.escape(p) for p in re.split(r"[\s*_`]+", q) if p]
    if not parts:
        return None
    pat = r"[\s*_`]*".join(parts)
    for flags in (0, re.I):
        m = re.search(pat, text, flags)
        if m:
            return [m.start(), m.end()]
    # A quote that ends with "..." quoted a start.
    if q.endswith("...") or q.endswith("…"):
        return find_span(text, q.rstrip(".…").strip())
    return None


def read_annotations(root, index):
    """{annotator: {message id: {label: quote}}} and the problems found."""
    by_n = {r["n"]: r["id"] for r in index}
    out, problems = {}, []
    for who in sorted(os.listdir(root)):
        d = os.path.join(root, who)
        if not os.path.isdir(d):
            continue
        got = {}
        for name in sorted(os.listdir(d)):
            if not name.endswith(".jsonl"):
                continue
            path = os.path.join(d, name)
            for i, row in json_lines(path, problems, lambda i: f"{path}:{i}"):
                n = row.get("n")
                if n not in by_n:
                    problems.append(f"{path}:{i}: unknown message {n!r}")
                    continue
                labels = row.get("labels") or {}
                bad = [k for k in labels if k not in LABELS]
                if bad:
                    problems.append(f"{path}:{i}: unknown labels {bad}")
                got[by_n[n]] = {k: v for k, v in labels.items() if k in LABELS}
        out[who] = got
    return out, problems


def fleiss(rows):
    """Fleiss' kappa for binary ratings: rows are the number of raters (of
    k) who gave the label, per item, k constant. None when undefined."""
    if not rows:
        return None
    k = 3
    n = len(rows)
    p_yes = sum(rows) / (n * k)
    p_e = p_yes ** 2 + (1 - p_yes) ** 2
    p_i = [(r * (r - 1) + (k - r) * (k - r - 1)) / (k * (k - 1)) for r in rows]
    p_bar = sum(p_i) / n
    if p_e >= 1.0:
        return None
    return (p_bar - p_e) / (1 - p_e)


def cmd_merge(a):
    msgs = {m["id"]: m for m in read_messages(a.messages)}
    index = read_messages(os.path.join(a.batches, "index.jsonl"))
    ann, problems = read_annotations(a.annotations, index)
    who = sorted(ann)
    if len(who) != 3:
        sys.exit(f"merge: expected 3 annotators under {a.annotations}, found {who}")
    ids = [r["id"] for r in index if all(r["id"] in ann[w] for w in who)]
    missing = {w: sum(1 for r in index if r["id"] not in ann[w]) for w in who}
    os.makedirs(os.path.join(a.out, "annotations"), exist_ok=True)
    unfound = collections.Counter()
    spans = {w: {} for w in who}
    for w in who:
        with open(os.path.join(a.out, "annotations", f"{w}.jsonl"), "w", encoding="utf-8") as f:
            for i in ids:
                text = msgs[i]["text"]
                row = {}
                for label, quote in sorted(ann[w][i].items()):
                    sp = find_span(text, quote if isinstance(quote, str) else "")
                    if sp is None:
                        unfound[w] += 1
                    row[label] = sp
                spans[w][i] = row
                f.write(json.dumps({"id": i, "labels": row}, sort_keys=True) + "\n")
    n_pos = collections.Counter()
    with open(os.path.join(a.out, "labels.jsonl"), "w", encoding="utf-8") as f:
        for i in ids:
            m = msgs[i]
            votes = {l: sum(1 for w in who if l in spans[w][i]) for l in LABELS}
            labels = [l for l in LABELS if votes[l] >= 2]
            span = {}
            for l in labels:
                for w in who:
                    if spans[w][i].get(l):
                        span[l] = spans[w][i][l]
                        break
            n_pos.update(labels)
            f.write(json.dumps({
                "id": i, "source": m["source"], "file": m["file"], "locator": m["locator"],
                "labels": labels, "spans": span, "votes": {l: v for l, v in votes.items() if v},
            }, sort_keys=True) + "\n")
    print(f"{len(ids)} messages labelled by all of {who}; missing per annotator: {missing}")
    print(f"quotes not found in the message: {dict(unfound)}")
    print("positives (majority): " + ", ".join(f"{l} {n_pos[l]}" for l in LABELS))
    for p in problems[:20]:
        print("problem:", p)
    if len(problems) > 20:
        print(f"... and {len(problems) - 20} more problems")
    write_kappa(a.out)


def kappa_table(out):
    ann_dir = os.path.join(out, "annotations")
    who = sorted(f[:-6] for f in os.listdir(ann_dir) if f.endswith(".jsonl"))
    rows = {w: {} for w in who}
    for w in who:
        for r in read_messages(os.path.join(ann_dir, f"{w}.jsonl")):
            rows[w][r["id"]] = r["labels"]
    source = {r["id"]: r["source"] for r in read_messages(os.path.join(out, "labels.jsonl"))}
    ids = sorted(set.intersection(*(set(rows[w]) for w in who)))
    by_source = collections.defaultdict(list)
    for i in ids:
        by_source[source[i]].append(i)

    def k_of(sel, label):
        counts = [sum(1 for w in who if label in rows[w][i]) for i in sel]
        return fleiss(counts), sum(1 for c in counts if c >= 2)

    lines = ["| source | messages | " + " | ".join(LABELS) + " |", "|---|---|" + "---|" * len(LABELS)]
    for s in sorted(by_source) + ["pooled"]:
        sel = ids if s == "pooled" else by_source[s]
        cells = []
        for l in LABELS:
            k, pos = k_of(sel, l)
            cells.append(("n/a" if k is None else f"{k:.2f}") + f" ({pos})")
        lines.append(f"| {s} | {len(sel)} | " + " | ".join(cells) + " |")
    return who, len(ids), lines


def write_kappa(out):
    who, n, lines = kappa_table(out)
    text = (
        "# Agreement of the three annotations\n\n"
        f"Fleiss' kappa per label over {n} messages, three annotators ({', '.join(who)}),\n"
        "each alone; in brackets the messages the majority labelled. n/a: no\n"
        "annotator gave the label there (kappa undefined).\n"
        "Printed by `python3 tests/moments/annotate.py kappa --labels tests/data/moments`.\n\n"
        + "\n".join(lines) + "\n"
    )
    with open(os.path.join(out, "kappa.md"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text)


def cmd_check(a):
    """An annotator's own check of one batch file: every message of the
    batch once, known labels, every quote found in its message."""
    msgs = {m["id"]: m for m in read_messages(a.messages)}
    index = [r for r in read_messages(os.path.join(a.batches, "index.jsonl")) if r["n"].startswith(a.batch + "-")]
    want = {r["n"]: r["id"] for r in index}
    seen, errors = collections.Counter(), []
    for i, row in json_lines(a.file, errors, lambda i: f"line {i}"):
        n = row.get("n")
        if n not in want:
            errors.append(f"line {i}: {n!r} is not a message of batch {a.batch}")
            continue
        seen[n] += 1
        labels = row.get("labels")
        if not isinstance(labels, dict):
            errors.append(f"line {i} ({n}): `labels` must be an object ({{}} for none)")
            continue
        for label, quote in labels.items():
            if label not in LABELS:
                errors.append(f"line {i} ({n}): unknown label {label!r} (labels: {', '.join(LABELS)})")
            elif not isinstance(quote, str) or find_span(msgs[want[n]]["text"], quote) is None:
                errors.append(f"line {i} ({n}): the quote for {label} is not in the message: {str(quote)[:80]!r}")
    missing = [n for n in want if n not in seen]
    twice = [n for n, c in seen.items() if c > 1]
    for e in errors:
        print(e)
    if missing:
        print(f"{len(missing)} messages without a line: {', '.join(missing[:30])}{' ...' if len(missing) > 30 else ''}")
    if twice:
        print(f"messages with more than one line: {', '.join(twice)}")
    print(f"{len(seen)} of {len(want)} messages annotated, {len(errors)} problems")
    sys.exit(1 if errors or missing or twice else 0)


def cmd_kappa(a):
    who, n, lines = kappa_table(a.labels)
    print(f"{n} messages, annotators {who}")
    print("\n".join(lines))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("batches")
    b.add_argument("--messages", required=True)
    b.add_argument("--out", required=True)
    b.add_argument("--chars", type=int, default=250_000, help="characters a batch holds, about")
    m = sub.add_parser("merge")
    m.add_argument("--messages", required=True)
    m.add_argument("--batches", required=True)
    m.add_argument("--annotations", required=True)
    m.add_argument("--out", required=True)
    c = sub.add_parser("check")
    c.add_argument("--messages", required=True)
    c.add_argument("--batches", required=True)
    c.add_argument("--batch", required=True, help="b00, b01, ...")
    c.add_argument("--file", required=True)
    k = sub.add_parser("kappa")
    k.add_argument("--labels", required=True)
    a = p.parse_args()
    {"batches": cmd_batches, "merge": cmd_merge, "check": cmd_check, "kappa": cmd_kappa}[a.cmd](a)


if __name__ == "__main__":
    main()
