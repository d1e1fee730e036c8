"""loom.distributed: process groups and collectives, as torch.distributed.

    import loom.distributed as dist
    dist.init_process_group("gloo")          # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    dist.destroy_process_group()

Transports are Gloo (cpu and lazy:cpu tensors) and NCCL (cuda and lazy:cuda tensors); loom moves
no bytes itself. On lazy tensors, collectives are ops of the trace: a training step with its
gradient all-reduces stays one trace and one cached plan (on a GPU, NCCL calls inside the
step's CUDA Graph). Start a job with the launcher: python3 -m loom.distributed.run
--nproc-per-node N script.py args.

Failures: a rank that dies, or does not reach a collective within the group's timeout, makes the
others raise DistBackendError (a RuntimeError) instead of hanging; ranks that call different
collectives, or pass tensors of different shapes or dtypes, all raise an error naming each
rank's call (Gloo checks every collective; LOOM_DIST_CHECK=0 turns the check off). After a
transport failure the group cannot be used again.
"""

from loom._C import DistBackendError, DistError
from loom.distributed.collectives import (ReduceOp, Work, all_gather, all_gather_into_tensor, all_reduce, barrier,
                                          broadcast, gather, irecv, isend, recv, reduce, reduce_scatter,
                                          reduce_scatter_tensor, scatter, send)
from loom.distributed import nn  # noqa: E402  (differentiable collectives)
from loom.distributed.objects import all_gather_object, broadcast_object_list, gather_object
from loom.distributed.process_group import (Backend, GroupMember, ProcessGroup, default_pg_timeout,
                                            destroy_process_group, get_backend, get_global_rank, get_group_rank,
                                            get_process_group_ranks, get_rank, get_world_size, group,
                                            init_process_group, is_available, is_gloo_available, is_initialized,
                                            is_nccl_available, new_group)

__all__ = ["DistError", "DistBackendError", "ReduceOp", "Work", "Backend", "GroupMember", "ProcessGroup", "group",
           "default_pg_timeout", "init_process_group", "destroy_process_group", "is_available",
           "is_gloo_available", "is_nccl_available", "is_initialized", "new_group", "get_rank", "get_world_size",
           "get_backend", "get_global_rank", "get_group_rank", "get_process_group_ranks", "all_reduce", "broadcast",
           "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "gather",
           "scatter", "send", "recv", "isend", "irecv", "barrier", "all_gather_object", "broadcast_object_list",
           "gather_object"]
