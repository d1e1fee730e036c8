#include "runtime/storage.h"

namespace loom {

Ref<Storage> Storage::allocate(size_t nbytes, Device device) {
  CachingAllocator& allocator = allocator_for(device);
  Ref<Storage> s = Ref<Storage>::fresh(new Storage());  // first, so a failed allocation leaves nothing to clean up
  auto allocation = allocator.allocate(nbytes);
  s->data_ = allocation.ptr;
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->allocator_ = &allocator;
  s->block_ = allocation.block;
  return s;
}

Ref<Storage> Storage::wrap(void* data, size_t nbytes, Device device, ReleaseFn release, void* context) {
  Ref<Storage> s = Ref<Storage>::fresh(new Storage());
  s->data_ = data;
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->release_ = release;
  s->release_context_ = context;
  return s;
}

Storage::~Storage() {
  if (block_) allocator_->free(block_);
  else if (release_) release_(release_context_);
}

}  // namespace loom
