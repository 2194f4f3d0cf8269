#!/usr/bin/env python3
"""Query-latency benchmark of ChromaDB on the vectors Kasten's own search bench uses.

ChromaDB (PyPI ``chromadb==1.5.9``) is the vector store of the A-Mem reference
library. This script measures it on exactly the 384-d vectors that
``kasten bench search --export DIR`` writes, so both numbers can be reported
side by side:

    DIR/meta.json    {"dim": 384, "corpus": N, "queries": Q}
    DIR/corpus.f32   N*dim little-endian float32, row-major, L2-normalised
    DIR/queries.f32  Q*dim little-endian float32

With ``--random N`` it generates N random unit vectors (plus ``--queries Q``
random unit queries) instead, as a smoke test.

What it does:
  1. creates a ``chromadb.PersistentClient`` in a fresh temporary directory
     (telemetry off; the directory is removed at the end);
  2. creates one collection with an HNSW index in the chosen space and
     Chroma's default HNSW parameters (as A-Mem does; ``--ef-search`` overrides
     ef_search for a recall-matched comparison), no embedding function;
  3. adds the corpus with ids "0".."N-1" in batches and times the ingest;
  4. runs a warm-up (corpus rows used as queries, not the measured queries),
     then times each measured query on its own call,
     ``collection.query(query_embeddings=[q], n_results=k)``, as an app would;
  5. reports p50/p95/p99/mean latency, ingest rate, process RSS, on-disk size
     of the persist directory, and recall@k against exact brute force (numpy).

The human-readable summary goes to stdout, or to stderr with ``--json``, in
which case stdout carries exactly one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

EXPECTED_CHROMA = "1.5.9"
DEFAULT_DIM = 384
COLLECTION_NAME = "kasten-bench"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Benchmark ChromaDB query latency on Kasten's exported bench vectors.",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--dir", type=Path, help="directory written by `kasten bench search --export DIR`")
    src.add_argument("--random", type=int, metavar="N", help="generate N random unit vectors (smoke test)")
    p.add_argument("--queries", type=int, default=200, metavar="Q",
                   help="number of random queries with --random (default 200)")
    p.add_argument("--dim", type=int, default=DEFAULT_DIM, help="dimension with --random (default 384)")
    p.add_argument("--seed", type=int, default=42, help="RNG seed for --random (default 42)")
    p.add_argument("-k", type=int, default=10, help="neighbours per query (default 10)")
    p.add_argument("--space", choices=("cosine", "l2"), default="cosine",
                   help="HNSW distance space (default cosine)")
    p.add_argument("--batch", type=int, default=5000,
                   help="vectors per add() call, capped at the client's max batch size (default 5000)")
    p.add_argument("--warmup", type=int, default=20, help="warm-up queries before timing (default 20)")
    p.add_argument("--ef-search", type=int, default=None,
                   help="override HNSW ef_search (default: Chroma's own default, as A-Mem uses it)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    args = p.parse_args(argv)
    for name in ("queries", "dim", "k", "batch"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1")
    if args.warmup < 0:
        p.error("--warmup must be >= 0")
    if args.ef_search is not None and args.ef_search < 1:
        p.error("--ef-search must be >= 1")
    if args.random is not None and args.random < 1:
        p.error("--random must be >= 1")
    return args


# ---------------------------------------------------------------------------
# input


def _read_matrix(path: Path, rows: int, dim: int) -> np.ndarray:
    data = np.fromfile(path, dtype="<f4")
    if data.size != rows * dim:
        raise SystemExit(f"{path}: expected {rows}*{dim} = {rows * dim} floats, found {data.size}")
    return data.reshape(rows, dim).astype(np.float32, copy=False)


def load_export(directory: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read the corpus and query matrices written by Kasten's bench export."""
    meta = json.loads((directory / "meta.json").read_text())
    dim, n, q = int(meta["dim"]), int(meta["corpus"]), int(meta["queries"])
    corpus = _read_matrix(directory / "corpus.f32", n, dim)
    queries = _read_matrix(directory / "queries.f32", q, dim)
    return corpus, queries


def random_unit(rng: np.random.Generator, rows: int, dim: int) -> np.ndarray:
    """Rows drawn uniformly from the unit sphere (normalised Gaussians)."""
    x = rng.standard_normal((rows, dim), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


# ---------------------------------------------------------------------------
# measurement helpers


def peak_rss_mb() -> float:
    """Peak resident set size of this process (ru_maxrss is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def current_rss_mb() -> float | None:
    """Current resident set size from /proc (Linux only)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def dir_size(path: Path) -> dict[str, int]:
    """Bytes on disk under path, split into the SQLite files and everything else (HNSW segments)."""
    sqlite = other = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            size = os.path.getsize(os.path.join(root, name))
            if name.startswith("chroma.sqlite3"):
                sqlite += size
            else:
                other += size
    return {"total": sqlite + other, "sqlite": sqlite, "index": other}


def exact_topk(corpus: np.ndarray, queries: np.ndarray, k: int, space: str, chunk: int = 64) -> np.ndarray:
    """Exact k nearest neighbours (row indices) of each query by brute force."""
    if space == "cosine":
        c = corpus / np.maximum(np.linalg.norm(corpus, axis=1, keepdims=True), 1e-30)
        qs = queries / np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-30)
    else:
        c, qs = corpus, queries
        c_sq = np.einsum("ij,ij->i", c, c)
    out = np.empty((len(qs), k), dtype=np.int64)
    for start in range(0, len(qs), chunk):
        block = qs[start:start + chunk]
        # smaller is nearer: cosine distance up to a constant, or squared L2 up to |q|^2
        dist = -(block @ c.T) if space == "cosine" else c_sq[None, :] - 2.0 * (block @ c.T)
        part = np.argpartition(dist, k - 1, axis=1)[:, :k]
        order = np.take_along_axis(dist, part, axis=1).argsort(axis=1)
        out[start:start + chunk] = np.take_along_axis(part, order, axis=1)
    return out


def recall_at_k(found: list[list[str]], truth: np.ndarray) -> float:
    k = truth.shape[1]
    hits = sum(len({int(i) for i in ids} & set(row.tolist())) for ids, row in zip(found, truth))
    return hits / (k * len(truth))


def latency_stats(seconds: list[float]) -> dict[str, float]:
    ms = np.asarray(seconds) * 1e3
    return {
        "p50_ms": float(np.percentile(ms, 50)),
        "p95_ms": float(np.percentile(ms, 95)),
        "p99_ms": float(np.percentile(ms, 99)),
        "mean_ms": float(ms.mean()),
        "min_ms": float(ms.min()),
        "max_ms": float(ms.max()),
    }


# ---------------------------------------------------------------------------
# the benchmark


def run(corpus: np.ndarray, queries: np.ndarray, args: argparse.Namespace, log) -> dict:
    import chromadb
    from chromadb.config import Settings

    if chromadb.__version__ != EXPECTED_CHROMA:
        log(f"warning: chromadb {chromadb.__version__} installed, the comparison targets {EXPECTED_CHROMA}")

    n, dim = corpus.shape
    k = args.k
    if k > n:
        raise SystemExit(f"-k {k} is larger than the corpus ({n} vectors)")

    rss_before_mb = current_rss_mb()
    persist = Path(tempfile.mkdtemp(prefix="chroma-bench-"))
    client = None
    try:
        # No network here: telemetry must be off or it tries to phone home.
        client = chromadb.PersistentClient(
            path=str(persist),
            settings=Settings(anonymized_telemetry=False, allow_reset=True),
        )
        hnsw: dict = {"space": args.space}
        if args.ef_search is not None:
            hnsw["ef_search"] = args.ef_search
        collection = client.create_collection(
            name=COLLECTION_NAME,
            configuration={"hnsw": hnsw},
            embedding_function=None,
        )
        max_batch = client.get_max_batch_size() if hasattr(client, "get_max_batch_size") else None
        batch = min(args.batch, max_batch) if max_batch else args.batch

        ids = [str(i) for i in range(n)]
        log(f"ingesting {n} x {dim} vectors in batches of {batch} (space={args.space}) ...")
        t0 = time.perf_counter()
        for start in range(0, n, batch):
            collection.add(ids=ids[start:start + batch], embeddings=corpus[start:start + batch])
        ingest_s = time.perf_counter() - t0
        count = collection.count()
        if count != n:
            raise SystemExit(f"collection holds {count} vectors after ingest, expected {n}")
        rss_after_ingest_mb = current_rss_mb()

        # First query after ingest, reported on its own (lazy loading would show here).
        t0 = time.perf_counter()
        collection.query(query_embeddings=[corpus[0]], n_results=k)
        first_query_ms = (time.perf_counter() - t0) * 1e3

        # Warm up on corpus rows spread over the index, never on the measured queries.
        if args.warmup:
            for row in np.linspace(0, n - 1, args.warmup).astype(int):
                collection.query(query_embeddings=[corpus[row]], n_results=k)

        log(f"timing {len(queries)} queries, k={k} ...")
        timings: list[float] = []
        found: list[list[str]] = []
        for q in queries:
            t0 = time.perf_counter()
            res = collection.query(query_embeddings=[q], n_results=k)
            timings.append(time.perf_counter() - t0)
            found.append(res["ids"][0])

        hnsw_config = dict((collection.configuration or {}).get("hnsw") or {})
        rss_end_mb = current_rss_mb()
        client.close()
        client = None
        disk = dir_size(persist)
    finally:
        if client is not None:
            try:
                client.close()
            except Exception:  # best effort; the directory goes anyway
                pass
        shutil.rmtree(persist, ignore_errors=True)

    log("computing exact neighbours for recall ...")
    truth = exact_topk(corpus, queries, k, args.space)

    return {
        "engine": "chromadb",
        "chromadb_version": chromadb.__version__,
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "cpus": os.cpu_count(),
        "source": str(args.dir) if args.dir else f"random(seed={args.seed})",
        "dim": dim,
        "corpus": n,
        "queries": len(queries),
        "k": k,
        "space": args.space,
        "hnsw": hnsw_config,
        "batch": batch,
        "max_batch_size": max_batch,
        "ingest_s": ingest_s,
        "ingest_vectors_per_s": n / ingest_s if ingest_s > 0 else None,
        "first_query_ms": first_query_ms,
        "warmup_queries": args.warmup,
        **latency_stats(timings),
        "recall_at_k": recall_at_k(found, truth),
        "rss_peak_mb": peak_rss_mb(),
        "rss_before_chroma_mb": rss_before_mb,
        "rss_after_ingest_mb": rss_after_ingest_mb,
        "rss_end_mb": rss_end_mb,
        "disk_bytes": disk["total"],
        "disk_sqlite_bytes": disk["sqlite"],
        "disk_index_bytes": disk["index"],
        "disk_bytes_per_vector": disk["total"] / n,
    }


def summary(r: dict) -> str:
    def mb(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.0f} MB"

    lines = [
        f"ChromaDB {r['chromadb_version']} | {r['corpus']} x {r['dim']}-d ({r['source']}), "
        f"{r['queries']} queries, k={r['k']}, space={r['space']}",
        f"  HNSW params      {', '.join(f'{k}={v}' for k, v in r['hnsw'].items() if k != 'space')}",
        f"  ingest           {r['ingest_s']:.2f} s = {r['ingest_vectors_per_s']:.0f} vectors/s "
        f"(batch {r['batch']}, max {r['max_batch_size']})",
        f"  first query      {r['first_query_ms']:.2f} ms (before {r['warmup_queries']} warm-up queries)",
        f"  latency          p50 {r['p50_ms']:.3f} ms | p95 {r['p95_ms']:.3f} ms | p99 {r['p99_ms']:.3f} ms | "
        f"mean {r['mean_ms']:.3f} ms | max {r['max_ms']:.3f} ms",
        f"  recall@{r['k']:<9} {r['recall_at_k']:.4f} (vs exact brute force)",
        f"  RSS              peak {mb(r['rss_peak_mb'])} | before chroma {mb(r['rss_before_chroma_mb'])} | "
        f"after ingest {mb(r['rss_after_ingest_mb'])} | end {mb(r['rss_end_mb'])}",
        f"  on disk          {r['disk_bytes']} bytes = {r['disk_bytes_per_vector']:.0f} bytes/vector "
        f"(sqlite {r['disk_sqlite_bytes']}, index {r['disk_index_bytes']})",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # With --json, stdout is reserved for the one JSON object.
    human = sys.stderr if args.json else sys.stdout

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if args.dir is not None:
        corpus, queries = load_export(args.dir)
    else:
        rng = np.random.default_rng(args.seed)
        corpus = random_unit(rng, args.random, args.dim)
        queries = random_unit(rng, args.queries, args.dim)
    if len(queries) == 0:
        raise SystemExit("no queries to run")

    result = run(corpus, queries, args, log)
    print(summary(result), file=human, flush=True)
    if args.json:
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
