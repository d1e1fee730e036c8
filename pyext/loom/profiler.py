"""loom.profiler: where a step's time goes, down to the Python line behind each fused kernel.

PyTorch's shape of API (``torch.profiler``)::

    with loom.profiler.profile() as prof:
        train_step()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20))
    prof.export_chrome_trace("trace.json")   # open in https://ui.perfetto.dev or chrome://tracing

What a profile records (runtime/profiler.h, lazy/provenance.h, graph/step_profile.h):

- ``record <Op>``: the ops recorded between syncs, each a span from the previous op to its node
  (Python, the binding, shape inference and the node: what recording cost), every
  ``record_sample``-th op, with its Python line; and per sync one span over all of them;
- ``sync (<cause>)``: each sync, with its cause (item, repr, host, explicit,
  data_dependent_shape, other) and Python line; ``build trace and key`` inside it;
- ``plan cache lookup`` (hit or miss), ``lower plan`` and ``compile <target> module`` (its
  kernels, whether the compiler ran, its seconds) on a miss;
- ``run plan`` and one span per step of the plan: a generated kernel ("loom_k3: Mul+Add+Tanh",
  category kernel) with the ops it fused and the Python line of each, a matrix product
  (``MatMul``, blas), a collective (``AllReduce``, collective), a library op (library), each
  with the bytes it reads and writes; on a GPU the steps are timed with events on loom's stream
  (category cuda), a graph replay as one span;
- ``memory``: the device allocator's allocated and reserved bytes after each run.

Differences from PyTorch: times are the host's (self time subtracts the spans nested in a span on
the same thread); ``activities``, ``record_shapes``, ``profile_memory`` and ``with_stack`` are
accepted and change nothing (memory and Python lines are always recorded); profiles do not nest.
Ops keep their Python line only while a profile runs (or under ``LOOM_DEBUG_SOURCE=1``), so a
plan's kernels list the lines of the ops recorded during the profile.
"""

import collections
import enum
import functools
import json
import os

from loom import _C

__all__ = ["profile", "record_function", "schedule", "ProfilerAction", "ProfilerActivity", "explain_syncs",
           "EventList", "FunctionEvent", "FunctionEventAvg"]


class ProfilerActivity(enum.Enum):
    CPU = 0
    CUDA = 1


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait, warmup, active, repeat=0, skip_first=0):
    """The action for each step of a training loop, as ``torch.profiler.schedule``: after
    ``skip_first`` steps, cycles of ``wait`` steps off, ``warmup`` steps recorded and thrown away,
    and ``active`` steps recorded (``on_trace_ready`` runs after the last), ``repeat`` times
    (0: for ever)."""
    for name, value in (("wait", wait), ("warmup", warmup), ("active", active), ("repeat", repeat),
                        ("skip_first", skip_first)):
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"schedule(): {name} must be a non-negative int, got {value!r}")
    if active < 1:
        raise ValueError("schedule(): active must be at least 1")

    def action(step):
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        pos = step % cycle
        if pos < wait:
            return ProfilerAction.NONE
        if pos < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if pos < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return action


def _always_record(step):
    return ProfilerAction.RECORD


def _where(location):
    """'file.py:12' of a (file, line, function) location, or ''."""
    if not location:
        return ""
    return f"{os.path.basename(location[0])}:{location[1]}"


class FunctionEvent:
    """One span of a profile: ``name``, ``category``, ``thread``, ``start_us`` and ``duration_us``
    (microseconds), ``self_us`` (its time without the spans nested in it on its lane), ``source``
    ((file, line, function) of the op or sync, or None), ``fused`` (a generated kernel's ops:
    [(op, (file, line, function) or None)]), ``bytes_read`` / ``bytes_written`` (-1: unknown) and
    ``args`` (a dict)."""

    __slots__ = ("kind", "category", "name", "start_ns", "duration_ns", "thread", "source", "bytes_read",
                 "bytes_written", "fused", "args", "self_ns", "lane")

    def __init__(self, raw):
        (self.kind, self.category, self.name, self.start_ns, self.duration_ns, self.thread, self.source,
         self.bytes_read, self.bytes_written, self.fused, self.args) = raw
        self.self_ns = self.duration_ns
        self.lane = _lane_kind(self.thread)

    @property
    def key(self):
        return self.name

    @property
    def start_us(self):
        return self.start_ns / 1e3

    @property
    def duration_us(self):
        return self.duration_ns / 1e3

    @property
    def self_us(self):
        return self.self_ns / 1e3

    @property
    def is_device(self):
        return self.lane == "gpu"

    def sources(self):
        """The Python lines behind the event: a kernel's as 'file.py:12 (Mul+Add)', one per line
        with the ops of its fused ops recorded there (lines unknown: '?'); else its own line."""
        if self.fused:
            ops_at = {}
            for op, loc in self.fused:
                ops = ops_at.setdefault(_where(loc) or "?", [])
                if op not in ops:
                    ops.append(op)
            return [f"{where} ({'+'.join(ops)})" for where, ops in ops_at.items()]
        return [_where(self.source)] if self.source else []

    def __repr__(self):
        return (f"<FunctionEvent {self.category} {self.name!r} start={self.start_us:.1f}us "
                f"dur={self.duration_us:.1f}us>")


def _lane_kind(thread):
    if thread <= -1000:
        return "gpu"
    if thread >= 1 << 32:
        return "record"
    return "thread"


def _lane_name(thread):
    if thread <= -1000:
        return f"cuda:{-1000 - thread} stream"
    if thread >= 1 << 32:
        return f"ops recorded (thread {thread - (1 << 32)})"
    return f"thread {thread}"


def _compute_self_times(spans):
    """Sets each span's self time: its duration less that of the spans directly nested in it on
    its lane."""
    by_lane = collections.defaultdict(list)
    for e in spans:
        by_lane[e.thread].append(e)
    for events in by_lane.values():
        events.sort(key=lambda e: (e.start_ns, -e.duration_ns))
        stack = []
        for e in events:
            while stack and stack[-1].start_ns + stack[-1].duration_ns <= e.start_ns:
                stack.pop()
            if stack:
                parent = stack[-1]
                inside = min(e.start_ns + e.duration_ns, parent.start_ns + parent.duration_ns) - e.start_ns
                parent.self_ns -= max(inside, 0)
            stack.append(e)


class FunctionEventAvg:
    """The events of one key (a name; with ``group_by_source``, a name and a Python line) added
    up, with PyTorch's attribute names (microseconds)."""

    def __init__(self, key, category):
        self.key = key
        self.category = category
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.cuda_time_total = 0.0
        self.self_cuda_time_total = 0.0
        self.bytes_read = 0
        self.bytes_written = 0
        self.source_lines = []

    def add(self, e):
        self.count += 1
        if e.is_device:
            self.cuda_time_total += e.duration_us
            self.self_cuda_time_total += e.self_us
        else:
            self.cpu_time_total += e.duration_us
            self.self_cpu_time_total += e.self_us
        self.bytes_read += max(e.bytes_read, 0)
        self.bytes_written += max(e.bytes_written, 0)
        for s in e.sources():
            if s not in self.source_lines:
                self.source_lines.append(s)

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def cuda_time(self):
        return self.cuda_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return (f"<FunctionEventAvg {self.key!r} count={self.count} cpu_time_total={self.cpu_time_total:.1f}us "
                f"self_cpu_time_total={self.self_cpu_time_total:.1f}us>")


def _format_time(us):
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _format_bytes(n):
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


_SORT_KEYS = ("self_cpu_time_total", "cpu_time_total", "cpu_time", "count", "self_cuda_time_total",
              "cuda_time_total", "cuda_time", "bytes_read", "bytes_written")


class EventList(list):
    """A list of events (FunctionEvent) or of their averages (FunctionEventAvg)."""

    def table(self, sort_by=None, row_limit=100, max_name_column_width=55, max_source_column_width=80, **_):
        """A text table in PyTorch's layout, with loom's columns: bytes read and written, and the
        Python lines behind each row (a kernel: each fused op's)."""
        rows = [r if isinstance(r, FunctionEventAvg) else _average([r], False)[0] for r in self]
        if sort_by is not None:
            if sort_by not in _SORT_KEYS:
                raise ValueError(f"table(): sort_by must be one of {', '.join(_SORT_KEYS)}, got {sort_by!r}")
            rows.sort(key=lambda r: getattr(r, sort_by), reverse=True)
        self_total = sum(r.self_cpu_time_total for r in rows if r.category not in ("user", "python")) or 1.0
        if row_limit is not None and row_limit > 0:
            rows = rows[:row_limit]
        device = any(r.cuda_time_total for r in rows)
        columns = ["Name", "Category", "Self CPU %", "Self CPU", "CPU total", "CPU time avg"]
        if device:
            columns += ["Self CUDA", "CUDA total"]
        columns += ["# of Calls", "Bytes read", "Bytes written", "Python lines"]
        table = []
        for r in rows:
            name = r.key if len(r.key) <= max_name_column_width else r.key[:max_name_column_width - 3] + "..."
            cells = [name, r.category, f"{100 * r.self_cpu_time_total / self_total:.2f}%",
                     _format_time(r.self_cpu_time_total), _format_time(r.cpu_time_total), _format_time(r.cpu_time)]
            if device:
                cells += [_format_time(r.self_cuda_time_total), _format_time(r.cuda_time_total)]
            lines = ", ".join(r.source_lines)
            if len(lines) > max_source_column_width:
                lines = lines[:max_source_column_width - 3] + "..."
            cells += [str(r.count), _format_bytes(r.bytes_read) if r.bytes_read else "",
                      _format_bytes(r.bytes_written) if r.bytes_written else "", lines]
            table.append(cells)
        widths = [max([len(c)] + [len(row[i]) for row in table]) for i, c in enumerate(columns)]
        left = {0, 1, len(columns) - 1}

        def line(cells):
            return "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

        rule = "  ".join("-" * w for w in widths)
        out = [rule, line(columns), rule] + [line(r) for r in table] + [rule]
        out.append(f"Self CPU time total: {_format_time(self_total if self_total != 1.0 else 0.0)}")
        return "\n".join(out) + "\n"


def _average(events, group_by_source):
    groups = {}
    for e in events:
        if e.kind != "span":
            continue
        key = (e.name, e.category, tuple(e.sources()) if group_by_source else ())
        if key not in groups:
            groups[key] = FunctionEventAvg(e.name, e.category)
        groups[key].add(e)
    return EventList(groups.values())


class profile:
    """Records what loom does in its block (or between start() and stop()), as
    ``torch.profiler.profile``: ``key_averages()``, ``events()``, ``export_chrome_trace(path)``,
    ``schedule`` with ``step()`` and ``on_trace_ready`` for training loops. ``record_sample``:
    every n-th recorded op is a span of its own (1: each; 0: none)."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, record_sample=1, **_):
        if not isinstance(record_sample, int) or record_sample < 0:
            raise ValueError(f"profile(): record_sample must be a non-negative int, got {record_sample!r}")
        self.activities = activities
        self.schedule = schedule or _always_record
        self.on_trace_ready = on_trace_ready
        self.record_sample = record_sample
        self.step_num = 0
        self._action = ProfilerAction.NONE
        self._events = None  # the last saved profile's events
        self._recording = False
        self._step_start = 0

    # -- the recording, as the schedule says --

    def _begin(self):
        _C._profiler_start(self.record_sample)
        self._recording = True
        self._step_start = _C._profiler_now()

    def _end(self, keep):
        if not self._recording:
            return
        raw = _C._profiler_stop()
        self._recording = False
        if keep:
            self._events = _events_of(raw)
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)

    def _mark_step(self):
        if self._recording and self.schedule is not _always_record:
            now = _C._profiler_now()
            _C._profiler_emit("user", f"ProfilerStep#{self.step_num}", self._step_start, now)
            self._step_start = now

    def _enter_action(self, action):
        old, self._action = self._action, action
        recording = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        if old == ProfilerAction.RECORD_AND_SAVE:
            self._end(keep=True)
        elif old == ProfilerAction.WARMUP and action in recording:
            self._end(keep=False)  # warm-up events are thrown away
        elif old != ProfilerAction.NONE and action == ProfilerAction.NONE:
            self._end(keep=old in recording)
        if action != ProfilerAction.NONE and not self._recording:
            self._begin()

    def start(self):
        self._enter_action(self.schedule(self.step_num))
        return self

    def stop(self):
        if self._recording:
            self._mark_step()
            self._end(keep=self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE))
        self._action = ProfilerAction.NONE

    def step(self):
        """The end of one step of a training loop: the schedule's next action."""
        self._mark_step()
        self.step_num += 1
        self._enter_action(self.schedule(self.step_num))

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    # -- what was recorded --

    def events(self):
        """The spans and counters of the last saved profile (EventList of FunctionEvent)."""
        if self._events is None:
            raise RuntimeError("the profile has recorded nothing yet: use it as a context manager, or stop() it first")
        return self._events

    def key_averages(self, group_by_source=False):
        """The spans added up by name (and Python lines with group_by_source)."""
        return _average(self.events(), group_by_source)

    def syncs(self):
        """The profile's syncs in order: [(cause, (file, line, function) or None, duration_us)]."""
        return [(e.args.get("cause"), e.source, e.duration_us) for e in self.events() if e.category == "sync"]

    def export_chrome_trace(self, path):
        """Writes the profile as Chrome trace JSON (begin and end events, counters for memory)."""
        with open(path, "w") as f:
            json.dump(chrome_trace(self.events()), f)
        return path


def _events_of(raw):
    events = EventList(FunctionEvent(r) for r in raw)
    _compute_self_times([e for e in events if e.kind == "span"])
    events.sort(key=lambda e: e.start_ns)
    return events


def chrome_trace(events):
    """The events as a Chrome trace (a dict): per lane, spans as matching "B"/"E" pairs nested as
    they ran (a span that would cross its parent's end is cut there), counters as "C" events."""
    t0 = min((e.start_ns for e in events), default=0)
    lanes = {}
    trace = [{"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "loom"}}]

    def tid(thread):
        if thread not in lanes:
            lanes[thread] = len(lanes) + 1
            trace.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": lanes[thread],
                          "args": {"name": _lane_name(thread)}})
            trace.append({"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": lanes[thread],
                          "args": {"sort_index": lanes[thread]}})
        return lanes[thread]

    def us(ns):
        return (ns - t0) / 1e3

    by_lane = collections.defaultdict(list)
    for e in events:
        if e.kind == "span":
            by_lane[e.thread].append(e)
    for thread, spans in by_lane.items():
        lane = tid(thread)
        spans.sort(key=lambda e: (e.start_ns, -e.duration_ns))
        stack = []  # end times of the open spans

        def close_until(t):
            while stack and stack[-1] <= t:
                trace.append({"ph": "E", "pid": 0, "tid": lane, "ts": us(stack.pop())})

        for e in spans:
            close_until(e.start_ns)
            end = e.start_ns + e.duration_ns
            if stack:
                end = min(end, stack[-1])
            args = dict(e.args)
            if e.source:
                args["python"] = f"{e.source[0]}:{e.source[1]} ({e.source[2]})"
            if e.fused:
                args["fused ops"] = [f"{op} @ {loc[0]}:{loc[1]} ({loc[2]})" if loc else op for op, loc in e.fused]
            if e.bytes_read >= 0:
                args["bytes read"] = e.bytes_read
            if e.bytes_written >= 0:
                args["bytes written"] = e.bytes_written
            trace.append({"name": e.name, "cat": e.category, "ph": "B", "pid": 0, "tid": lane,
                          "ts": us(e.start_ns), "args": args})
            stack.append(end)
        close_until(float("inf"))
    for e in events:
        if e.kind == "counter":
            trace.append({"name": e.name, "ph": "C", "pid": 0, "tid": tid(e.thread), "ts": us(e.start_ns),
                          "args": dict(e.args)})
    return {"traceEvents": trace, "displayTimeUnit": "ms"}


class record_function:
    """A named range of the program in the profile (category user), as a context manager or a
    decorator; free when no profile runs."""

    def __init__(self, name, args=None):
        self.name = str(name)
        self._start = None

    def __enter__(self):
        self._start = _C._profiler_now() if _C._profiler_active() else None
        return self

    def __exit__(self, *exc):
        if self._start is not None:
            _C._profiler_emit("user", self.name, self._start, _C._profiler_now())
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with record_function(self.name):
                return fn(*args, **kwargs)
        return wrapped


class SyncSite(collections.namedtuple("SyncSite", "cause file line function count")):
    """Syncs of one cause at one Python line (file, line and function are None when no Python
    line called it)."""

    def __str__(self):
        where = f"{self.file}:{self.line} in {self.function}" if self.file else "(no Python line)"
        return f"{self.count:>6}  {self.cause:<21} {where}"


class SyncReport(list):
    """loom.explain_syncs()'s answer: a list of SyncSite, most syncs first, printed as a table."""

    def __str__(self):
        if not self:
            return "no syncs\n"
        lines = [f"{'syncs':>6}  {'cause':<21} where"] + [str(s) for s in self]
        return "\n".join(lines) + "\n"


_CAUSES = {
    "item": "a Python number (item(), bool(), int(), float(), an index)",
    "repr": "printing a tensor",
    "host": "values leaving the device (tolist(), numpy(), buffers, DLPack, .to())",
    "explicit": "loom.sync() or loom.synchronize()",
    "data_dependent_shape": "an op whose result's size depends on the values (nonzero, unique, masks, ...)",
    "step": "the end of an optimizer step (optimizer.step()): one trace per training step",
    "other": "another thread's tensor, or a pending write into memory being read",
}


def explain_syncs(reset=False):
    sites = [SyncSite(cause, *(where if where else (None, None, None)), count)
             for cause, where, count in _C._sync_sites(bool(reset))]
    sites.sort(key=lambda s: -s.count)
    return SyncReport(sites)


explain_syncs.__doc__ = (
    "Every sync that ran a trace since the process started (or the last reset=True), by cause and "
    "Python line (the first frame outside loom), with counts, most first: where a step stops being one "
    "graph. Causes: " + "; ".join(f"{k}: {v}" for k, v in _CAUSES.items()) + ".")


_C._install_source_hook(os.path.dirname(os.path.abspath(__file__)))
