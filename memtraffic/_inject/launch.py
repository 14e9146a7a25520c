"""`python [flags] launch.py [--trace-from=MODE] [--triton] [--timings=FILE] SCRIPT|-m MODULE|-c CODE [ARGS]`:
run a Python program with its aten ops traced (MODE: a key of memtraffic.runfolder.trace.TRACE_FROM,
default 1: all; `none`: no op tracer), its Triton launches ranged (--triton, or MEMTRAFFIC_TRITON=1) and
its kernels timed into FILE (--timings, or MEMTRAFFIC_TIMINGS; see sitecustomize.py).

`memtraffic profile --torch-ops -- python train.py` runs `python .../launch.py train.py` instead: under
ncu the sitecustomize route (PYTHONPATH) was seen not to run on the H100 machine (2026-11-23: the same
command traced its ops without ncu and none under it), while an argument to the interpreter always
reaches it. The program then runs as `python train.py` would: __main__, sys.argv and sys.path[0] are
its own, and its exit code is the process's. The other options travel as arguments for the same
reason: under ncu, MEMTRAFFIC_TRITON set for the program did not reach it (H100, 2026-11-25), as
happens when a Python process between memtraffic and the program runs sitecustomize, which takes the
variables out of the environment the program inherits.
"""

import importlib.util
import os
import runpy
import sys
import types

_HERE = os.path.dirname(os.path.abspath(__file__))


def _sitecustomize() -> types.ModuleType:
    """This folder's sitecustomize.py as a plain module: its tracing functions, none of its start-up."""
    spec = importlib.util.spec_from_file_location("_memtraffic_sitecustomize", os.path.join(_HERE,
                                                                                             "sitecustomize.py"))
    assert spec is not None and spec.loader is not None  # our own file beside this one
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    site = _sitecustomize()
    site.stamp("program_start")
    args = sys.argv[1:]
    if not args:
        sys.exit("usage: python launch.py SCRIPT|-m MODULE|-c CODE [ARGS...]")
    mode, triton, timings = "1", False, None
    while args and args[0].startswith(("--trace-from=", "--triton", "--timings=")):
        option, _, value = args[0].partition("=")
        if option == "--trace-from":  # which calls to trace (memtraffic.runfolder.trace.TRACE_FROM)
            mode = value
        elif option == "--timings":
            timings = value
        else:
            triton = True
        args = args[1:]
    if not args:
        sys.exit("usage: python launch.py [OPTIONS] SCRIPT|-m MODULE|-c CODE [ARGS...]")
    os.environ.pop("MEMTRAFFIC_TORCH_OPS", None)  # processes the program starts are not traced
    triton = os.environ.pop("MEMTRAFFIC_TRITON", None) == "1" or triton
    timings = os.environ.pop("MEMTRAFFIC_TIMINGS", None) or timings
    site.trace_from_now(None if mode == "none" else mode, triton, timings)
    if args[0] == "-m":
        sys.argv = args[1:]
        sys.path[0] = os.getcwd()
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    elif args[0] == "-c":
        sys.argv = ["-c", *args[2:]]
        sys.path[0] = ""
        exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    else:
        sys.argv = args
        sys.path[0] = os.path.dirname(os.path.abspath(args[0]))
        runpy.run_path(args[0], run_name="__main__")


if __name__ == "__main__":
    main()
