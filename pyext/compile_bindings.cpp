// loom._C._CompiledFunction: what loom.compile(fn) returns (pyext/loom/_compile.py wraps it),
// the code that records calls, decides when to capture, and replays (DESIGN decision 16).
//
// Note [Capture and replay]
//
// Like tinygrad's TinyJit: calls run, then capture, then replay.
//   - A call no captured step serves runs fn through the lazy path, recorded (lazy/capture.h):
//     the step's own sync at its end hands the trace to the recording, and what a replay would
//     need is worked out from it (graph/captured_step.h CapturedStep::make), or why it cannot be
//     replayed (a sync point inside fn, a tensor it computed that it keeps in Python state, ...).
//   - A recording that agrees with the one before it (the same argument spec and Python guards,
//     the same trace, the same sources for every number, the same constants: CapturedStep::
//     agrees_with) is captured: an entry. Comparing two recordings is how Python state the trace
//     does not see shows: a number computed in Python that changes from call to call.
//   - A call whose arguments, Python guards (pyext/compile_guards.h), tensors (CapturedStep::check)
//     and optimizer updates (replay_update) match an entry replays it: the call's numbers are
//     read (its float arguments; each recorded optimizer update's numbers recomputed from its
//     group and state), the step runs, and then the update's Python bookkeeping is committed
//     (step counts, the optimizers' _step_count). No Python of fn runs; nothing is recorded.
//   - A call that matches no entry records again; the entries are bounded by cache_size_limit, and
//     so are the recordings in a row that could not be captured: past either bound the function
//     falls back to uncompiled calls for good and says why, once (a RuntimeWarning).
// LOOM_COMPILE=0 (or backend="eager") records and explains every call the same way but never
// replays. LOOM_LOG=compile,syncs,recompiles prints captures and fallbacks, sync points inside a
// step (with the Python line), and guard failures; explain() returns the same history.
//
// Note [Float arguments]
//
// A Python float passed to the compiled function is a number of the step (read anew at every
// replay) only if nothing but loom's ops took its value: the Scalar an op makes of it carries
// its tag (lazy/capture.h), but a value Python computed from it (1 - p, p > 0.5, f"{p}") or an
// op took as a setting (to_double: an attribute, not a Scalar) would be baked into the capture.
// So a recording passes the function a float subclass equal to it (loom._compile._StepFloat)
// that notes every use by Python, and to_double notes the reads of such floats; a float that was
// used so is a guard on its value for that capture instead (as with dynamic=False). What
// neither sees is C code outside loom that reads the float's bits directly (math.exp(p)):
// README, what loom.compile cannot see.
//
// Note [A failed replay]
//
// A replay whose run throws (an index out of range in the new data, out of memory) has changed
// nothing: the executor wrote no destination, no version counter moved, no .grad was set and no
// Python state was committed. The call then runs fn uncompiled, so the failure reaches the user
// exactly as in lazy mode (lazy/sync.h, Note [A failed sync changes nothing]): at the sync that
// reads a result, with the tensors a failed sync leaves. An interrupt (Ctrl-C) is raised at once.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "graph/captured_step.h"
#include "lazy/autograd.h"
#include "lazy/capture.h"
#include "lazy/sync.h"
#include "pyext/args.h"
#include "pyext/compile_guards.h"
#include "pyext/op_args.h"
#include "pyext/optim_bindings.h"
#include "pyext/tensor_object.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/source_location.h"
#include "runtime/metrics.h"
#include "runtime/random.h"

namespace loom::py {
namespace {

using graph::CapturedStep;

struct Options {
  bool fullgraph = false;
  bool floats_are_numbers = true;  // dynamic=False: floats are guards
  bool replay = true;              // LOOM_COMPILE=0, backend="eager": record, never replay
  int64_t cache_size_limit = 8;
};

// One captured step and what its replays read and do besides the step (Note [Capture and replay]).
struct Entry {
  ArgSpec spec;
  PyGuards guards;
  std::unique_ptr<CapturedStep> step;
  std::vector<NumberSource> numbers;
  std::vector<RecordedUpdate> updates;
  std::vector<PyRef> step_counts;  // an optimizer per recorded step() call: its _step_count counts one
  ResultTemplate result;
  int64_t replays = 0;
};

// The Python helpers of loom/_compile.py.
PyObject* guard_state_helper = nullptr;
PyObject* step_float_type = nullptr;  // loom._compile._StepFloat (Note [Float arguments])

// LOOM_LOG: which compile channels print.
struct LogChannels {
  bool compile = false, syncs = false, recompiles = false;
};
const LogChannels& log_channels() {
  static const LogChannels c = [] {
    LogChannels out;
    const char* e = std::getenv("LOOM_LOG");
    std::string v = e ? e : "";
    auto has = [&](const char* name) { return v.find(name) != std::string::npos || v.find("all") != std::string::npos; };
    out.compile = has("compile");
    out.syncs = has("syncs");
    out.recompiles = has("recompiles");
    return out;
  }();
  return c;
}

struct State {
  std::string name;
  std::vector<std::shared_ptr<Entry>> entries;  // most recently used first
  std::shared_ptr<Entry> candidate;             // the last recording that could be captured
  std::string fallback;                         // why the function runs uncompiled for good
  int64_t failed_in_a_row = 0;                  // recordings that could not be captured
  int64_t calls = 0;
  std::vector<std::string> history;
  std::vector<Tensor> known;                    // tensors whose .grad recordings note at the start

  void note(const char* channel, const std::string& line) {
    std::string text = "call " + std::to_string(calls) + ": " + line;
    if (history.size() >= 1000) history.erase(history.begin());
    history.push_back(text);
    const LogChannels& c = log_channels();
    bool print = (std::string_view(channel) == "compile" && c.compile) ||
                 (std::string_view(channel) == "syncs" && c.syncs) ||
                 (std::string_view(channel) == "recompiles" && c.recompiles);
    if (print) std::fprintf(stderr, "[loom.compile %s] %s: %s\n", channel, name.c_str(), text.c_str());
  }
};

struct CompiledFunction {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* dict;
  PyObject* weakrefs;
  PyObject* fn;
  Options options;
  State* state;
};

extern PyTypeObject CompiledFunctionType;

// ---- the recording's helpers ----

// The Python line running now, outside loom's own package (runtime/source_location.h), with
// its text: where a step synced.
std::string python_line() {
  SourceLocation where = source_location(current_source());
  if (where.file.empty()) return {};
  // The function as a traceback names it (the last part of its qualified name).
  std::string_view function = where.function;
  if (size_t dot = function.rfind('.'); dot != std::string_view::npos) function.remove_prefix(dot + 1);
  std::string text = where.file + ":" + std::to_string(where.line) + " in " + std::string(function);
  PyRef linecache = PyRef::steal(PyImport_ImportModule("linecache"));
  PyRef src = linecache ? PyRef::steal(PyObject_CallMethod(linecache.get(), "getline", "si", where.file.c_str(),
                                                           where.line))
                        : PyRef();
  if (src && PyUnicode_Check(src.get())) {
    const char* utf8 = PyUnicode_AsUTF8(src.get());
    std::string line = utf8 ? utf8 : "";
    size_t a = line.find_first_not_of(" \t"), b = line.find_last_not_of(" \t\r\n");
    if (a != std::string::npos && b != std::string::npos) text += ": " + line.substr(a, b - a + 1);
  }
  PyErr_Clear();
  return text;
}

// Whether `obj` is `item` or holds it in its tuples, lists and dicts.
bool holds(PyObject* obj, PyObject* item, int depth = 0) {
  if (obj == item) return true;
  if (depth > 8) return false;
  if (PyTuple_Check(obj) || PyList_Check(obj)) {
    PyRef items = PyRef::checked(PySequence_Fast(obj, "a result"));
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(items.get()); ++i)
      if (holds(PySequence_Fast_GET_ITEM(items.get(), i), item, depth + 1)) return true;
  } else if (PyDict_Check(obj)) {
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(obj, &pos, &k, &v))
      if (holds(v, item, depth + 1)) return true;
  }
  return false;
}

// The updates a recorded step makes (pyext/optim_bindings.h).
class RecordingLog final : public UpdateLog {
 public:
  int32_t add(RecordedUpdate u) override {
    updates.push_back(std::move(u));
    return static_cast<int32_t>(updates.size() - 1);
  }
  RecordedUpdate& at(int32_t i) override { return updates[static_cast<size_t>(i)]; }
  std::vector<RecordedUpdate> updates;
};

// What a recording notes beyond the lazy layer: a call of a loom.compiler.disable'd function.
thread_local std::vector<std::string>* recording_notes = nullptr;

// Installs the thread-local hooks of the extension for a recording.
struct RecordingScopes {
  RecordingScopes(RecordingLog* log, const std::vector<std::pair<PyObject*, uint32_t>>* tags,
                  std::vector<std::string>* notes, std::vector<PyObject*>* read_by_value) {
    set_update_log(log);
    float_argument_tags = tags;
    recording_notes = notes;
    floats_read_by_value = read_by_value;
  }
  ~RecordingScopes() {
    set_update_log(nullptr);
    float_argument_tags = nullptr;
    recording_notes = nullptr;
    floats_read_by_value = nullptr;
  }
};

std::vector<Device> generator_devices() {
  std::vector<Device> out{kCPU};
  for (int i = 0; i < cuda::device_count(); ++i) out.emplace_back(DeviceType::CUDA, static_cast<int16_t>(i));
  return out;
}

bool same_updates(const Entry& a, const Entry& b) {
  if (a.updates.size() != b.updates.size()) return false;
  for (size_t i = 0; i < a.updates.size(); ++i) {
    const RecordedUpdate &x = a.updates[i], &y = b.updates[i];
    if (x.rule != y.rule || x.group.get() != y.group.get() || x.optimizer.get() != y.optimizer.get() ||
        x.numbers.ops != y.numbers.ops || x.numbers.values.size() != y.numbers.values.size() ||
        x.params != y.params)
      return false;
  }
  return true;
}

PyObject* plain_call(CompiledFunction* self, PyObject* const* args, size_t nargs, PyObject* kwnames) {
  return PyObject_Vectorcall(self->fn, args, nargs, kwnames);
}

// A call recorded lazily; captured when it agrees with the recording before it.
PyObject* record(CompiledFunction* self, PyObject* const* args, size_t nargs, PyObject* kwnames) {
  State& st = *self->state;
  CallValues values;
  ArgSpec spec = ArgSpec::of(args, nargs, kwnames, self->options.floats_are_numbers, values);
  // The Python state the step may depend on, and the tensors whose .grad it may read or set.
  size_t nkw = kwnames ? static_cast<size_t>(PyTuple_GET_SIZE(kwnames)) : 0;
  PyRef all_args = PyRef::checked(PyTuple_New(static_cast<Py_ssize_t>(nargs + nkw)));
  for (size_t i = 0; i < nargs + nkw; ++i) PyTuple_SET_ITEM(all_args.get(), static_cast<Py_ssize_t>(i), Py_NewRef(args[i]));
  PyRef guard_state = PyRef::checked(PyObject_CallFunctionObjArgs(guard_state_helper, self->fn, all_args.get(), nullptr));
  PyGuards guards = PyGuards::snapshot(guard_state.get(), values);
  graph::StepContext ctx;
  for (PyObject* t : values.tensors) ctx.arguments.push_back(tensor_of(t));
  std::vector<Tensor> owners = st.known;
  PyObject* params = PyTuple_GET_ITEM(guard_state.get(), 3);
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(params); ++i)
    if (is_tensor(PyList_GET_ITEM(params, i))) owners.push_back(tensor_of(PyList_GET_ITEM(params, i)));
  for (const Tensor& a : ctx.arguments) owners.push_back(a);
  for (const Tensor& p : owners) {
    bool seen = false;
    for (const auto& [q, g] : ctx.grads_at_start) seen = seen || q == p;
    if (seen) continue;
    AutogradMeta* m = p->autograd_meta();
    ctx.grads_at_start.emplace_back(p, m ? m->grad : Tensor());
  }
  std::vector<std::pair<Device, uint64_t>> offsets;
  for (Device d : generator_devices()) offsets.emplace_back(d, default_generator(d).offset());

  StepRecording rec(python_line, self->options.fullgraph);
  RecordingLog log;
  // The float arguments, as floats that note their uses (Note [Float arguments]), and their tags.
  std::vector<PyObject*> call_args(args, args + nargs + nkw);
  std::vector<PyRef> tracked;
  std::vector<std::pair<PyObject*, uint32_t>> tags;
  for (PyObject*& a : call_args) {
    if (tracked.size() >= values.floats.size() || !PyFloat_CheckExact(a)) continue;
    size_t k = tracked.size();
    tracked.push_back(PyRef::checked(PyObject_CallOneArg(step_float_type, a)));
    a = tracked.back().get();
    tags.emplace_back(a, rec.add_number({NumberSource::Argument, static_cast<int32_t>(k), 0, PyFloat_AS_DOUBLE(a)}));
  }
  std::vector<PyObject*> read_by_value;
  std::vector<std::string> notes;
  PyRef result;
  std::optional<Device> device;
  std::vector<Device> devices;
  {
    StepRecording::Scope scope(rec);
    RecordingScopes hooks(&log, &tags, &notes, &read_by_value);
    result = PyRef::steal(PyObject_Vectorcall(self->fn, call_args.data(), nargs, kwnames));
    if (!result) return nullptr;
    // The step's own sync: its trace goes to the recording (lazy/capture.h).
    devices = pending_devices();
    if (devices.size() == 1) {
      device = devices[0];
      rec.finish(*device);
    }
  }
  if (devices.size() > 1) sync_all();
  for (size_t k = 0; k < tracked.size(); ++k) {
    PyObject* f = tracked[k].get();
    // Used by Python, read as a setting, or returned (a replay would return the recorded one).
    bool used = PyObject_HasAttrString(f, "_loom_read") || std::ranges::find(read_by_value, f) != read_by_value.end() ||
                holds(result.get(), f);
    if (used) {
      spec.guard_float(k, values.floats[k]);
      st.note("compile", "float argument " + std::to_string(k) + " (" + std::to_string(PyFloat_AS_DOUBLE(f)) +
                             ") is used by the step's Python, not only by loom ops: its value is a guard");
    }
  }

  // What a replay would need, or why there can be none.
  std::vector<std::string> reasons;
  for (const SyncInStep& s : rec.syncs()) {
    std::string line = "the step " + s.what + " at " + (s.where.empty() ? std::string("an unknown line") : s.where) +
                       ": a sync point cannot be replayed, the call ran uncompiled";
    st.note("syncs", line);
    reasons.push_back(line);
  }
  for (const std::string& n : notes) reasons.push_back(n);
  for (PyObject* t : values.tensors)
    if (!impl_of(t).is_lazy()) {
      reasons.push_back(std::string("an argument is a ") + impl_of(t).device().str() +
                        " tensor: pass lazy tensors (x.to(\"lazy\") outside the compiled function)");
      break;
    }
  if (devices.empty() && reasons.empty()) reasons.push_back("the step recorded no lazy work");
  if (devices.size() > 1) reasons.push_back("the step computed on more than one device");
  std::shared_ptr<Entry> entry;
  if (reasons.empty()) {
    std::vector<PyObject*> returned;
    ResultTemplate result_template = ResultTemplate::of(result.get(), returned);
    for (size_t i = 0; i < returned.size(); ++i) {
      ctx.returned.push_back(tensor_of(returned[i]));
      for (size_t k = 0; k < values.tensors.size(); ++k)
        if (values.tensors[k] == returned[i]) result_template.returns_argument(i, static_cast<int32_t>(k));
    }
    for (const auto& [d, o] : offsets)
      if (d == *device) ctx.random_offset_at_start = o;
    auto made = CapturedStep::make(rec, ctx);
    if (auto* why = std::get_if<std::string>(&made)) {
      reasons.push_back(*why);
    } else {
      entry = std::make_shared<Entry>();
      entry->spec = std::move(spec);
      entry->guards = std::move(guards);
      entry->step = std::move(std::get<std::unique_ptr<CapturedStep>>(made));
      entry->numbers = rec.numbers();
      entry->updates = std::move(log.updates);
      entry->result = std::move(result_template);
      // One _step_count per recorded Optimizer.step() call: its updates share the count they saw.
      std::vector<std::pair<PyObject*, int64_t>> seen;
      for (const RecordedUpdate& u : entry->updates) {
        std::pair<PyObject*, int64_t> k{u.optimizer.get(), u.step_count};
        if (std::find(seen.begin(), seen.end(), k) != seen.end()) continue;
        seen.push_back(k);
        entry->step_counts.push_back(PyRef::borrow(u.optimizer.get()));
      }
      for (const RecordedUpdate& u : entry->updates)
        for (const Tensor& p : u.params) st.known.push_back(p);
    }
  }
  // Capture when two recordings in a row agree (Note [Capture and replay]).
  if (entry) {
    std::string why;
    std::shared_ptr<Entry> before = std::move(st.candidate);
    if (!before) {
      why = "first recording of this trace";
    } else if (!(before->spec == entry->spec) || !(before->guards == entry->guards)) {
      why = "the call differs from the one recorded before it (arguments or Python state)";
    } else if (std::string d = entry->step->agrees_with(*before->step); !d.empty()) {
      why = d;
    } else if (!entry->result.agrees_with(before->result)) {
      why = "the step's result holds a Python value that changed between the two recorded calls";
    } else if (!same_updates(*entry, *before)) {
      why = "the two recorded calls made different optimizer updates";
    }
    if (why.empty() && self->options.replay) {
      bool recapture = !st.entries.empty();
      st.note("compile", std::string(recapture ? "captured another step" : "captured the step") + " (trace " +
                             std::to_string(entry->step->key()) + "): later calls that match replay it");
      if (recapture) count(metrics().compiled_recaptures);
      if (const char* dir = std::getenv("LOOM_DUMP_DIR"); dir && *dir) {
        std::ofstream(std::string(dir) + "/compiled-" + std::to_string(entry->step->key()) + ".txt")
            << st.name << "\n" << entry->step->describe();
      }
      st.entries.insert(st.entries.begin(), std::move(entry));
      st.failed_in_a_row = 0;
    } else {
      if (!why.empty() && before) st.note("compile", "recorded, not captured yet: " + why);
      else if (!why.empty()) st.note("compile", "recorded: the step can be captured once the next call records the same trace");
      st.candidate = std::move(entry);
      if (before) ++st.failed_in_a_row;
    }
  } else {
    for (const std::string& r : reasons)
      if (r.find("a sync point") == std::string::npos) st.note("compile", "cannot be captured: " + r);
    ++st.failed_in_a_row;
  }
  if (st.failed_in_a_row >= self->options.cache_size_limit && st.fallback.empty()) {
    st.fallback = std::to_string(st.failed_in_a_row) + " calls in a row could not be captured; the last because " +
                  (reasons.empty() ? std::string("its recording disagreed with the one before it") : reasons.back());
  }
  if (!st.fallback.empty()) {
    st.note("compile", "runs uncompiled from now on: " + st.fallback);
    std::string warning = "loom.compile: " + st.name + " runs uncompiled from now on: " + st.fallback;
    if (PyErr_WarnEx(PyExc_RuntimeWarning, warning.c_str(), 1) < 0) return nullptr;
  }
  return result.release();
}

// What try_replay did: replayed (the result), found no entry for the call (`why`: the first
// entry's reason), or decided that the call runs uncompiled (a failed or busy replay).
enum class Replay { Done, NoMatch, Uncompiled };

Replay try_replay(CompiledFunction* self, PyObject* const* args, size_t nargs, PyObject* kwnames, PyRef& out,
                  std::string& why) {
  State& st = *self->state;
  for (size_t e = 0; e < st.entries.size(); ++e) {
    std::shared_ptr<Entry> entry = st.entries[e];  // held: another thread may drop it during the run
    CallValues values;
    std::string miss = entry->spec.match(args, nargs, kwnames, values);
    if (miss.empty()) miss = entry->guards.check(values);
    CapturedStep::Resolved resolved;
    std::vector<TensorImpl*> tensors;
    for (PyObject* t : values.tensors) tensors.push_back(&impl_of(t));
    graph::ReplayInputs in{tensors, {}};
    if (miss.empty()) miss = entry->step->check(in, resolved);
    std::vector<ReplayedUpdate> updates(entry->updates.size());
    std::vector<double> numbers(entry->numbers.size(), 0.0);
    for (size_t u = 0; u < entry->updates.size() && miss.empty(); ++u) miss = replay_update(entry->updates[u], updates[u]);
    if (!miss.empty()) {
      if (why.empty()) why = miss;
      continue;
    }
    for (size_t i = 0; i < entry->numbers.size(); ++i) {
      const NumberSource& src = entry->numbers[i];
      if (src.kind == NumberSource::Argument) {
        numbers[i] = PyFloat_AS_DOUBLE(values.floats[static_cast<size_t>(src.index)]);
      } else {
        const std::vector<double>& v = updates[static_cast<size_t>(src.index)].numbers.values;
        numbers[i] = static_cast<size_t>(src.position) < v.size() ? v[static_cast<size_t>(src.position)] : 0.0;
      }
    }
    in.numbers = numbers;
    bool busy = false;
    std::vector<Tensor> returned;
    try {
      returned = entry->step->replay(in, resolved, busy);
    } catch (const Error& err) {
      if (err.kind() == ErrorKind::Interrupted) throw;
      st.note("compile", std::string("a replay failed (") + err.what() + "): the call runs uncompiled");  // Note [Float arguments]
//
// A Python float passed to the compiled function is a number of the step (read anew at every
// replay) only if nothing but loom's ops took its value: the Scalar an op makes of it carries
// its tag (lazy/capture.h), but a value Python computed from it (1 - p, p > 0.5, f"{p}") or an
// op took as a setting (to_double: an attribute, not a Scalar) would be baked into the capture.
// So a recording passes the function a float subclass equal to it (loom._compile._StepFloat)
// that notes every use by Python, and to_double notes the reads of such floats; a float that was
// used so is a guard on its value for that capture instead (as with dynamic=False). What
// neither sees is C code outside loom that reads the float's bits directly (math.exp(p)):
// README, what loom.compile cannot see.
//
// Note [A failed replay]
      return Replay::Uncompiled;
    }
    if (busy) {
      st.note("compile", "another thread replays the step now: the call runs uncompiled");
      return Replay::Uncompiled;
    }
    // Committed: the Python side of the step's updates (Note [Optimizer numbers]).
    for (ReplayedUpdate& u : updates) u.commit();
    for (const PyRef& opt : entry->step_counts) {
      PyRef count = PyRef::steal(PyObject_GetAttrString(opt.get(), "_step_count"));
      if (!count) PyErr_Clear();
      PyRef next = PyRef::steal(PyLong_FromLongLong((count && PyLong_Check(count.get()) ? PyLong_AsLongLong(count.get()) : 0) + 1));
      if (PyObject_SetAttrString(opt.get(), "_step_count", next.get()) < 0) PyErr_Clear();
    }
    ++entry->replays;
    count(metrics().compiled_replays);
    // Most recently used first. The run released the GIL: another thread may have changed the
    // list meanwhile (a capture, a reset), so the entry is looked up again.
    if (auto it = std::find(st.entries.begin(), st.entries.end(), entry); it != st.entries.end())
      std::rotate(st.entries.begin(), it, it + 1);
    out = PyRef::checked(entry->result.make(returned, values));
    return Replay::Done;
  }
  return Replay::NoMatch;
}

PyObject* compiled_call(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* self = reinterpret_cast<CompiledFunction*>(callable);
  size_t nargs = PyVectorcall_NARGS(nargsf);
  LOOM_PY_BEGIN
  auto start = std::chrono::steady_clock::now();
  State& st = *self->state;
  count(metrics().compiled_calls);
  ++st.calls;
  // A compiled function called inside another's recording is part of that step.
  if (recording()) return plain_call(self, args, nargs, kwnames);
  if (!st.fallback.empty()) {
    count(metrics().compiled_fallbacks);
    return plain_call(self, args, nargs, kwnames);
  }
  // A replay reads materialized tensors: what this thread left pending is computed first.
  sync_all();
  if (self->options.replay && !st.entries.empty()) {
    std::string why;
    PyRef out;
    switch (try_replay(self, args, nargs, kwnames, out, why)) {
      case Replay::Done:
        count(metrics().compiled_replay_nanoseconds,
              std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
        return out.release();
      case Replay::Uncompiled:
        count(metrics().compiled_fallbacks);
        return plain_call(self, args, nargs, kwnames);
      case Replay::NoMatch: break;
    }
    st.note("recompiles", "no captured step matches (" + why + "): recording again");
    if (static_cast<int64_t>(st.entries.size()) >= self->options.cache_size_limit) {
      st.fallback = "cache_size_limit (" + std::to_string(self->options.cache_size_limit) +
                    ") captured steps, and none matches: " + why;
      st.note("compile", "runs uncompiled from now on: " + st.fallback);
      std::string warning = "loom.compile: " + st.name + " runs uncompiled from now on: " + st.fallback;
      if (PyErr_WarnEx(PyExc_RuntimeWarning, warning.c_str(), 1) < 0) return nullptr;
      count(metrics().compiled_fallbacks);
      return plain_call(self, args, nargs, kwnames);
    }
  }
  return record(self, args, nargs, kwnames);
  LOOM_PY_END(nullptr)
}

// ---- the type ----

PyObject* compiled_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  LOOM_PY_BEGIN
  static const char* names[] = {"fn", "fullgraph", "dynamic_numbers", "replay", "cache_size_limit", "name", nullptr};
  PyObject* fn = nullptr;
  int fullgraph = 0, numbers = 1, replay = 1;
  long long limit = 8;
  const char* name = "";
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|pppLs", const_cast<char**>(names), &fn, &fullgraph, &numbers,
                                   &replay, &limit, &name))
    return nullptr;
  LOOM_CHECK(PyCallable_Check(fn), Type, "loom.compile expects a callable, not ", type_name(fn));
  LOOM_CHECK(limit >= 1, Value, "cache_size_limit must be at least 1, not ", limit);
  auto* self = reinterpret_cast<CompiledFunction*>(type->tp_alloc(type, 0));
  if (!self) return nullptr;
  self->vectorcall = compiled_call;
  self->fn = Py_NewRef(fn);
  self->options = {fullgraph != 0, numbers != 0, replay != 0, limit};
  self->state = new State();
  self->state->name = name;
  return reinterpret_cast<PyObject*>(self);
  LOOM_PY_END(nullptr)
}

void compiled_dealloc(PyObject* obj) {
  auto* self = reinterpret_cast<CompiledFunction*>(obj);
  PyObject_GC_UnTrack(obj);
  if (self->weakrefs) PyObject_ClearWeakRefs(obj);
  Py_CLEAR(self->dict);
  Py_CLEAR(self->fn);
  delete self->state;
  self->state = nullptr;
  Py_TYPE(obj)->tp_free(obj);
}

int compiled_traverse(PyObject* obj, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<CompiledFunction*>(obj);
  Py_VISIT(self->fn);
  Py_VISIT(self->dict);
  return 0;
}

int compiled_clear(PyObject* obj) {
  auto* self = reinterpret_cast<CompiledFunction*>(obj);
  Py_CLEAR(self->dict);
  if (self->state) {
    self->state->entries.clear();
    self->state->candidate.reset();
  }
  return 0;
}

// A compiled function is a method when it is a class attribute (@loom.compile on a method).
PyObject* compiled_get(PyObject* self, PyObject* obj, PyObject*) {
  if (!obj || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

PyObject* m_history(PyObject* obj, PyObject*) {
  LOOM_PY_BEGIN
  const State& st = *reinterpret_cast<CompiledFunction*>(obj)->state;
  PyRef out = PyRef::checked(PyList_New(0));
  for (const std::string& line : st.history) {
    PyRef s = PyRef::checked(PyUnicode_FromString(line.c_str()));
    check_status(PyList_Append(out.get(), s.get()));
  }
  return out.release();
  LOOM_PY_END(nullptr)
}

PyObject* m_entries(PyObject* obj, PyObject*) {
  LOOM_PY_BEGIN
  const State& st = *reinterpret_cast<CompiledFunction*>(obj)->state;
  PyRef out = PyRef::checked(PyList_New(0));
  for (const auto& e : st.entries) {
    std::string text = e->step->describe() + "  replayed " + std::to_string(e->replays) + " times; " +
                       std::to_string(e->updates.size()) + " optimizer updates recomputed at each replay\n";
    PyRef s = PyRef::checked(PyUnicode_FromString(text.c_str()));
    check_status(PyList_Append(out.get(), s.get()));
  }
  return out.release();
  LOOM_PY_END(nullptr)
}

PyObject* m_reset(PyObject* obj, PyObject*) {
  State& st = *reinterpret_cast<CompiledFunction*>(obj)->state;
  st.entries.clear();
  st.candidate.reset();
  st.fallback.clear();
  st.failed_in_a_row = 0;
  st.known.clear();
  return Py_NewRef(Py_None);
}

PyObject* get_fallback(PyObject* obj, void*) {
  const State& st = *reinterpret_cast<CompiledFunction*>(obj)->state;
  if (st.fallback.empty()) return Py_NewRef(Py_None);
  return PyUnicode_FromString(st.fallback.c_str());
}

PyObject* get_fn(PyObject* obj, void*) { return Py_NewRef(reinterpret_cast<CompiledFunction*>(obj)->fn); }

PyMethodDef compiled_methods[] = {
    {"_history", m_history, METH_NOARGS, "what the compiled function did, a line per event (explain)"},
    {"_entries", m_entries, METH_NOARGS, "a description of each captured step (the dump)"},
    {"_reset", m_reset, METH_NOARGS, "drops the captured steps (loom.compiler.reset)"},
    {nullptr, nullptr, 0, nullptr},
};

PyGetSetDef compiled_getset[] = {
    {"_fallback", get_fallback, nullptr, "why the function runs uncompiled for good, or None", nullptr},
    {"_fn", get_fn, nullptr, "the compiled callable", nullptr},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyTypeObject CompiledFunctionType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "loom._C._CompiledFunction";
  t.tp_basicsize = sizeof(CompiledFunction);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR;
  t.tp_doc = "A function compiled by loom.compile: records, captures and replays its calls (pyext/compile_bindings.cpp)";
  t.tp_new = compiled_new;
  t.tp_dealloc = compiled_dealloc;
  t.tp_traverse = compiled_traverse;
  t.tp_clear = compiled_clear;
  t.tp_call = PyVectorcall_Call;
  t.tp_vectorcall_offset = offsetof(CompiledFunction, vectorcall);
  t.tp_dictoffset = offsetof(CompiledFunction, dict);
  t.tp_weaklistoffset = offsetof(CompiledFunction, weakrefs);
  t.tp_descr_get = compiled_get;
  t.tp_methods = compiled_methods;
  t.tp_getset = compiled_getset;
  return t;
}();

// _compile_setup(guard_state, step_float): loom/_compile.py's helpers.
PyObject* f_compile_setup(PyObject*, PyObject* args) {
  PyObject* helper = nullptr;
  PyObject* float_type = nullptr;
  if (!PyArg_ParseTuple(args, "OO", &helper, &float_type)) return nullptr;
  Py_XSETREF(guard_state_helper, Py_NewRef(helper));
  Py_XSETREF(step_float_type, Py_NewRef(float_type));
  return Py_NewRef(Py_None);
}

// _compile_note_disabled(name): a loom.compiler.disable'd function runs inside a recorded step.
PyObject* f_compile_note_disabled(PyObject*, PyObject* name) {
  if (recording_notes) {
    const char* n = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : nullptr;
    recording_notes->push_back(std::string("the step calls ") + (n ? n : "a function") +
                               ", which loom.compiler.disable keeps out of compiled steps");
  }
  return Py_NewRef(Py_None);
}

PyObject* f_compile_recording(PyObject*, PyObject*) { return PyBool_FromLong(recording() != nullptr); }

}  // namespace

PyMethodDef compile_functions[] = {
    {"_compile_setup", f_compile_setup, METH_VARARGS, "_compile_setup(guard_state, step_float)"},
    {"_compile_note_disabled", f_compile_note_disabled, METH_O, "a disabled function runs inside a recorded step"},
    {"_compile_recording", f_compile_recording, METH_NOARGS, "whether this thread records a compiled step now"},
    {nullptr, nullptr, 0, nullptr},
};

void register_compile_type(PyObject* module) {
  check_status(PyType_Ready(&CompiledFunctionType));
  check_status(PyModule_AddObjectRef(module, "_CompiledFunction", reinterpret_cast<PyObject*>(&CompiledFunctionType)));
}

}  // namespace loom::py
