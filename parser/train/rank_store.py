"""Where the ranks of one machine meet: a c10d ``TCPStore`` whose listener is bound to loopback.

torch's ``TCPStore`` listens on every interface whatever host it is given (torch 2.13), and
without authentication. When ``MASTER_ADDR`` is a loopback address and this process group hosts
its own store (not torchrun's agent: ``TORCHELASTIC_USE_AGENT_STORE`` is not ``True``), rank 0
binds the listening socket itself to that address and hands it to the store
(``master_listen_fd``), and gloo (NCCL) is told to use the loopback interface for its own
listeners (``GLOO_SOCKET_IFNAME`` / ``NCCL_SOCKET_IFNAME``, unless already set). torchrun then
opens no listener outside loopback when started as docs/scaling.md shows for one machine:

    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun --nnodes=1 --nproc_per_node=2 \\
        --rdzv-backend=c10d --rdzv-conf=store_type=file --local-addr=127.0.0.1 -m parser.cli.train ...

(the rendezvous in a private file instead of a TCP store; no agent store shared with the ranks;
``MASTER_ADDR=127.0.0.1``). Any other address keeps torch's behaviour (``env://``).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import socket

import torch.distributed as dist
from torch.distributed.constants import default_pg_timeout

__all__ = ["LOOPBACK_COMMAND", "loopback_interface", "loopback_store"]

log = logging.getLogger(__name__)

LOOPBACK_COMMAND = (
    "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun --nnodes=1 --nproc_per_node=N "
    "--rdzv-backend=c10d --rdzv-conf=store_type=file --local-addr=127.0.0.1"
)


def loopback_store(*, rank: int, world_size: int) -> dist.Store | None:
    """The store for ``init_process_group(store=...)``: on loopback when ``MASTER_ADDR`` is a
    loopback address and the ranks host it; None: ``env://`` as torch does it."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        if os.environ.get("LOCAL_WORLD_SIZE") == str(world_size):  # one machine: it need not be open
            log.warning(
                "torchrun's store (port %s) listens on every interface; on one machine start "
                "`%s -m parser.cli.train ...` (docs/scaling.md) to keep every listener on loopback",
                os.environ.get("MASTER_PORT"), LOOPBACK_COMMAND,
            )
        return None
    host = os.environ.get("MASTER_ADDR", "")
    address = _loopback_address(host)
    if address is None:
        return None
    interface = loopback_interface()
    if interface is None:
        log.warning("no loopback interface found: gloo and NCCL choose their own for their listeners")
    else:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", interface)
        os.environ.setdefault("NCCL_SOCKET_IFNAME", interface)
    port = int(os.environ["MASTER_PORT"])
    if rank != 0:
        return dist.TCPStore(address, port, world_size, False, timeout=default_pg_timeout)
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    listener = socket.create_server((address, port), family=family, backlog=max(128, 2 * world_size))
    try:
        store = dist.TCPStore(address, port, world_size, True, timeout=default_pg_timeout,
                              master_listen_fd=listener.fileno())
    except BaseException:
        listener.close()
        raise
    listener.detach()  # the store owns the socket now
    return store


def _loopback_address(host: str) -> str | None:
    """``host``'s address when it resolves to loopback, else None."""
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return None
    addresses = [info[4][0] for info in found]
    if addresses and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses):
        return addresses[0]
    return None


def loopback_interface() -> str | None:
    """The name of the loopback interface (``lo`` on Linux, ``lo0`` on macOS and BSD)."""
    names = [name for _, name in socket.if_nameindex()]
    return next((name for name in names if re.fullmatch(r"lo\d*", name)), None)
