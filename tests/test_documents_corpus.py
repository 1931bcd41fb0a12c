"""Robustness on a shared corpus of real-world and pathological PDFs.

Every file must yield a `ParsedDocument` or a `DocumentParseError` naming it; nothing else
may escape and the process must not die. Parsed files also go through extraction and
normalisation, which must cope with any text. Parsing runs in a worker subprocess, fed one
path at a time, so that a crash or hang inside PDFium shows up as a failed file (and a
fresh worker) instead of taking the test session down, and each file gets a deadline.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from queue import Empty, Queue
from typing import Any

import pytest

_ROOT = Path(__file__).resolve().parents[1]
_CORPUS = _ROOT.parent / "shared" / "corpus" / "pdf"
_PER_FILE_S = 20.0

_WORKER = r"""
import json, sys
from swarm_ray.documents import (
    DocumentParseError, default_dimensions, extract_facts, normalise_facts, parse_pdf,
)

for line in sys.stdin:
    path = line.rstrip("\n")
    try:
        doc = parse_pdf(path)
        doc.model_dump_json()
        # The extractor must take whatever text a real PDF yields, too.
        facts = normalise_facts(extract_facts(doc, default_dimensions()).facts).facts
        out = {"status": "ok", "pages": len(doc.pages), "facts": len(facts),
               "warnings": [w.code for w in doc.warnings]}
    except DocumentParseError as error:
        out = {"status": "error", "reason": error.reason, "path": error.path,
               "message": error.message}
    except BaseException as error:
        out = {"status": "raised", "type": type(error).__name__, "message": str(error)}
    print(json.dumps(out), flush=True)
"""


class _Worker:
    """A parsing subprocess with a line-by-line protocol and per-file deadlines."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-W", "error", "-c", _WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=_ROOT,
        )
        self.lines: Queue[str] = Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put("")  # end of output: the worker died or was closed

    def parse(self, path: Path, timeout: float) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{path}\n")
        self.process.stdin.flush()
        try:
            line = self.lines.get(timeout=timeout)
        except Empty:
            return {"status": "timeout"}
        if not line:
            return {"status": "crashed", "returncode": self.process.wait()}
        result: dict[str, Any] = json.loads(line)
        return result

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


@pytest.mark.timeout(120)
def test_every_corpus_pdf_parses_or_fails_by_name() -> None:
    if not _CORPUS.is_dir():
        pytest.skip(f"no corpus at {_CORPUS}")
    files = sorted(p for p in _CORPUS.rglob("*") if p.is_file() and "\n" not in str(p))
    assert files
    results: dict[Path, dict[str, Any]] = {}
    worker = _Worker()
    try:
        for path in files:
            results[path] = worker.parse(path, _PER_FILE_S)
            if results[path]["status"] in ("timeout", "crashed"):
                worker.close()
                worker = _Worker()  # the next file gets a fresh process
    finally:
        worker.close()
    counts: Counter[str] = Counter()
    for result in results.values():
        counts[result.get("reason", result["status"])] += 1
    summary = {
        "ok": counts["ok"],
        "encrypted": counts["encrypted"],
        "malformed": counts["malformed"] + counts["truncated"],
        "other": sum(counts.values())
        - counts["ok"]
        - counts["encrypted"]
        - counts["malformed"]
        - counts["truncated"],
    }
    print(f"\ncorpus {_CORPUS}: {len(files)} files, {summary}; by reason {dict(counts)}")
    bad = {
        str(p): r
        for p, r in results.items()
        if r["status"] not in ("ok", "error")
        or (r["status"] == "error" and (r["path"] != str(p) or f"`{p}`" not in r["message"]))
    }
    assert bad == {}
    assert counts["ok"] > len(files) / 2  # most of a real-world corpus must parse
