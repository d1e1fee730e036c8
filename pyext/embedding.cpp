// loom's long work inside Python: the hooks of runtime/blocking.h.
//
// The GIL. A BlockingRegion (a sync running its trace or compiling it, a wait for another
// thread's sync: lazy/sync.h) releases the GIL if this thread holds it, so other Python threads
// run meanwhile; nothing inside touches a Python object.
//
// Ctrl-C. Python runs signal handlers only on the main thread and only between bytecodes, so
// while the main thread is inside loom without the GIL a SIGINT would wait for loom to finish.
// loom therefore puts a C handler of its own in front of the one installed for SIGINT (when the
// main thread first enters a region, and again whenever signal.signal replaced it; never in front
// of SIG_DFL or SIG_IGN), which only counts signals and calls the handler it displaced. A region
// on the main thread that sees the count move takes the GIL back for a moment and lets Python
// run its handler (PyErr_CheckSignals): if the handler raises (the default one raises
// KeyboardInterrupt), loom's work stops with Error(Interrupted) and the Python exception is kept
// until that error reaches the extension's boundary (raise_interrupt); if it does not raise, the
// work goes on.
#include "pyext/embedding.h"

#include <signal.h>

#include <atomic>

#include "runtime/blocking.h"

namespace loom::py {
namespace {

std::atomic<uint64_t> sigint_count{0};
struct sigaction displaced {};  // the SIGINT action loom's handler stands in front of
unsigned long main_thread = 0;

void on_sigint(int sig, siginfo_t* info, void* context) {
  sigint_count.fetch_add(1, std::memory_order_relaxed);
  if (displaced.sa_flags & SA_SIGINFO) {
    if (displaced.sa_sigaction) displaced.sa_sigaction(sig, info, context);
  } else if (displaced.sa_handler != SIG_DFL && displaced.sa_handler != SIG_IGN) {
    displaced.sa_handler(sig);
  }
}

// Puts on_sigint in front of the current SIGINT handler, unless it is there already or there is
// none to run (SIG_DFL ends the process at once anyway; SIG_IGN asks for nothing).
void chain_sigint_handler() {
  struct sigaction current {};
  if (sigaction(SIGINT, nullptr, &current) != 0) return;
  bool info = current.sa_flags & SA_SIGINFO;
  if (info && current.sa_sigaction == on_sigint) return;
  if (!info && (current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN)) return;
  displaced = current;
  struct sigaction ours = current;
  ours.sa_sigaction = on_sigint;
  ours.sa_flags = current.sa_flags | SA_SIGINFO;
  sigaction(SIGINT, &ours, nullptr);
}

struct ThreadState {
  PyThreadState* saved = nullptr;  // while this thread is in a region that released the GIL
  bool interruptible = false;      // the main thread's region
  uint64_t seen = 0;               // sigint_count when last looked at
  PyObject* type = nullptr;        // the exception a signal handler raised, not yet raised
  PyObject* value = nullptr;
  PyObject* traceback = nullptr;
};
thread_local ThreadState state;

void* release() {
  if (!PyGILState_Check()) return nullptr;
  state.interruptible = PyThread_get_thread_ident() == main_thread;
  if (state.interruptible) {
    chain_sigint_handler();
    state.seen = sigint_count.load(std::memory_order_relaxed);
  }
  state.saved = PyEval_SaveThread();
  return state.saved;
}

void reacquire(void* saved) {
  PyEval_RestoreThread(static_cast<PyThreadState*>(saved));
  state.saved = nullptr;
  state.interruptible = false;
}

bool interrupt_requested() {
  if (!state.interruptible || !state.saved) return false;
  uint64_t now = sigint_count.load(std::memory_order_relaxed);
  if (now == state.seen) return false;
  state.seen = now;
  PyEval_RestoreThread(state.saved);
  bool raised = PyErr_CheckSignals() < 0;
  if (raised) {
    Py_XDECREF(state.type);
    Py_XDECREF(state.value);
    Py_XDECREF(state.traceback);
    PyErr_Fetch(&state.type, &state.value, &state.traceback);
  }
  state.saved = PyEval_SaveThread();
  return raised;
}

bool holds_lock() { return PyGILState_Check(); }

}  // namespace

void install_embedding() {
  PyRef threading = PyRef::checked(PyImport_ImportModule("threading"));
  PyRef thread = PyRef::checked(PyObject_CallMethod(threading.get(), "main_thread", nullptr));
  PyRef ident = PyRef::checked(PyObject_GetAttrString(thread.get(), "ident"));
  main_thread = PyLong_AsUnsignedLong(ident.get());
  if (PyErr_Occurred()) throw PythonError{};
  install_embedding_hooks({release, reacquire, interrupt_requested, holds_lock});
}

void raise_interrupt(const char* message) {
  if (state.type) {
    PyErr_Restore(state.type, state.value, state.traceback);
    state.type = state.value = state.traceback = nullptr;
    return;
  }
  PyErr_SetString(PyExc_KeyboardInterrupt, message);
}

}  // namespace loom::py
