"""Is a dask scheduler there? The probe of an address, and the one-line refusal of one that is not.

The probe asks the address who it is (`{"op": "identity"}`) without a Client, in a daemon thread joined with a
deadline, so neither a silent listener nor a server of another protocol (an HTTP server, the dashboard's
port) can hang the sweep, and Ctrl-C still stops it.
"""
from __future__ import annotations

import asyncio
import threading
from typing import Any

from gptlab.errors import GptlabError, first_line
from gptlab.executors.base import ExecutorConfig
from gptlab.executors.slurm import check_slurm

CONNECT_TIMEOUT_S = 5  # seconds per step of a connection (connect, ask, read); the probe gives up after three


def probe(address: str, timeout: float) -> dict[str, Any]:
    """Ask `address` who it is, without a Client (a failed Client leaves noise when collected)."""
    from distributed.comm import connect
    from distributed.security import Security

    async def identity() -> dict[str, Any]:
        comm = await connect(address, timeout=timeout, **Security().get_connection_args("client"))
        try:
            await comm.write({"op": "identity"})
            return await asyncio.wait_for(comm.read(), timeout)
        finally:
            comm.abort()  # never wait on a peer that does not speak dask's protocol (close() can hang on it)

    # A daemon thread of its own (the caller may already run an event loop), joined with a deadline: a
    # listener that never answers (an HTTP server, the dashboard's port) can then neither hang the sweep
    # nor keep it from exiting, and the main thread stays free to take SIGINT and SIGTERM.
    outcome: dict[str, Any] = {}

    def ask() -> None:
        try:
            outcome["reply"] = asyncio.run(asyncio.wait_for(identity(), 2 * timeout))
        except BaseException as err:  # handed to the caller
            outcome["error"] = err

    thread = threading.Thread(target=ask, name="gptlab-scheduler-probe", daemon=True)
    thread.start()
    thread.join(3 * timeout)
    if thread.is_alive():
        raise TimeoutError("")  # check_scheduler says what it means
    if "error" in outcome:
        raise outcome["error"]
    return outcome["reply"]


def check_scheduler(executor: ExecutorConfig) -> None:
    """Fail fast, in one line naming the address, when the scheduler cannot be used."""
    if executor.cluster is not None:
        check_slurm()
        return
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise GptlabError("executor.backend dask needs dask.distributed: pip install -e \".[distributed]\"") from None
    address = str(executor.scheduler)
    if address == "local":
        return
    try:
        reply = probe(address, CONNECT_TIMEOUT_S)
    except Exception as err:  # refused, timed out, a bad address, or a server that is not dask
        reason = first_line(err, empty="") or (
            f"no dask answer within {3 * CONNECT_TIMEOUT_S:g} s (a dask scheduler listens on :8786 by default; "
            ":8787 is its dashboard)" if isinstance(err, (TimeoutError, asyncio.TimeoutError)) else type(err).__name__)
        raise GptlabError(f"cannot reach the dask scheduler at {address}: {reason}") from None
    kind = reply.get("type") if isinstance(reply, dict) else None
    if kind != "Scheduler":
        raise GptlabError(f"{address} is not a dask scheduler (it answers as {kind or 'something else'}); "
                          "give the address printed by `dask scheduler`")
