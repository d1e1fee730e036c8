#include "fusion/program.h"

namespace loom::fusion {

bool reduces_columns(const Kernel& k) {
  if (!k.row || k.outer.empty() || k.inner.empty()) return false;
  size_t last_kept = k.outer.size() - 1, last_reduced = k.outer.size() + k.inner.size() - 1;
  if (k.outer[last_kept] < 2) return false;  // one column: nothing to put side by side
  for (const Store& s : k.stores)
    if (s.access.space == Space::Inner) return false;  // an element epilogue walks rows
  bool contiguous_columns = false;
  for (const Load& l : k.loads) {
    if (l.access.space != Space::Inner) continue;
    // A value that is the same for every column (a layer norm's per-row rstd in its weight
    // gradient) is one broadcast read per step of the columns' walk: it may lie along the rows.
    if (l.access.strides[last_kept] == 0) continue;
    if (l.access.strides[last_reduced] == 1 && k.inner.back() > 1) return false;  // rows read in order
    contiguous_columns = contiguous_columns || l.access.strides[last_kept] == 1;
  }
  return contiguous_columns;
}

}  // namespace loom::fusion
