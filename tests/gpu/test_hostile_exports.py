"""__cuda_array_interface__ keeps the storage it exposes (issue 12, item 3; pyext/dlpack.cpp).

The interface hands out a bare address, and its consumers keep the tensor object alive, not its
storage: the storage is pinned to the object until the object is collected, whatever data the
object holds by then. (The CPU exports are checked in tests/python/test_hostile_exports.py.)
"""

import loom

SHAPE = (48, 40)


def test_the_exported_address_is_not_reused_while_the_object_lives():
    t = loom.full(SHAPE, 5.0, device="cuda")
    address = t.__cuda_array_interface__["data"][0]
    t._set_data(loom.zeros(SHAPE, device="cuda"))  # the object now holds other data
    others = [loom.full(SHAPE, 7.0, device="cuda") for _ in range(16)]
    assert address not in {o.data_ptr() for o in others}
    del others
    loom.cuda.synchronize()
    # The pin goes with the object: the block returns to the allocator and is handed out again.
    del t
    again = [loom.empty(SHAPE, device="cuda") for _ in range(16)]
    assert address in {o.data_ptr() for o in again}
