// loom.distributed's C side: the job's rendezvous and process groups, the collectives on
// tensors (lazy/collectives.h), point-to-point calls, asynchronous work, and the exception
// types. Private functions (`_dist_*`) with positional arguments: pyext/loom/distributed/
// parses PyTorch's signatures and calls these.
//
// The GIL is released while a call only waits for other processes (rendezvous, barrier, send,
// recv, Work.wait): nothing of loom's is touched then. Eager collectives run holding it.
#include <chrono>
#include <optional>

#include "lazy/capture.h"
#include "lazy/collectives.h"
#include "lazy/ops.h"
#include "lazy/sync.h"
#include "pyext/objects.h"
#include "pyext/tensor_object.h"
#include "runtime/distributed/collective.h"
#include "runtime/distributed/store.h"
#include "runtime/distributed/work.h"

namespace loom::py {

PyObject* DistError = nullptr;         // loom.distributed.DistError(RuntimeError)
PyObject* DistBackendError = nullptr;  // loom.distributed.DistBackendError(DistError): ErrorKind::Distributed

namespace {

namespace dist = loom::distributed;
using std::chrono::milliseconds;

// The job this process joined (init_process_group), until destroy_process_group.
struct World {
  std::shared_ptr<dist::Store> store;
  std::string hostname;  // where Gloo binds
  int rank = 0, size = 1;
  int device = -1;  // the GPU of NCCL groups
  int64_t groups_made = 0;
};
std::optional<World>& world() {
  static auto* w = new std::optional<World>();  // never destroyed (a store may own a thread)
  return *w;
}

milliseconds timeout_of(double seconds) {
  LOOM_CHECK(seconds > 0, Value, "timeout must be positive, got ", seconds, " s");
  return milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

std::unique_ptr<dist::Group> make_group(const std::string& backend, const dist::Rendezvous& r, int rank, int size,
                                        int device, milliseconds timeout) {
  if (backend == "gloo") return dist::make_gloo_group(r, rank, size, timeout);
  if (backend == "nccl") return dist::make_nccl_group(r, rank, size, device, timeout);
  LOOM_FAIL(Value, "Invalid backend: '", backend, "' (loom has 'gloo' for cpu tensors and 'nccl' for cuda tensors)");
}

// Runs `f` without the GIL: it only waits for other processes.
template <typename F>
void without_gil(F&& f) {
  std::exception_ptr error;
  Py_BEGIN_ALLOW_THREADS
  try {
    f();
  } catch (...) {
    error = std::current_exception();
  }
  Py_END_ALLOW_THREADS
  if (error) std::rethrow_exception(error);
}

dist::ReduceOp reduce_op(long long op) {
  LOOM_CHECK(op >= 0 && op <= 4, Value, "unknown ReduceOp ", op, " (SUM, AVG, PRODUCT, MIN and MAX are supported)");
  return static_cast<dist::ReduceOp>(op);
}

// _dist_init(backend, store, address, port, rank, world_size, timeout_s, hostname, device)
//   -> (group id, the store's port)
PyObject* f_init(PyObject*, PyObject* args) {
  LOOM_PY_BEGIN
  const char *backend, *store, *address, *hostname;
  int port, rank, size, device;
  double timeout_s;
  if (!PyArg_ParseTuple(args, "sssiiidsi", &backend, &store, &address, &port, &rank, &size, &timeout_s, &hostname,
                        &device))
    return nullptr;
  LOOM_CHECK(!world(), Runtime, "trying to initialize the default process group twice!");
  LOOM_CHECK(size >= 1 && rank >= 0 && rank < size, Value, "rank ", rank, " is not in a world of size ", size);
  milliseconds timeout = timeout_of(timeout_s);
  std::string b(backend), s(store), a(address), h(hostname);
  World w;
  w.rank = rank, w.size = size, w.device = device, w.hostname = h;
  int id = 0, store_port = 0;
  without_gil([&] {
    if (s == "tcp") {
      w.store = dist::make_tcp_store(a, port, rank == 0, timeout);
      store_port = dist::tcp_store_port(*w.store);
    } else {
      w.store = dist::make_file_store(a, size);
    }
    id = dist::add_group(make_group(b, {w.store, "0/", h}, rank, size, device, timeout));
  });
  world() = std::move(w);
  return Py_BuildValue("(ii)", id, store_port);
  LOOM_PY_END(nullptr)
}

// _dist_new_group(ranks, backend, timeout_s) -> group id, or -1 where this rank is not a member.
// Every rank of the job calls it, in the same order (the groups' names in the store count them).
PyObject* f_new_group(PyObject*, PyObject* args) {
  LOOM_PY_BEGIN
  PyObject* ranks_obj;
  const char* backend;
  double timeout_s;
  if (!PyArg_ParseTuple(args, "Osd", &ranks_obj, &backend, &timeout_s)) return nullptr;
  LOOM_CHECK(world(), Runtime, "Default process group has not been initialized, please make sure to call "
             "init_process_group.");
  World& w = *world();
  Dims ranks = to_dims(ranks_obj, "ranks");
  std::string prefix = std::to_string(++w.groups_made) + "/";
  int mine = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    LOOM_CHECK(ranks[i] >= 0 && ranks[i] < w.size, Value, "new_group: rank ", ranks[i], " is not in the world of size ",
               w.size);
    if (ranks[i] == w.rank) mine = static_cast<int>(i);
  }
  if (mine < 0) return PyLong_FromLong(-1);
  int id = 0;
  std::string b(backend);
  milliseconds timeout = timeout_of(timeout_s);
  without_gil([&] {
    id = dist::add_group(make_group(b, {w.store, prefix, w.hostname}, mine, static_cast<int>(ranks.size()), w.device,
                                    timeout));
  });
  return PyLong_FromLong(id);
  LOOM_PY_END(nullptr)
}

PyObject* f_destroy(PyObject*, PyObject* id) {
  LOOM_PY_BEGIN
  int64_t gid = to_int64(id, "group");
  without_gil([&] { dist::remove_group(gid); });
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

// Leaves the job: its store (rank 0 stops serving it) and its numbering of groups.
PyObject* f_shutdown(PyObject*, PyObject*) {
  LOOM_PY_BEGIN
  without_gil([&] { world().reset(); });
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

// _dist_group_info(id) -> (rank, size, backend)
PyObject* f_group_info(PyObject*, PyObject* id) {
  LOOM_PY_BEGIN
  auto g = dist::group(to_int64(id, "group"));
  return Py_BuildValue("(iis)", g->rank(), g->size(), g->backend());
  LOOM_PY_END(nullptr)
}

// _dist_unavailable(backend) -> "" when the build has it, else why not.
PyObject* f_unavailable(PyObject*, PyObject* name) {
  LOOM_PY_BEGIN
  const char* n = PyUnicode_AsUTF8(name);
  if (!n) return nullptr;
  std::string b(n);
  std::string why = b == "gloo" ? dist::gloo_unavailable_reason() : b == "nccl" ? dist::nccl_unavailable_reason()
                                                                                 : "unknown backend '" + b + "'";
  return PyUnicode_FromString(why.c_str());
  LOOM_PY_END(nullptr)
}

PyObject* f_pending(PyObject*, PyObject* device) {
  LOOM_PY_BEGIN
  return PyBool_FromLong(collectives::pending(device_from_py(device)));
  LOOM_PY_END(nullptr)
}

// ---- collectives on tensors (lazy/collectives.h) ----

PyObject* tensor_or_error(PyObject* obj, const char* what) {
  LOOM_CHECK(is_tensor(obj), Type, what, " must be a loom.Tensor, not ", type_name(obj));
  return obj;
}

// _dist_op(name, tensor, group, op, root, shape) -> a new tensor, or None for the in-place
// ones (their names end in "_"); `op` and `root` where the collective takes them, `shape` only
// for scatter (its output's). One entry for lazy/collectives.h's functions.
PyObject* f_op(PyObject*, PyObject* args) {
  LOOM_PY_BEGIN
  const char* name;
  PyObject *t, *shape;
  long long gid, op, root;
  if (!PyArg_ParseTuple(args, "sOLLLO", &name, &t, &gid, &op, &root, &shape)) return nullptr;
  std::string n(name);
  Tensor x = tensor_of(tensor_or_error(t, "tensor"));
  if (n == "all_reduce_") collectives::all_reduce_(*x, gid, reduce_op(op));
  else if (n == "broadcast_") collectives::broadcast_(*x, gid, root);
  else if (n == "reduce_") collectives::reduce_(*x, gid, reduce_op(op), root);
  else if (n == "all_reduce") return wrap(collectives::all_reduce(x, gid, reduce_op(op)));
  else if (n == "all_gather") return wrap(collectives::all_gather(x, gid));
  else if (n == "reduce_scatter") return wrap(collectives::reduce_scatter(x, gid, reduce_op(op)));
  else if (n == "gather") return wrap(collectives::gather(x, gid, root));
  else if (n == "scatter") return wrap(collectives::scatter(x, to_dims(shape, "shape"), gid, root));
  else LOOM_FAIL(Value, "internal: no collective named ", n);
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

// ---- point to point and barrier: at once, on the tensor's current value ----

dist::Span span_of(const Array& a) { return {a.data(), a.numel(), a.dtype}; }

// A call that runs at once, inside a step loom.compile records: its replays, which run no
// Python, would skip it while the other ranks wait for it, so the step is not captured (as
// lazy/ops_collective.cpp does for collectives on eager tensors).
void note_in_recorded_step(const dist::Group& g, const char* what) {
  if (StepRecording* rec = recording()) rec->note_sync_point(g.device(), what);
}

// _dist_send(tensor, group, dst, tag)
PyObject* f_send(PyObject*, PyObject* args) {
  LOOM_PY_BEGIN
  PyObject* t;
  long long gid, peer, tag;
  if (!PyArg_ParseTuple(args, "OLLL", &t, &gid, &peer, &tag)) return nullptr;
  auto g = dist::group(gid);
  Array a = contiguous(array_of(tensor_or_error(t, "tensor")));
  LOOM_CHECK(a.device() == g->device(), Runtime, "send: the ", g->backend(), " process group works on tensors on ",
             g->device().str(), ", not ", a.device().str());
  note_in_recorded_step(*g, "sends a tensor to another rank (a replay would not)");
  without_gil([&] { dist::send(*g, span_of(a), static_cast<int>(peer), static_cast<uint32_t>(tag)); });
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

// _dist_recv(tensor, group, src, tag): the tensor's value becomes what src sent.
PyObject* f_recv(PyObject*, PyObject* args) {
  LOOM_PY_BEGIN
  PyObject* t;
  long long gid, peer, tag;
  if (!PyArg_ParseTuple(args, "OLLL", &t, &gid, &peer, &tag)) return nullptr;
  auto g = dist::group(gid);
  // A reference, not impl_of's bare one: the receive below releases the GIL, and another thread's
  // `t.data = other` meanwhile would free the impl a bare reference points at.
  Tensor held = tensor_of(tensor_or_error(t, "tensor"));
  TensorImpl& self = *held;
  LOOM_CHECK(self.device() == g->device(), Runtime, "recv: the ", g->backend(), " process group works on tensors on ",
             g->device().str(), ", not ", self.device().str());
  note_in_recorded_step(*g, "receives a tensor from another rank (a replay would not)");
  Array into = empty(self.sizes(), self.dtype(), self.device());
  without_gil([&] { dist::recv(*g, span_of(into), static_cast<int>(peer), static_cast<uint32_t>(tag)); });
  ops::copy_(self, make_tensor(std::move(into), self.is_lazy()));
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

PyObject* f_barrier(PyObject*, PyObject* id) {
  LOOM_PY_BEGIN
  auto g = dist::group(to_int64(id, "group"));
  note_in_recorded_step(*g, "waits at a barrier (a replay would not)");
  without_gil([&] { dist::barrier(*g); });
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

// ---- asynchronous work (runtime/distributed/work.h) ----

struct PyWork {
  PyObject_HEAD
  dist::Work* work;
};

void work_dealloc(PyObject* self) {
  auto* w = reinterpret_cast<PyWork*>(self);
  if (w->work) {
    Py_BEGIN_ALLOW_THREADS  // waits for the call, which may still use the arrays
    delete w->work;
    Py_END_ALLOW_THREADS
  }
  Py_TYPE(self)->tp_free(self);
}

PyObject* work_wait(PyObject* self, PyObject*) {
  LOOM_PY_BEGIN
  dist::Work* w = reinterpret_cast<PyWork*>(self)->work;
  without_gil([&] { w->wait(); });
  return Py_NewRef(Py_True);
  LOOM_PY_END(nullptr)
}

PyObject* work_done(PyObject* self, PyObject*) {
  return PyBool_FromLong(reinterpret_cast<PyWork*>(self)->work->done());
}

PyMethodDef work_methods[] = {
    {"wait", work_wait, METH_NOARGS, "wait(): blocks until the call has finished; raises its error"},
    {"is_completed", work_done, METH_NOARGS, "is_completed(): whether the call has finished"},
    {nullptr, nullptr, 0, nullptr},
};

PyTypeObject WorkType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "loom._C._DistWork";
  t.tp_basicsize = sizeof(PyWork);
  t.tp_dealloc = work_dealloc;
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "A collective running on its process group's thread (async_op=True).";
  t.tp_methods = work_methods;
  return t;
}();

dist::Kind kind_named(const std::string& k) {
  for (dist::Kind kind : {dist::Kind::AllReduce, dist::Kind::Broadcast, dist::Kind::AllGather,
                          dist::Kind::ReduceScatter, dist::Kind::Reduce, dist::Kind::Gather, dist::Kind::Scatter})
    if (k == dist::kind_name(kind)) return kind;
  LOOM_FAIL(Value, "internal: no collective named ", k);
}

// _dist_start(kind, group, input, output, op, root, shape) -> Work. input and output: eager,
// contiguous tensors on the group's device (the Python side makes them so); `shape` is what the
// ranks agree on (collective.h Call). kind may also be "send", "recv" (root: the peer, op: the
// tag) or "barrier".
PyObject* f_start(PyObject*, PyObject* args) {
  LOOM_PY_BEGIN
  const char* kind;
  long long gid, op, root;
  PyObject *in_obj, *out_obj, *shape;
  if (!PyArg_ParseTuple(args, "sLOOLLO", &kind, &gid, &in_obj, &out_obj, &op, &root, &shape)) return nullptr;
  auto g = dist::group(gid);
  std::string k(kind);
  note_in_recorded_step(*g, "starts an asynchronous collective (async_op=True: a replay would not)");
  std::vector<Array> keep;
  for (PyObject* o : {in_obj, out_obj}) {
    if (o == Py_None) continue;
    TensorImpl& t = impl_of(tensor_or_error(o, "tensor"));
    LOOM_CHECK(!t.is_lazy() && t.array().is_contiguous() && t.device() == g->device(), Runtime,
               "internal: asynchronous ", k, " needs contiguous eager tensors on ", g->device().str());
    keep.push_back(t.array());
  }
  auto* in = keep.empty() ? nullptr : keep.front().data();
  auto* out = keep.empty() ? nullptr : keep.back().data();
  std::function<void()> job;
  dist::Group* raw = g.get();  // the group outlives its queue (remove_group stops it first)
  if (k == "barrier") {
    job = [raw] { dist::barrier(*raw); };
  } else if (k == "send" || k == "recv") {
    dist::Span s = span_of(keep.front());
    bool send = k == "send";
    job = [raw, s, send, root, op] {
      if (send) dist::send(*raw, s, static_cast<int>(root), static_cast<uint32_t>(op));
      else dist::recv(*raw, s, static_cast<int>(root), static_cast<uint32_t>(op));
    };
  } else {
    dist::Call c;
    c.kind = kind_named(k);
    c.op = reduce_op(op);
    c.root = static_cast<int>(root);
    c.dtype = keep.front().dtype;
    c.shape = to_dims(shape, "shape");
    job = [raw, c, in, out] { dist::run(*raw, c, in, out); };
  }
  PyRef obj = PyRef::checked(PyType_GenericAlloc(&WorkType, 0));
  reinterpret_cast<PyWork*>(obj.get())->work = dist::start(g, std::move(job), std::move(keep)).release();
  return obj.release();
  LOOM_PY_END(nullptr)
}

}  // namespace

PyMethodDef distributed_functions[] = {
    {"_dist_init", f_init, METH_VARARGS, nullptr},
    {"_dist_new_group", f_new_group, METH_VARARGS, nullptr},
    {"_dist_destroy", f_destroy, METH_O, nullptr},
    {"_dist_shutdown", f_shutdown, METH_NOARGS, nullptr},
    {"_dist_group_info", f_group_info, METH_O, nullptr},
    {"_dist_unavailable", f_unavailable, METH_O, nullptr},
    {"_dist_pending", f_pending, METH_O, nullptr},
    {"_dist_op", f_op, METH_VARARGS, nullptr},
    {"_dist_send", f_send, METH_VARARGS, nullptr},
    {"_dist_recv", f_recv, METH_VARARGS, nullptr},
    {"_dist_barrier", f_barrier, METH_O, nullptr},
    {"_dist_start", f_start, METH_VARARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

void register_distributed_types(PyObject* module) {
  check_status(PyType_Ready(&WorkType));
  DistError = check(PyErr_NewExceptionWithDoc("loom._C.DistError",
                                              "An error of loom.distributed (torch.distributed.DistError).",
                                              PyExc_RuntimeError, nullptr));
  DistBackendError = check(PyErr_NewExceptionWithDoc(
      "loom._C.DistBackendError",
      "A collective failed: a peer died or timed out, or the ranks called different collectives.", DistError, nullptr));
  check_status(PyModule_AddObjectRef(module, "DistError", DistError));
  check_status(PyModule_AddObjectRef(module, "DistBackendError", DistBackendError));
  check_status(PyModule_AddObjectRef(module, "_DistWork", reinterpret_cast<PyObject*>(&WorkType)));
}

}  // namespace loom::py
