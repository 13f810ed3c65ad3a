#!/usr/bin/env python3
"""Enumerate every assistant message of the shared transcript corpus.

The corpus (default ../shared/corpus relative to the repository root) holds
real agent transcripts from public sources, one folder per source, in about
eleven formats described in its README.md. This script reads each format and
writes one JSON object per assistant message, so that messages can be labelled
and a classifier evaluated on them.

    python3 tests/moments/corpus.py extract [--corpus DIR] [--out FILE] [--source NAME ...]
    python3 tests/moments/corpus.py counts  [--corpus DIR] [--source NAME ...]

Output schema (JSON Lines, one object per message, deterministic order:
sources by folder name, files by path, messages in file order):

    id       "<source>/<file>#<locator>", unique
    source   folder name under the corpus
    file     path relative to the source folder
    locator  L<n>: 1-based line of the JSONL record, or of the first line of
             the message/section in markdown and plain text;
             E<n>: 1-based index of the message among all div.event /
             div.message elements of an HTML page
    agent    harness that wrote it (claude-code, codex, gemini-cli, ...) or "unknown"
    text     the assistant's prose (no thinking, no tool calls, no markup)
    context  last 1500 characters of what the agent saw just before: the tool
             output since the previous assistant message, or where the format
             has none, the preceding tool calls / user turn; "" when none

Standard library only (Python 3.11).
"""
import argparse
import json
import re
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

CONTEXT_CHARS = 1500

# "assistant messages" column of the table in the corpus README.md.
# For the two document sources the README counts documents, not messages.
# Known differences: claude.ai has 5 turns with no prose left (only commands,
# outputs and thinking); nikblanchet's 2025-11-20-6f7b5e59 export is indented
# by two spaces, and its 27 text sections are missing from the README figure;
# bookminder also counts prose shown just before a plan (ExitPlanMode) output.
README_COUNTS = {
    "antigravity-agarwalbhavya-bhume-boundary-correction": 197,
    "antigravity-nishad773-bhume": 105,
    "claude-ai-isaacnudeton-firstproof-benchmark": 59,
    "claude-code-m-thisness-m-claude": 216,
    "claude-code-nikblanchet-claude-code-production-patterns": 439,
    "claude-code-orban-intent-layer": 165,
    "claude-code-tatestaples-original_performance_takehome": 36,
    "claude-code-tonyandrewmeyer-beszel-k8s-operator": 156,
    "claude-code-vsla": 747,
    "codex-akashjana18-edgerunner": 36,
    "mixed-agents-infatoshi-kernelbench.com": 1365,
    "mixed-agents-palimondo-bookminder": 1394,
    "mixed-agents-pratikbuilds-trade_arena": 36,
    "mixed-agents-yibinlong-anthropic_performance_take_home": 30,
}
DOCUMENT_SOURCES = {
    "claude-code-tatestaples-original_performance_takehome",
    "mixed-agents-yibinlong-anthropic_performance_take_home",
}


class Stats:
    def __init__(self):
        self.files = 0
        self.messages = 0
        self.skipped = 0
        self.empty = 0  # turns with no prose left (claude.ai)


class Context:
    """Accumulates what the agent saw since its previous message."""

    def __init__(self):
        self.parts = []

    def add(self, text):
        text = (text or "").strip()
        if text:
            self.parts.append(text)

    def take(self):
        joined = "\n\n".join(self.parts)
        self.parts = []
        return joined[-CONTEXT_CHARS:]


def read_jsonl(path, stats):
    """Yield (line number, object) for each parsable non-empty line."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield n, json.loads(line)
            except json.JSONDecodeError:
                stats.skipped += 1


# ---------------------------------------------------------------- HTML ----

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link",
        "meta", "param", "source", "track", "wbr"}
PARA = {"p", "pre", "ul", "ol", "table", "blockquote", "hr", "h1", "h2", "h3",
        "h4", "h5", "h6"}
LINE = {"div", "li", "tr", "br", "dt", "dd", "details", "summary", "section"}


class Node:
    __slots__ = ("tag", "attrs", "children", "parent")

    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.children, self.parent = tag, dict(attrs), [], parent

    @property
    def classes(self):
        return (self.attrs.get("class") or "").split()

    def iter(self):
        for c in self.children:
            if isinstance(c, Node):
                yield c
                yield from c.iter()

    def kids(self, cls):
        return [c for c in self.children if isinstance(c, Node) and cls in c.classes]


class TreeBuilder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = self.cur = Node("#root", {}, None)

    def handle_starttag(self, tag, attrs):
        node = Node(tag, attrs, self.cur)
        self.cur.children.append(node)
        if tag not in VOID:
            self.cur = node

    def handle_endtag(self, tag):
        node = self.cur
        while node is not self.root and node.tag != tag:
            node = node.parent
        if node is not self.root:  # ignore stray end tags
            self.cur = node.parent

    def handle_data(self, data):
        self.cur.children.append(data)


def parse_html(path):
    builder = TreeBuilder()
    builder.feed(Path(path).read_text(encoding="utf-8"))
    builder.close()
    return builder.root


def html_text(node, skip=lambda n: False):
    """Text content; block elements separated by newlines, paragraphs by a blank line."""
    out = []  # strings, and ints for pending line breaks

    def walk(n, in_pre):
        for c in n.children:
            if isinstance(c, str):
                if in_pre or not (c.isspace() and "\n" in c):
                    out.append(c)
                continue
            if c.tag in ("script", "style", "button") or skip(c):
                continue
            brk = 2 if c.tag in PARA else 1 if c.tag in LINE else 0
            if c.tag in ("td", "th"):
                out.append(" | ")
            if brk:
                out.append(brk)
            walk(c, in_pre or c.tag == "pre")
            if brk:
                out.append(brk)

    walk(node, node.tag == "pre")
    text, pending = [], 0
    for piece in out:
        if isinstance(piece, int):
            pending = max(pending, piece)
        else:
            if pending and text:
                text.append("\n" * pending)
            pending = 0
            text.append(piece)
    joined = re.sub(r"[ \t]+\n", "\n", "".join(text))
    return re.sub(r"\n{3,}", "\n\n", joined).strip()


# ------------------------------------------------------------- formats ----
# Each format function takes (path, rel, stats) and yields
# (locator, agent, text, context) in file order.

def fmt_claude_code(path, rel, stats):
    """Claude Code JSONL: assistant lines with text blocks; tool_result before."""
    ctx = Context()
    for n, d in read_jsonl(path, stats):
        content = (d.get("message") or {}).get("content")
        if not isinstance(content, list):
            continue
        if d.get("type") == "assistant":
            texts = [b.get("text", "").strip() for b in content
                     if b.get("type") == "text" and b.get("text", "").strip()]
            if texts:
                yield f"L{n}", "claude-code", "\n\n".join(texts), ctx.take()
        elif d.get("type") == "user":
            for b in content:
                if b.get("type") == "tool_result":
                    c = b.get("content")
                    if isinstance(c, list):
                        c = "\n".join(x.get("text", "[image]") for x in c)
                    ctx.add(c if isinstance(c, str) else "")


def fmt_codex(path, rel, stats):
    """Codex rollout JSONL: response_item messages of role assistant."""
    ctx = Context()
    for n, d in read_jsonl(path, stats):
        p = d.get("payload") or {}
        if d.get("type") != "response_item":
            continue  # event_msg agent_message mirrors the messages
        if p.get("type") == "message" and p.get("role") == "assistant":
            texts = [b.get("text", "").strip() for b in p.get("content") or []
                     if b.get("text", "").strip()]
            if texts:
                yield f"L{n}", "codex", "\n\n".join(texts), ctx.take()
        elif p.get("type") in ("function_call_output", "custom_tool_call_output"):
            out = p.get("output")
            if isinstance(out, list):
                out = "\n".join(x.get("text", "") for x in out if isinstance(x, dict))
            ctx.add(out if isinstance(out, str) else json.dumps(out))


def fmt_antigravity(path, rel, stats):
    """Antigravity JSONL: PLANNER_RESPONSE steps with content; tool steps before."""
    ctx = Context()
    for n, d in read_jsonl(path, stats):
        if d.get("type") == "PLANNER_RESPONSE":
            if (d.get("content") or "").strip():
                yield f"L{n}", "antigravity", d["content"].strip(), ctx.take()
        elif d.get("source") == "MODEL":  # RUN_COMMAND, VIEW_FILE, CODE_ACTION, ...
            ctx.add(d.get("content"))


def fmt_trade_arena(path, rel, stats):
    """Sanitised JSONL: assistant messages not starting with [tool_use:."""
    agent = "codex" if "codex" in rel else "claude-code"
    ctx = Context()
    for n, d in read_jsonl(path, stats):
        kind, text = d.get("type"), d.get("text") or ""
        if kind == "message" and d.get("role") == "assistant" \
                and not text.startswith("[tool_use:"):
            if text.strip():
                yield f"L{n}", agent, text.strip(), ctx.take()
        elif kind == "message":  # user turn or tool call
            ctx.add(text)
        elif kind in ("tool_summary", "file_change"):
            rest = {k: v for k, v in d.items() if k not in ("type", "timestamp")}
            ctx.add(json.dumps(rest, ensure_ascii=False))


def fmt_beszel_html(path, rel, stats):
    """Claude Code HTML pages: div.message; assistant-text; tool-reply after."""
    root = parse_html(path)
    ctx = Context()
    messages = [n for n in root.iter() if n.tag == "div" and "message" in n.classes]
    for i, m in enumerate(messages, 1):
        if "assistant" in m.classes:
            parts = [html_text(t) for t in m.iter() if "assistant-text" in t.classes]
            parts = [p for p in parts if p]
            if parts:
                yield f"E{i}", "claude-code", "\n\n".join(parts), ctx.take()
        elif "tool-reply" in m.classes:
            results = [t for t in m.iter() if "tool-result" in t.classes]
            for r in results or m.kids("message-content"):
                ctx.add(html_text(r))


KB_AGENTS = {"codex": "codex", "claude": "claude-code", "zai-claude": "claude-code",
             "droid": "droid", "gemini": "gemini-cli", "opencode": "opencode"}


def fmt_kernelbench_html(path, rel, stats):
    """KernelBench run pages: div.event; assistant div.body; tool events after."""
    harness = (Path(rel).name.split("_") + ["", "", ""])[2]  # <date>_<time>_<harness>_...
    agent = KB_AGENTS.get(harness, "unknown")
    root = parse_html(path)
    ctx = Context()
    events = [n for n in root.iter() if n.tag == "div" and "event" in n.classes]
    for i, ev in enumerate(events, 1):
        role = ev.attrs.get("data-role")
        if role == "assistant":
            bodies = [html_text(b) for b in ev.kids("body")]
            bodies = [b for b in bodies if b]
            if bodies:
                yield f"E{i}", agent, "\n\n".join(bodies), ctx.take()
        elif role == "tool":
            ctx.add(html_text(ev, skip=lambda n: "role" in n.classes or n.tag == "summary"))


def fmt_nikblanchet_md(path, rel, stats):
    """Markdown export: '## 🤖 Claude' sections not starting with a tool call."""
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    sections, cur, indent = [], None, ""  # (start line, role, body lines)
    for n, line in enumerate(lines, 1):
        if line.strip() in ("## 🤖 Claude", "## 👤 User"):
            cur = (n, "claude" if "Claude" in line else "user", [])
            sections.append(cur)
            indent = line[:len(line) - len(line.lstrip())]  # one export is indented
        elif cur:
            cur[2].append(line[len(indent):] if line.startswith(indent) else line)
    ctx = Context()
    for n, role, body in sections:
        text = re.sub(r"\n---\s*$", "", "\n".join(body).strip()).strip()
        prose, tool, calls = text.partition("🔧 Using tool")  # text, then a call
        if role == "claude" and prose.strip():
            yield f"L{n}", "claude-code", prose.strip(), ctx.take()
            ctx.add(tool + calls)
        else:  # tool calls and user turns (no tool output in this export)
            ctx.add(text)


BOOK_MARKERS = ("⏺", ">", "✦", "✻")
BOOK_STATUS = ("⏺ Update Todos", "⏺ User approved Claude's plan", "⏺ Compact summary")
BOOK_TOOL = re.compile(r"⏺ [A-Z][\w.:-]*(?: [A-Z][\w.:-]*)?(?: \(MCP\))?\(")


def fmt_bookminder_txt(path, rel, stats):
    """Console copy: ⏺ text blocks (Claude Code) and ✦ blocks (Gemini CLI)."""
    lines = Path(path).read_text(encoding="utf-8").split("\n")

    def is_marker(line):
        return line.startswith(BOOK_MARKERS) or line.lstrip().startswith("╭")

    ctx = Context()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("╭"):  # boxed tool output or boxed prompt
            j = i + 1
            while j < len(lines) and not lines[j - 1].lstrip().startswith("╰"):
                j += 1
            inner = [re.sub(r"^\s*│ ?|\s*│\s*$", "", l).rstrip()
                     for l in lines[i + 1:j] if not l.lstrip().startswith("╰")]
            first = next((l.strip() for l in inner if l.strip()), "")
            if not first.startswith(">"):
                ctx.add("\n".join(inner))
            i = j
            continue
        if not line.startswith(("⏺", "✦")):
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not is_marker(lines[j]):
            j += 1
        block = lines[i:j]
        out_at = next((k for k, l in enumerate(block) if l.lstrip().startswith("⎿")),
                      len(block))
        output = "\n".join(re.sub(r"^\s*⎿\s{0,2}|^ {1,5}", "", l) for l in block[out_at:])
        if BOOK_TOOL.match(line) or line.startswith(BOOK_STATUS):
            ctx.add(output)
            i = j
            continue
        # Text, up to any ⎿ output (a plan shown by ExitPlanMode has no call line)
        body = [line[2:].strip()] + [re.sub(r"^ {1,2}", "", l).rstrip() for l in block[1:out_at]]
        text = re.sub(r"\n{3,}", "\n\n", "\n".join(body)).strip()
        if text:
            agent = "claude-code" if line.startswith("⏺") else "gemini-cli"
            yield f"L{i + 1}", agent, text, ctx.take()
        ctx.add(output)
        i = j


def fmt_claude_ai_txt(path, rel, stats):
    """claude.ai export: one message per '--- Claude [...] ---' turn."""
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    starts = [n for n, l in enumerate(lines) if re.match(r"--- Claude \[.*\] ---\s*$", l)]
    prev_output = ""
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        prose, outputs, fence, thinking, last_prose = [], [], None, False, ""
        for line in lines[start + 1:end]:
            s = line.strip()
            if fence is not None:  # inside a fenced block
                if s == "```":
                    if fence == "output":
                        outputs.append("\n".join(buf))
                    fence = None
                else:
                    buf.append(line)
            elif thinking:
                thinking = s != "</thinking>"
            elif s == "<thinking>":
                thinking = True
            elif s.startswith("```"):
                lang = s[3:].strip()
                fence = "output" if not lang and not last_prose.startswith("File:") else "other"
                buf = []
            elif not s.startswith("File:"):
                prose.append(line.rstrip())
            if s and fence is None and not thinking and not s.startswith("```"):
                last_prose = s
        text = re.sub(r"\n{3,}", "\n\n", "\n".join(prose)).strip()
        if text:
            yield f"L{start + 1}", "claude-ai", text, prev_output[-CONTEXT_CHARS:]
        else:
            stats.empty += 1
        prev_output = outputs[-1].strip() if outputs else ""


def markdown_sections(path):
    """Split a markdown file at ## / ### headings (outside code fences)."""
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    sections, cur, fence = [], [1, []], False
    for n, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            fence = not fence
        elif not fence and re.match(r"#{2,3} ", line):
            sections.append(cur)
            cur = [n, []]
        cur[1].append(line)
    sections.append(cur)
    for start, body in sections:
        prose, fence = [], False
        for line in body:
            if line.lstrip().startswith("```"):
                fence = not fence
            elif not fence and not re.match(r"#+ ", line):
                prose.append(line.strip())
        if len("".join(prose)) < 40:
            continue
        while body and not body[0].strip():  # start at the first written line
            body, start = body[1:], start + 1
        yield start, "\n".join(body).strip()


def fmt_documents(path, rel, stats):
    """Agent-written markdown documents: one message per ##/### section."""
    agent = "unknown"
    if "tatestaples" in str(path):
        agent = "claude-code"
    elif rel.startswith("docs/improvements/"):
        agent = "claude" if Path(rel).name.startswith("B_") else "codex"
    for start, text in markdown_sections(path):
        yield f"L{start}", agent, text, ""


# -------------------------------------------------------------- sources ----
# folder -> (format function, glob of files, files to leave out)

def _not_prompts(rel):
    return rel.startswith("docs/prompts/")


SOURCES = {
    "antigravity-agarwalbhavya-bhume-boundary-correction": (fmt_antigravity, "**/*.jsonl", None),
    "antigravity-nishad773-bhume": (fmt_antigravity, "**/*.jsonl", None),
    "claude-ai-isaacnudeton-firstproof-benchmark": (fmt_claude_ai_txt, "*.txt", None),
    "claude-code-m-thisness-m-claude": (fmt_claude_code, "*.jsonl", None),
    "claude-code-nikblanchet-claude-code-production-patterns": (fmt_nikblanchet_md, "*.md", None),
    "claude-code-orban-intent-layer": (fmt_claude_code, "**/full.jsonl", None),
    "claude-code-tatestaples-original_performance_takehome": (fmt_documents, "**/*.md", None),
    "claude-code-tonyandrewmeyer-beszel-k8s-operator": (fmt_beszel_html, "*.html", None),
    "claude-code-vsla": (fmt_claude_code, "*.jsonl", None),
    "codex-akashjana18-edgerunner": (fmt_codex, "*.jsonl", None),
    "mixed-agents-infatoshi-kernelbench.com": (fmt_kernelbench_html, "*.html", None),  # not annotations/
    "mixed-agents-palimondo-bookminder": (fmt_bookminder_txt, "day-*.md", None),
    "mixed-agents-pratikbuilds-trade_arena": (fmt_trade_arena, "*.jsonl", None),
    "mixed-agents-yibinlong-anthropic_performance_take_home": (fmt_documents, "**/*.md", _not_prompts),
}


def extract_source(corpus, name, stats):
    """Yield the message objects of one source folder."""
    fmt, pattern, leave_out = SOURCES[name]
    folder = corpus / name
    files = sorted(p.relative_to(folder).as_posix() for p in folder.glob(pattern) if p.is_file())
    for rel in files:
        if leave_out and leave_out(rel):
            continue
        stats.files += 1
        for locator, agent, text, context in fmt(folder / rel, rel, stats):
            stats.messages += 1
            yield {"id": f"{name}/{rel}#{locator}", "source": name, "file": rel,
                   "locator": locator, "agent": agent, "text": text, "context": context}


def selected_sources(corpus, wanted):
    folders = sorted(p.name for p in corpus.iterdir() if p.is_dir())
    for name in folders:
        if name not in SOURCES:
            print(f"warning: no reader for folder {name}, skipped", file=sys.stderr)
    names = [n for n in folders if n in SOURCES]
    if wanted:
        unknown = set(wanted) - set(names)
        if unknown:
            sys.exit(f"unknown source(s): {', '.join(sorted(unknown))}")
        names = [n for n in names if n in wanted]
    return names


def extract_all(corpus, wanted, sink):
    """Run every selected source; call sink(obj) per message; return stats per source."""
    seen, results = set(), {}
    for name in selected_sources(corpus, wanted):
        stats = Stats()
        for obj in extract_source(corpus, name, stats):
            if obj["id"] in seen:
                raise SystemExit(f"duplicate id: {obj['id']}")
            seen.add(obj["id"])
            sink(obj)
        results[name] = stats
    return results


def cmd_extract(args):
    out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout
    started = time.monotonic()
    results = extract_all(args.corpus, args.source,
                          lambda o: out.write(json.dumps(o, ensure_ascii=False) + "\n"))
    if args.out:
        out.close()
    for name, s in results.items():
        empty = f", {s.empty} turns without prose" if s.empty else ""
        print(f"{name}: {s.files} files, {s.messages} messages, "
              f"{s.skipped} unparsable lines skipped{empty}", file=sys.stderr)
    total = sum(s.messages for s in results.values())
    print(f"total: {total} messages in {time.monotonic() - started:.1f}s", file=sys.stderr)


def cmd_counts(args):
    results = extract_all(args.corpus, args.source, lambda o: None)
    print(f"{'source':58} {'found':>6} {'readme':>6} {'diff':>7}")
    flagged, total = 0, 0
    for name, s in results.items():
        total += s.messages
        expected = README_COUNTS.get(name)
        # Document sources: the README counts documents, so compare files.
        found = s.files if name in DOCUMENT_SOURCES else s.messages
        diff = (found - expected) / expected * 100 if expected else 0.0
        flag = "  <-- beyond 5%" if abs(diff) > 5 else ""
        flagged += bool(flag)
        note = f"  ({s.messages} sections in {s.files} documents)" if name in DOCUMENT_SOURCES else ""
        print(f"{name:58} {found:6} {expected if expected else '?':>6} {diff:+6.1f}%{flag}{note}")
    print(f"total messages: {total}; sources beyond 5%: {flagged}")


def main():
    default_corpus = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("extract", "counts"):
        p = sub.add_parser(name)
        p.add_argument("--corpus", type=Path, default=default_corpus)
        p.add_argument("--source", nargs="+", metavar="NAME")
        if name == "extract":
            p.add_argument("--out", help="JSON Lines file (default stdout)")
    args = parser.parse_args()
    {"extract": cmd_extract, "counts": cmd_counts}[args.command](args)


if __name__ == "__main__":
    main()
