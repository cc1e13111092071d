"""The stand-in torch.distributed (see ../__init__.py): init_process_group from torchrun's
variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), rank 0 connected to every other rank
over loopback TCP (a star: the only pairs the skew test and the host offset measurement use),
send/recv of one int64, barrier through rank 0. Every socket has a 60 s timeout."""

import os
import socket
import struct
import time

_state = {}


def is_available():
    return True


def is_nccl_available():
    return False


def is_initialized():
    return "rank" in _state


def init_process_group(backend="gloo", rank=None, world_size=None, **_):
    rank = int(os.environ["RANK"] if rank is None else rank)
    world = int(os.environ["WORLD_SIZE"] if world_size is None else world_size)
    addr = (os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ["MASTER_PORT"]))
    links = {}
    if rank == 0:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(addr)
        server.listen(world)
        server.settimeout(60)
        for _ in range(world - 1):
            conn, _ = server.accept()
            peer = struct.unpack("<q", _read(conn, 8))[0]
            links[peer] = conn
        server.close()
    else:
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = socket.create_connection(addr, timeout=60)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        conn.sendall(struct.pack("<q", rank))
        links[0] = conn
    for conn in links.values():
        conn.settimeout(60)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    _state.update(rank=rank, world=world, backend=backend, links=links)


def _read(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise RuntimeError("stand-in torch.distributed: the peer closed the connection")
        data += chunk
    return data


def get_rank(group=None):
    return _state["rank"]


def get_world_size(group=None):
    return _state["world"]


def get_process_group_ranks(group=None):
    return list(range(_state["world"]))


def get_backend(group=None):
    return _state["backend"]


def send(tensor, dst, group=None):
    _state["links"][dst].sendall(struct.pack("<q", tensor.value))


def recv(tensor, src, group=None):
    tensor.value = struct.unpack("<q", _read(_state["links"][src], 8))[0]


def barrier(group=None, **_):
    from .. import Tensor
    token = Tensor(0)
    if _state["rank"] == 0:
        for peer in _state["links"]:
            recv(token, peer)
        for peer in _state["links"]:
            send(token, peer)
    else:
        send(token, 0)
        recv(token, 0)


def destroy_process_group(group=None):
    for conn in _state.pop("links", {}).values():
        conn.close()
    _state.clear()
