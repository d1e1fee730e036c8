"""How the processes of a job find each other: init_method and the environment, as PyTorch reads
them (torch.distributed.rendezvous).

    env://                 MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE (LOCAL_RANK picks the GPU)
    tcp://host:port        rank and world_size from the arguments (or ?rank=&world_size=)
    file:///path           a file on a filesystem every process sees; it must not exist yet (or be
                           empty), as in PyTorch, and is removed by the last process to leave

rank and world_size given to init_process_group win over the URL and the environment.
"""

import ipaddress
import os
import socket
import urllib.parse
from collections import namedtuple

Rendezvous = namedtuple("Rendezvous", ["store", "address", "port", "rank", "world_size"])


def _error(method, what):
    return ValueError(f"Error initializing loom.distributed using {method}:// rendezvous: {what}")


def _env_int(name, method):
    value = os.environ.get(name)
    if value is None:
        raise _error(method, f"environment variable {name} expected, but not set")
    try:
        return int(value)
    except ValueError:
        raise _error(method, f"environment variable {name} must be an integer, got {value!r}") from None


def _port(port, method, where):
    """A TCP port: checked here, at the line that set it up, where an out-of-range one would
    otherwise fail in the store's connect on one rank and leave the others waiting."""
    if not 0 <= port <= 65535:
        raise _error(method, f"{where} must be a port number from 0 to 65535, got {port}")
    return port


def _pick(arg, query, key, method, env=None):
    """rank or world_size: the argument, else the URL's query, else the environment."""
    if arg is not None and arg >= 0:
        return arg
    if key in query:
        try:
            return int(query[key][-1])
        except ValueError:
            raise _error(method, f"{key}={query[key][-1]!r} in the URL is not an integer") from None
    if env is not None:
        return _env_int(env, method)
    raise _error(method, f"{key} parameter missing")


def parse(init_method, rank=-1, world_size=-1):
    """The store, its address, rank and world size of a job, from init_method and the environment."""
    url = urllib.parse.urlparse(init_method)
    query = urllib.parse.parse_qs(url.query)
    scheme = url.scheme
    if scheme == "env":
        address = os.environ.get("MASTER_ADDR")
        if not address:
            raise _error("env", "environment variable MASTER_ADDR expected, but not set")
        port = _port(_env_int("MASTER_PORT", "env"), "env", "environment variable MASTER_PORT")
        return Rendezvous("tcp", address, port, _pick(rank, {}, "rank", "env", "RANK"),
                          _pick(world_size, {}, "world_size", "env", "WORLD_SIZE"))
    if scheme == "tcp":
        try:
            port = url.port
        except ValueError:  # urllib's "Port out of range 0-65535", or not a number
            port = -1
        if not url.hostname or port is None or port < 0:
            raise _error("tcp", f"expected tcp://host:port with a port from 0 to 65535, got {init_method!r}")
        return Rendezvous("tcp", url.hostname, port, _pick(rank, query, "rank", "tcp"),
                          _pick(world_size, query, "world_size", "tcp"))
    if scheme == "file":
        path = urllib.parse.unquote(url.path)
        if not path:
            raise _error("file", f"expected file:///path, got {init_method!r}")
        return Rendezvous("file", path, 0, _pick(rank, query, "rank", "file"),
                          _pick(world_size, query, "world_size", "file"))
    raise ValueError(f"No rendezvous handler for {scheme}:// (loom has env://, tcp:// and file://)")


def gloo_hostname(rendezvous):
    """The address Gloo's sockets bind to. A job whose store is on this machine's loopback stays
    on the loopback (every rank is local); otherwise LOOM_GLOO_HOSTNAME, else the address of this
    host's name, as Gloo itself chooses."""
    explicit = os.environ.get("LOOM_GLOO_HOSTNAME")
    if explicit:
        return explicit
    if rendezvous.store == "file":
        try:
            socket.gethostbyname(socket.gethostname())
            return ""
        except OSError:  # a host whose name does not resolve: one machine, then
            return "127.0.0.1"
    try:
        if ipaddress.ip_address(socket.gethostbyname(rendezvous.address)).is_loopback:
            return "127.0.0.1"
    except (OSError, ValueError):
        pass
    return ""
