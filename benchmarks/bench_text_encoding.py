"""Time MiniLM (all-MiniLM-L6-v2) encoding of GoEmotions' train split.

Reads ``goemotions/train.tsv`` (TAB-separated: text, comma-separated label ids, comment id; no
header; no quoting) and prints a table of n, seconds and texts/s. Model loading is timed apart
from encoding. With ``--limit`` only the first texts are encoded and the time for the whole
split is extrapolated (and marked as such).

Usage::

    python benchmarks/bench_text_encoding.py [--data PATH] [--limit 5000] [--batch-size 64]
                                             [--device cpu] [--threads N]
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def default_data_path() -> Path:
    root = os.environ.get("LSNPC_SHARED_DATA")
    base = Path(root) if root else REPO.parent / "shared" / "data"
    return base / "goemotions" / "train.tsv"


def read_texts(path: Path) -> list[str]:
    """The first column of a GoEmotions TSV; quoting is off because texts contain quote marks."""
    csv.field_size_limit(sys.maxsize)
    with open(path, encoding="utf-8", newline="") as fh:
        return [row[0] for row in csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE) if row]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data_path())
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--limit", type=int, default=None, help="encode only the first N texts")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args(argv)

    import torch
    from rich.console import Console
    from rich.table import Table

    from lsnpc.features import TextEncoder

    if not args.data.is_file():
        sys.exit(f"GoEmotions train split not found at {args.data} (use --data or LSNPC_SHARED_DATA)")
    texts = read_texts(args.data)
    n_total = len(texts)
    if args.limit is not None:
        texts = texts[: args.limit]

    start = time.perf_counter()
    encoder = TextEncoder(args.model, num_threads=args.threads)
    encoder.model  # noqa: B018 - load now so it is not part of the encoding time
    load_s = time.perf_counter() - start

    start = time.perf_counter()
    X = encoder.encode(texts, batch_size=args.batch_size, device=args.device)
    encode_s = time.perf_counter() - start
    rate = len(texts) / encode_s

    threads = args.threads or torch.get_num_threads()
    table = Table(
        title=f"{encoder.name} on GoEmotions train ({args.device}, {threads} torch threads, "
        f"batch {args.batch_size}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs)"
    )
    for column in ("what", "n", "seconds", "texts/s"):
        table.add_column(column, justify="right" if column != "what" else "left")
    table.add_row("import + load model", "", f"{load_s:.1f}", "")
    table.add_row("encode", f"{len(texts):,}", f"{encode_s:.1f}", f"{rate:,.0f}")
    if len(texts) < n_total:
        table.add_row("whole split (extrapolated)", f"{n_total:,}", f"{n_total / rate:.0f}", f"{rate:,.0f}")
    Console().print(table)
    print(f"embeddings: {X.shape} {X.dtype}")


if __name__ == "__main__":
    main()
