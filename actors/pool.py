"""The one way checkray maps a table through a pool of Ray Data actors.

``map_with_actors(data, ActorClass, kwargs, plan, batch_size=...)`` shards ``data`` (an
Arrow table, or a Parquet path read by Ray Data), runs ``ActorClass(**kwargs)`` on
``ActorPoolStrategy(size=plan.pool_size)`` with the plan's CPUs/GPUs, and either returns
the output table or writes Parquet shards (``write_to``). A plan made to run in the
driver (``ActorPlan.in_driver``: small encoder work on a one-node CPU Ray) maps a table
here, through the same wrapper (``map_here``). Every copy of this used to
differ in block sizing, order and errors; here they are decided once:

* **Order**: output rows are in input order. A table gets a hidden position column; a
  Parquet source names the column that already carries the order (``order_column``), and
  every written row keeps it. An actor that returns one row per input row needs to know
  nothing of this; an actor that returns several rows per input row adds ``_row`` (the
  row's index in its batch), and the position is looked up from it.
* **Errors**: a ``CheckrayError`` raised inside an actor (a missing model file ...)
  reaches the driver as that one-line error, not as Ray's wrapped traceback.
* **Faults**: actors restart and tasks retry a bounded number of times (Ray Data's
  defaults retry forever, so a batch whose actor is OOM-killed would loop).
* **Blocks**: at least two per actor, so every actor gets work; a table is cut into
  slices (no all-to-all repartition).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from checkray.engine.errors import InputError, user_error
from checkray.engine.memory import release_memory
from checkray.engine.runtime import ActorPlan

POSITION = "_pos"  # hidden order column added to a table input
ROW = "_row"  # a one-to-many actor's index of the input row (within its batch)
MAX_RESTARTS = 2
MAX_TASK_RETRIES = 2


class OrderedActor:
    """Wraps an actor class: hides the order column from it, and puts it back on its output."""

    def __init__(self, actor_cls: type, kwargs: Mapping[str, Any], order_column: str):
        self.inner = actor_cls(**dict(kwargs))
        self.order_column = order_column

    def __call__(self, batch: pa.Table) -> pa.Table:
        position = batch.column(self.order_column)
        inner_input = batch.drop_columns([self.order_column]) if self.order_column == POSITION else batch
        out = self.inner(inner_input)
        if self.order_column in out.column_names:
            out = out.drop_columns([self.order_column])
        if ROW in out.column_names:
            rows = out.column(ROW).to_numpy(zero_copy_only=False).astype(np.int64)
            out = out.drop_columns([ROW])
            return out.append_column(self.order_column, position.take(pa.array(rows)))
        if out.num_rows != batch.num_rows:
            raise RuntimeError(
                f"{type(self.inner).__name__} returned {out.num_rows} rows for {batch.num_rows} "
                f"without a '{ROW}' column saying which input row each came from"
            )
        return out.append_column(self.order_column, position)


def map_with_actors(
    data: pa.Table | str,
    actor_cls: type,
    kwargs: Mapping[str, Any],
    plan: ActorPlan,
    *,
    batch_size: int,
    filesystem=None,
    rows: int | None = None,
    order_column: str | None = None,
    write_to: str | None = None,
    schema: pa.Schema | None = None,
) -> pa.Table | None:
    """Map ``data`` through a pool of ``actor_cls`` actors (see the module docstring).

    ``data``: a table, or a Parquet path (with ``filesystem`` and its ``rows`` count, for
    block sizing) whose ``order_column`` gives the order. ``write_to``: write the output
    as Parquet shards there and return None. ``schema``: the output's schema when no row
    comes back (an empty input gives an empty table, not an error).
    """
    import ray
    import ray.data

    if plan.in_driver and isinstance(data, pa.Table) and write_to is None:
        return map_here(data, actor_cls, kwargs, batch_size=batch_size, schema=schema)
    if isinstance(data, pa.Table):
        if data.num_rows == 0 and schema is not None:
            return schema.empty_table()
        order_column = POSITION
        table = data.append_column(POSITION, pa.array(np.arange(data.num_rows), pa.int64()))
        blocks = max(plan.pool_size * 2, math.ceil(table.num_rows / batch_size), 1)
        size = max(1, math.ceil(table.num_rows / blocks))
        ds = ray.data.from_arrow([table.slice(i, size) for i in range(0, table.num_rows, size)] or [table])
    else:
        if order_column is None:
            raise ValueError("a Parquet input needs the order_column its rows carry")
        blocks = max(plan.pool_size * 2, math.ceil((rows or 1) / batch_size))
        ds = ray.data.read_parquet(data, filesystem=filesystem).repartition(blocks)
    with warnings.catch_warnings():
        # Ray 2.60 has no named parameter for bounded restarts and calls the only way to
        # pass them (**ray_remote_args) deprecated; without them a batch retries forever.
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*", category=DeprecationWarning)
        ds = ds.map_batches(
            OrderedActor,
            fn_constructor_kwargs=dict(actor_cls=actor_cls, kwargs=dict(kwargs), order_column=order_column),
            batch_size=batch_size,
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=plan.pool_size),
            max_restarts=MAX_RESTARTS,
            max_task_retries=MAX_TASK_RETRIES,
            **plan.ray_options(),
        )
    try:
        if write_to is not None:
            ds.write_parquet(write_to, filesystem=filesystem)
            return None
        parts = [t for t in ray.get(list(ds.to_arrow_refs())) if t.num_rows]
    except Exception as exc:  # a user error inside an actor (missing model ...) stays one line
        cause = user_error(exc)
        if cause is None:
            raise
        raise cause from None
    return in_input_order(parts, actor_cls, schema)


def in_input_order(parts: list[pa.Table], actor_cls: type, schema: pa.Schema | None) -> pa.Table:
    """The mapped parts as one table in input order, the position column dropped (cast to
    ``schema`` when given); an empty result is ``schema``'s empty table, or an error."""
    if not parts:
        if schema is not None:
            return schema.empty_table()
        raise InputError(f"{actor_cls.__name__}: no rows came back from the actor pool")
    out = pa.concat_tables(parts, promote_options="default").sort_by(POSITION).drop_columns([POSITION])
    return out.cast(schema) if schema is not None else out


def map_here(
    data: pa.Table, actor_cls: type, kwargs: Mapping[str, Any], *, batch_size: int, schema: pa.Schema | None = None
) -> pa.Table:
    """``map_with_actors`` for a plan that runs in this process (``ActorPlan.in_driver``):
    one ``actor_cls(**kwargs)``, the same batches and order rules (``OrderedActor``), no
    Ray Data, no actor process to start."""
    if data.num_rows == 0 and schema is not None:
        return schema.empty_table()
    table = data.append_column(POSITION, pa.array(np.arange(data.num_rows), pa.int64()))
    actor = OrderedActor(actor_cls, kwargs, POSITION)
    parts = [actor(table.slice(i, batch_size)) for i in range(0, table.num_rows, batch_size)]
    parts = [t for t in parts if t.num_rows]
    del actor
    release_memory()  # the model this process held
    return in_input_order(parts, actor_cls, schema)
