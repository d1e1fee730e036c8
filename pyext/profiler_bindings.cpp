// The C side of loom.profiler (pyext/loom/profiler.py) and loom.explain_syncs(): starting and
// stopping the event store (runtime/profiler.h) with source capture (lazy/provenance.h), user
// ranges, the sync sites, and the hook that reads the Python line behind an op or a sync
// (runtime/source_location.h).
#include <string>
#include <unordered_map>

#include "lazy/provenance.h"
#include "pyext/common.h"
#include "runtime/error.h"
#include "runtime/profiler.h"
#include "runtime/source_location.h"

namespace loom::py {
namespace {

// Where loom's own Python files are: frames there are skipped, so a line is the user's (the line
// calling model(x), not Module.__call__). perf/, installed as loom.perf, counts as the user's.
std::string package_dir;

// Per code object (held, so its address is never reused): whether it is loom's, and the ids of
// its lines.
struct CodeInfo {
  bool internal;
  std::unordered_map<int, int32_t> lines;
};
std::unordered_map<PyCodeObject*, CodeInfo> codes;

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

CodeInfo& info_of(PyCodeObject* code) {
  auto it = codes.find(code);
  if (it != codes.end()) return it->second;
  const char* file = PyUnicode_AsUTF8(code->co_filename);
  if (!file) PyErr_Clear();
  std::string f = file ? file : "";
  bool internal = !package_dir.empty() && starts_with(f, package_dir) && !starts_with(f, package_dir + "perf/");
  Py_INCREF(code);
  return codes.emplace(code, CodeInfo{internal, {}}).first->second;
}

// The innermost frame outside loom's package, interned; -1 without the GIL or Python frames.
// Never throws and leaves no Python error set.
int32_t python_source() noexcept {
  if (!PyGILState_Check()) return -1;
  try {
    PyFrameObject* frame = PyEval_GetFrame();  // borrowed
    Py_XINCREF(frame);
    int32_t id = -1;
    while (frame) {
      PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
      CodeInfo& info = info_of(code);
      if (!info.internal) {
        int line = PyFrame_GetLineNumber(frame);
        auto [it, fresh] = info.lines.try_emplace(line, -1);
        if (fresh) {
          const char* file = PyUnicode_AsUTF8(code->co_filename);
          const char* name = PyUnicode_AsUTF8(code->co_qualname);
          if (!file || !name) PyErr_Clear();
          it->second = intern_source(file ? file : "?", line, name ? name : "?");
        }
        id = it->second;
        Py_DECREF(code);
        break;
      }
      Py_DECREF(code);
      PyFrameObject* back = PyFrame_GetBack(frame);  // new reference
      Py_DECREF(frame);
      frame = back;
    }
    Py_XDECREF(frame);
    return id;
  } catch (...) {
    return -1;
  }
}

// A location as a tuple (file, line, function), or None.
PyObject* location_tuple(int32_t id) {
  if (id < 0) return Py_NewRef(Py_None);
  SourceLocation l = source_location(id);
  return Py_BuildValue("(sis)", l.file.c_str(), l.line, l.function.c_str());
}

// _install_source_hook(package_dir): lines are read from the first frame outside package_dir.
PyObject* f_install_source_hook(PyObject*, PyObject* dir) {
  LOOM_PY_BEGIN
  const char* d = PyUnicode_AsUTF8(dir);
  if (!d) return nullptr;
  package_dir = d;
  if (!package_dir.empty() && package_dir.back() != '/') package_dir += '/';
  codes.clear();  // the package moved: judge every code object again (their references leak, few)
  install_source_hook(&python_source);
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

// _profiler_start(record_sample): clears the store and records from now on, with source capture.
PyObject* f_profiler_start(PyObject*, PyObject* sample) {
  LOOM_PY_BEGIN
  long long every = PyLong_AsLongLong(sample);
  if (every == -1 && PyErr_Occurred()) return nullptr;
  LOOM_CHECK(!profiler::active(), Runtime, "a loom profile is already running; profiles do not nest");
  set_record_sample(every);
  hold_source_capture();
  set_profiling_records(true);
  profiler::start();
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

PyObject* event_tuple(const profiler::Event& e) {
  PyRef fused = PyRef::checked(PyList_New(static_cast<Py_ssize_t>(e.fused.size())));
  for (size_t i = 0; i < e.fused.size(); ++i) {
    PyRef where = PyRef::checked(location_tuple(e.fused[i].source));
    PyList_SET_ITEM(fused.get(), static_cast<Py_ssize_t>(i),
                    PyRef::checked(Py_BuildValue("(sO)", e.fused[i].op, where.get())).release());
  }
  PyRef args = PyRef::checked(PyDict_New());
  for (const auto& [k, v] : e.args) {
    PyRef value = PyRef::checked(PyUnicode_FromString(v.c_str()));
    check_status(PyDict_SetItemString(args.get(), k.c_str(), value.get()));
  }
  for (const auto& [k, v] : e.counters) {
    PyRef value = PyRef::checked(PyLong_FromLongLong(v));
    check_status(PyDict_SetItemString(args.get(), k, value.get()));
  }
  PyRef where = PyRef::checked(location_tuple(e.source));
  return Py_BuildValue("(sssLLLOLLOO)", e.kind == profiler::Event::Counter ? "counter" : "span", e.category,
                       e.name.c_str(), static_cast<long long>(e.start_ns), static_cast<long long>(e.duration_ns),
                       static_cast<long long>(e.thread), where.get(), static_cast<long long>(e.bytes_read),
                       static_cast<long long>(e.bytes_written), fused.get(), args.get());
}

// _profiler_stop(): stops recording; the events as tuples (kind, category, name, start_ns,
// duration_ns, thread, source, bytes_read, bytes_written, fused, args).
PyObject* f_profiler_stop(PyObject*, PyObject*) {
  LOOM_PY_BEGIN
  if (!profiler::active()) return PyList_New(0);
  std::vector<profiler::Event> events = profiler::stop();
  set_profiling_records(false);
  release_source_capture();
  PyRef list = PyRef::checked(PyList_New(static_cast<Py_ssize_t>(events.size())));
  for (size_t i = 0; i < events.size(); ++i)
    PyList_SET_ITEM(list.get(), static_cast<Py_ssize_t>(i), PyRef::checked(event_tuple(events[i])).release());
  return list.release();
  LOOM_PY_END(nullptr)
}

PyObject* f_profiler_now(PyObject*, PyObject*) { return PyLong_FromLongLong(profiler::now_ns()); }

PyObject* f_profiler_active(PyObject*, PyObject*) { return PyBool_FromLong(profiler::active()); }

// _profiler_emit(category, name, start_ns, end_ns): a span of Python's own (record_function) on
// the calling thread.
PyObject* f_profiler_emit(PyObject*, PyObject* args) {
  LOOM_PY_BEGIN
  const char* category;
  const char* name;
  long long start, end;
  if (!PyArg_ParseTuple(args, "ssLL:_profiler_emit", &category, &name, &start, &end)) return nullptr;
  if (!profiler::active()) return Py_NewRef(Py_None);
  profiler::Event e;
  e.category = std::string(category) == "user" ? "user" : "python";  // static strings only
  e.name = name;
  e.start_ns = start;
  e.duration_ns = end - start;
  e.thread = profiler::thread_id();
  profiler::emit(std::move(e));
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

// _sync_sites(reset): (cause, (file, line, function) or None, count) per site since the last reset.
PyObject* f_sync_sites(PyObject*, PyObject* reset) {
  LOOM_PY_BEGIN
  int r = PyObject_IsTrue(reset);
  if (r < 0) return nullptr;
  std::vector<SyncSite> sites = sync_sites(r != 0);
  PyRef list = PyRef::checked(PyList_New(static_cast<Py_ssize_t>(sites.size())));
  for (size_t i = 0; i < sites.size(); ++i) {
    PyRef where = PyRef::checked(location_tuple(sites[i].source));
    PyList_SET_ITEM(list.get(), static_cast<Py_ssize_t>(i),
                    PyRef::checked(Py_BuildValue("(sOL)", sync_cause_name(sites[i].cause), where.get(),
                                                 static_cast<long long>(sites[i].count)))
                        .release());
  }
  return list.release();
  LOOM_PY_END(nullptr)
}

PyObject* f_capturing_sources(PyObject*, PyObject*) { return PyBool_FromLong(capturing_sources()); }

}  // namespace

PyMethodDef profiler_functions[] = {
    {"_install_source_hook", f_install_source_hook, METH_O,
     "_install_source_hook(package_dir): Python lines are read from the first frame outside package_dir"},
    {"_profiler_start", f_profiler_start, METH_O,
     "_profiler_start(record_sample): start recording events (every record_sample-th op recorded; 0: none)"},
    {"_profiler_stop", f_profiler_stop, METH_NOARGS, "_profiler_stop(): stop recording; the events as tuples"},
    {"_profiler_now", f_profiler_now, METH_NOARGS, "_profiler_now(): the profiler's clock, in nanoseconds"},
    {"_profiler_active", f_profiler_active, METH_NOARGS, "_profiler_active(): whether a profile records"},
    {"_profiler_emit", f_profiler_emit, METH_VARARGS,
     "_profiler_emit(category, name, start_ns, end_ns): a span of Python's on this thread"},
    {"_sync_sites", f_sync_sites, METH_O,
     "_sync_sites(reset): the syncs by cause and Python line, with counts, since the last reset"},
    {"_capturing_sources", f_capturing_sources, METH_NOARGS,
     "_capturing_sources(): whether recorded ops keep their Python line (a profile, or LOOM_DEBUG_SOURCE=1)"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace loom::py
