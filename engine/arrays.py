"""Embedding matrices <-> Arrow columns: (n, d) float32 matrices are stored as a
fixed-size-list column, so Parquet keeps them compact and reading them back is one reshape."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def embeddings_column(vectors: np.ndarray) -> pa.FixedSizeListArray:
    """An (n, d) matrix as a fixed-size-list<float32>[d] column."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vectors.shape[1])


def column_to_numpy(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Fixed-size-list embeddings column back to an (n, d) float32 matrix, zero-copy if possible."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    width = col.type.list_size
    return col.flatten().to_numpy(zero_copy_only=False).reshape(-1, width).astype(np.float32, copy=False)
