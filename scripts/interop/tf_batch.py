"""Runs many interop checks in one Python process, so that TensorFlow is imported once
rather than once per check (some 4 s each on a 2-core machine; section 1 and 4 of run.sh
queue some 50 checks).

Usage: tf_batch.py JOBS
JOBS holds one check per line, tab-separated: LOG, then SCRIPT (a module beside this one,
e.g. tf_check.py), then its arguments. Each check runs as `SCRIPT ARGS...` would (its
`main(argv)`, or `main()` with `sys.argv` set), its output going to LOG and its exit
status (0 when it passed) to LOG.rc. A check that raises fails with the traceback in its
log; the others still run.
"""
import contextlib
import importlib
import inspect
import os
import sys
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def run(script, argv):
    module = importlib.import_module(os.path.basename(script).removesuffix(".py"))
    sys.argv = [script, *argv]
    if inspect.signature(module.main).parameters:
        ret = module.main(argv)
    else:
        ret = module.main()
    # `main` returns an exit status, or True/False (show_check.py), or None.
    if ret is None or ret is True:
        return 0
    if ret is False:
        return 1
    return int(ret)


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        jobs = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    for log, script, *argv in jobs:
        with open(log, "w", encoding="utf-8") as out, contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                rc = run(script, argv)
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except BaseException:  # noqa: BLE001 (a check's failure, whatever it is)
                traceback.print_exc()
                rc = 1
        with open(log + ".rc", "w", encoding="utf-8") as f:
            f.write(f"{rc}\n")


if __name__ == "__main__":
    main()
