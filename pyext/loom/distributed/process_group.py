"""Process groups: init_process_group, new_group, destroy_process_group and the questions about
them (get_rank, get_world_size, ...), as torch.distributed.

A group is a ProcessGroup object naming a transport group of runtime/distributed (Gloo for cpu and
lazy:cpu tensors, NCCL for cuda and lazy:cuda tensors). Ranks given to the collectives (src, dst)
are global ranks, as in PyTorch; a group translates them.
"""

import atexit
import datetime
import os
import sys

from loom import _C
from loom.distributed import rendezvous

default_pg_timeout = datetime.timedelta(minutes=30)


class Backend(str):
    """A backend's name: Backend.GLOO, Backend.NCCL ("gloo", "nccl"); Backend("GLOO") lowers it."""

    UNDEFINED = "undefined"
    GLOO = "gloo"
    NCCL = "nccl"

    def __new__(cls, name):
        if not isinstance(name, str):
            raise ValueError(f"Backend constructor parameter must be string-ish, but got: {type(name).__name__}")
        value = name.lower()
        if value not in ("gloo", "nccl", "undefined"):
            raise ValueError(f"Invalid backend: '{name}' (loom has 'gloo' and 'nccl')")
        return str.__new__(cls, value)


class ProcessGroup:
    """A set of ranks that run collectives together, on one transport. Made by
    init_process_group (the world) and new_group; do not construct it directly."""

    def __init__(self, gid, ranks, backend, device):
        self._id = gid
        self._ranks = list(ranks)  # global ranks, in group order
        self._backend = backend
        self._device = device  # where its tensors live: "cpu" (gloo) or "cuda:N" (nccl)
        self._rank, self._size, _ = _C._dist_group_info(gid)

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def name(self):
        return self._backend

    def _group_rank(self, global_rank, what):
        try:
            return self._ranks.index(global_rank)
        except ValueError:
            raise ValueError(f"{what} rank {global_rank} is not part of the group (its ranks: {self._ranks})") from None

    def __repr__(self):
        return f"<loom.distributed.ProcessGroup {self._backend} rank {self._rank} of {self._size}>"


class _NonGroupMember:
    """new_group's answer on a rank that is not in the group (GroupMember.NON_GROUP_MEMBER)."""

    def __repr__(self):
        return "GroupMember.NON_GROUP_MEMBER"


class _State:
    world = None       # the default ProcessGroup
    groups = []        # every ProcessGroup made since init (the world first)
    store_port = None  # where the TCP store listens (rank 0 serving port 0 learns it here)
    timeout = default_pg_timeout
    exit_hook = False  # _at_exit is registered


class GroupMember:
    """GroupMember.WORLD (the default group) and GroupMember.NON_GROUP_MEMBER, as PyTorch."""

    NON_GROUP_MEMBER = _NonGroupMember()

    class _World:
        def __get__(self, obj, owner):
            return _State.world

    WORLD = _World()


class group:  # noqa: N801 (PyTorch's name: torch.distributed.group.WORLD)
    WORLD = GroupMember._World()


def _seconds(timeout):
    if timeout is None:
        return default_pg_timeout.total_seconds()
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        return float(timeout)
    raise TypeError(f"timeout must be a datetime.timedelta, got {type(timeout).__name__}")


def is_available():
    return True


def is_gloo_available():
    return _C._dist_unavailable("gloo") == ""


def is_nccl_available():
    return _C._dist_unavailable("nccl") == ""


def is_initialized():
    return _State.world is not None


def _require_init():
    if _State.world is None:
        raise RuntimeError("Default process group has not been initialized, please make sure to call "
                           "init_process_group.")


def _resolve(group):
    """The ProcessGroup a collective runs on, or None on a rank outside it."""
    _require_init()
    if group is None or group is GroupMember.WORLD:
        return _State.world
    if group is GroupMember.NON_GROUP_MEMBER:
        return None
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"group must be a ProcessGroup or None, got {type(group).__name__}")
    if group not in _State.groups:
        raise RuntimeError("the process group was destroyed (destroy_process_group)")
    return group


def _default_backend():
    from loom import cuda

    return Backend.NCCL if cuda.is_available() and is_nccl_available() else Backend.GLOO


def _nccl_device(device_id, rank):
    from loom import cuda

    if device_id is not None:
        index = getattr(device_id, "index", device_id)
        return 0 if index is None else int(index)
    if "LOCAL_RANK" in os.environ:
        return int(os.environ["LOCAL_RANK"])
    count = cuda.device_count()
    return rank % count if count else 0


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """Joins this process to the job as `rank` of `world_size`, connecting to the others through
    `init_method` ("env://" by default: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE). Every
    process calls it; it returns when all have joined, or raises DistBackendError after
    `timeout` (a datetime.timedelta; 30 minutes by default), naming what it waited for.

    backend: "gloo" (cpu and lazy:cpu tensors) or "nccl" (cuda and lazy:cuda tensors; the GPU is
    device_id, else LOCAL_RANK, else rank modulo the GPU count); by default nccl where a GPU is,
    else gloo. loom differs from PyTorch in that one group has one backend (no "cpu:gloo,cuda:nccl"),
    and `store`, `group_name` and `pg_options` are not supported."""
    if _State.world is not None:
        raise RuntimeError("trying to initialize the default process group twice!")
    if store is not None or pg_options is not None:
        raise NotImplementedError("loom.distributed: init_process_group(store=..., pg_options=...) is not supported; "
                                  "use init_method")
    backend = Backend(backend) if backend is not None else _default_backend()
    if backend == Backend.UNDEFINED:
        raise ValueError("init_process_group needs a backend: 'gloo' or 'nccl'")
    if init_method is None:
        init_method = "env://"
    r = rendezvous.parse(init_method, rank, world_size)
    if r.world_size < 1 or not 0 <= r.rank < r.world_size:
        raise ValueError(f"Invalid rank {r.rank} for a world of size {r.world_size}")
    device = _nccl_device(device_id, r.rank) if backend == Backend.NCCL else -1
    seconds = _seconds(timeout)
    gid, port = _C._dist_init(str(backend), r.store, r.address, r.port, r.rank, r.world_size, seconds,
                              rendezvous.gloo_hostname(r), device)
    _State.timeout = datetime.timedelta(seconds=seconds)
    _State.store_port = port or None
    _State.world = ProcessGroup(gid, range(r.world_size), str(backend),
                                f"cuda:{device}" if backend == Backend.NCCL else "cpu")
    _State.groups = [_State.world]
    if not _State.exit_hook:
        atexit.register(_at_exit)
        _State.exit_hook = True


def _run_pending_collectives(groups):
    """Runs the lazy collectives recorded on `groups`' devices that have not run yet. A rank that
    leaves with one unrun (no value it read depended on it: a DDP step's last all-reduces on a
    rank that does not print the loss) would leave the other ranks waiting for it, where in
    PyTorch the call ran when it was made."""
    if any(_C._dist_pending(g._device) for g in groups):
        _C.sync()


def _at_exit():
    # A normal exit without destroy_process_group still runs what was recorded (above). Not
    # after an uncaught exception (sys.last_value): the job is failing, and the launcher stops
    # the other ranks; waiting up to the timeout for them would only delay that.
    if _State.world is not None and getattr(sys, "last_value", None) is None:
        _run_pending_collectives(_State.groups)


def destroy_process_group(group=None):
    """Destroys `group`, or (None) every group and this process's membership of the job: a later
    init_process_group may join a new one. Asynchronous work of a group finishes first, and lazy
    collectives recorded on it run first (their results stay readable)."""
    if group is None or group is GroupMember.WORLD:
        if _State.world is None:
            raise RuntimeError("Default process group has not been initialized, please make sure to call "
                               "init_process_group.")
        try:
            _run_pending_collectives(_State.groups)
        finally:
            for g in reversed(_State.groups):
                _C._dist_destroy(g._id)
            _State.world, _State.groups, _State.store_port = None, [], None
            _C._dist_shutdown()
        return
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    g = _resolve(group)
    try:
        _run_pending_collectives([g])
    finally:
        _C._dist_destroy(g._id)
        _State.groups.remove(g)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False):
    """A group of the given global ranks (all by default). Every process of the job calls it, in
    the same order, members or not; a non-member gets GroupMember.NON_GROUP_MEMBER."""
    _require_init()
    world = _State.world
    ranks = list(range(world.size())) if ranks is None else sorted(int(r) for r in ranks)
    if len(set(ranks)) != len(ranks):
        raise ValueError(f"new_group: ranks must be distinct, got {ranks}")
    backend = Backend(backend) if backend is not None else Backend(world.name())
    seconds = _seconds(timeout) if timeout is not None else _State.timeout.total_seconds()
    gid = _C._dist_new_group(ranks, str(backend), seconds)
    if gid < 0:
        return GroupMember.NON_GROUP_MEMBER
    device = world._device if backend == Backend.NCCL and world.name() == "nccl" else "cpu"
    if backend == Backend.NCCL and device == "cpu":
        device = f"cuda:{_nccl_device(None, world.rank())}"
    g = ProcessGroup(gid, ranks, str(backend), device)
    _State.groups.append(g)
    return g


def get_rank(group=None):
    """This process's rank in `group` (the world by default); -1 where it is not a member."""
    g = _resolve(group)
    return -1 if g is None else g.rank()


def get_world_size(group=None):
    """The number of ranks of `group` (the world by default); -1 where this rank is not a member."""
    g = _resolve(group)
    return -1 if g is None else g.size()


def get_backend(group=None):
    g = _resolve(group)
    if g is None:
        raise ValueError("Invalid process group specified")
    return Backend(g.name())


def get_process_group_ranks(group):
    """The global ranks of `group`, in group order."""
    g = _resolve(group)
    if g is None:
        raise ValueError("Invalid process group specified")
    return list(g._ranks)


def get_global_rank(group, group_rank):
    g = _resolve(group)
    if g is None or not 0 <= group_rank < g.size():
        raise ValueError(f"Group rank {group_rank} is not part of the group")
    return g._ranks[group_rank]


def get_group_rank(group, global_rank):
    g = _resolve(group)
    if g is None:
        raise ValueError("Invalid process group specified")
    return g._group_rank(global_rank, "Global")
