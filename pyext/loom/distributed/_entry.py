"""How loom.distributed.run starts a rank: python3 -m loom.distributed._entry ERROR_FILE
[-m] script args. It runs the script as python3 would (sys.argv, __main__, the script's folder
first on sys.path) and, if the script fails, writes its last error to ERROR_FILE for the
launcher to show, then fails the same way (the traceback is printed as usual)."""

import json
import runpy
import sys
import traceback


def _record(error_file, message, text):
    try:
        with open(error_file, "w") as f:
            json.dump({"message": message, "traceback": text}, f)
    except OSError:
        pass


def main():
    error_file, rest = sys.argv[1], sys.argv[2:]
    module = rest[:1] == ["-m"]
    if module:
        rest = rest[1:]
    target = rest[0]
    sys.argv = rest
    try:
        if module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            import os

            sys.path[0] = os.path.dirname(os.path.abspath(target))
            runpy.run_path(target, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            _record(error_file, f"SystemExit({e.code!r})", "")
        raise
    except BaseException as e:  # noqa: BLE001  recorded, then raised as it was
        _record(error_file, f"{type(e).__name__}: {e}", traceback.format_exc())
        raise


if __name__ == "__main__":
    main()
