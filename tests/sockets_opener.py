"""Open many idle WebSockets from a process of their own, for the gateway's socket probe.

``python -m tests.sockets_opener URL KEY N HOLD_S`` opens N sockets with the bearer KEY and
N without one, sends nothing, prints ``settled`` once every handshake has been answered
(opened or refused), holds the open ones HOLD_S seconds, then prints one JSON list of
``[close code, opened at, closed at]`` per socket, the keyed ones first. The code is None
for a socket still open when the hold ended; the times (monotonic seconds) are None for a
socket refused at the handshake, and `closed at` is None for one still open.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

Outcome = tuple[int | None, float | None, float | None]


async def _hold(url: str, headers: dict[str, str], hold_s: float, answered: list[int]) -> Outcome:
    try:
        async with connect(url, additional_headers=headers, open_timeout=30) as ws:
            answered.append(1)
            opened = time.monotonic()
            try:
                while True:
                    await asyncio.wait_for(ws.recv(), hold_s)
            except ConnectionClosed as closed:
                return (closed.rcvd.code if closed.rcvd else -1, opened, time.monotonic())
            except TimeoutError:
                return (None, opened, None)
    except (ConnectionClosed, OSError) as refused:
        answered.append(1)
        rcvd = getattr(refused, "rcvd", None)
        return (rcvd.code if rcvd is not None else -1, None, None)


async def _main(url: str, key: str, n: int, hold_s: float) -> list[Outcome]:
    answered: list[int] = []
    keyed = {"Authorization": f"Bearer {key}"}
    held = [_hold(url, keyed, hold_s, answered) for _ in range(n)]
    held += [_hold(url, {}, hold_s, answered) for _ in range(n)]
    tasks = [asyncio.ensure_future(one) for one in held]
    while len(answered) < 2 * n and not all(task.done() for task in tasks):
        await asyncio.sleep(0.05)
    print("settled", flush=True)
    return list(await asyncio.gather(*tasks))


if __name__ == "__main__":
    url, key, n, hold_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    print(json.dumps(asyncio.run(_main(url, key, n, hold_s))), flush=True)
