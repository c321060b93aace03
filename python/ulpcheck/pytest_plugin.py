"""pytest plugin: the `ulpcheck` fixture runs the ulpcheck CLI on a user's
kernels file and turns its verdict into the test's.

    def test_my_rmsnorm(ulpcheck):
        ulpcheck.check("kernels.py", kernel="my_rms_norm", cases=300)

or one pytest item per kernel x property x dtype cell:

    from ulpcheck.pytest_plugin import cells

    @pytest.mark.parametrize("kernel,prop,dtype", cells("kernels.py"))
    def test_cell(ulpcheck, kernel, prop, dtype):
        ulpcheck.check("kernels.py", kernel=kernel, properties=prop, dtypes=dtype, cases=50)

A failure is a pytest failure whose message is what the CLI printed for it:
the original and shrunk case, the worst elements, and a one-line repro that
runs as written in a fresh shell (absolute paths, the interpreter named).
A check that judged too little (exit code 7) fails too: a pass must have
seen something. Options: --ulpcheck-seed (fixed by default, so a rerun is the
same run), --ulpcheck-html DIR (one report per check; paths listed at the
end), --ulpcheck-bin. Under pytest-xdist, worker i runs its checks on GPU
i mod the GPUs it sees (`pytest -n <GPUs>`: one worker per GPU), holding that
GPU's lock, so two workers never drive one GPU at once.

Installed with the package (`pip install ./python`: entry point pytest11)."""

import contextlib
import fcntl
import functools
import inspect
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import ulpcheck as _package
from ulpcheck.ops import OPS as _OPS

DEFAULT_SEED = "0x5eed"
# The CLI's exit codes (harness/runner/exit_codes.h) the plugin tells apart.
_PASSED, _PROPERTY_FAILED, _JUDGED_TOO_LITTLE = 0, 1, 7


def pytest_addoption(parser):
    group = parser.getgroup("ulpcheck")
    group.addoption("--ulpcheck-seed", default=None,
                    help=f"generation seed of every check (decimal or 0x hex; default {DEFAULT_SEED}, fixed)")
    group.addoption("--ulpcheck-html", default=None, metavar="DIR",
                    help="write each check's HTML report into DIR (listed at the end of the session)")
    group.addoption("--ulpcheck-bin", default=None, metavar="PATH",
                    help="the ulpcheck CLI (default: $ULPCHECK_BIN, then PATH, then the install prefix)")


def _candidates(explicit):
    if explicit:
        yield explicit
        return
    if os.environ.get("ULPCHECK_BIN"):
        yield os.environ["ULPCHECK_BIN"]
        return
    on_path = shutil.which("ulpcheck")
    if on_path:
        yield on_path
    here = Path(_package.__file__).resolve().parent
    # cmake --install: <prefix>/share/ulpcheck/python/ulpcheck beside <prefix>/bin/ulpcheck.
    yield str(here.parents[3] / "bin" / "ulpcheck")
    # A source checkout (pip install -e ./python): python/ulpcheck beside build/ulpcheck.
    yield str(here.parents[1] / "build" / "ulpcheck")


@functools.lru_cache(maxsize=None)  # once per session and --ulpcheck-bin, not once per test
def find_cli(explicit=None):
    """The CLI's path and its `version` line; raises pytest.UsageError saying
    where it looked, or that its protocol is not this package's."""
    tried = []
    for path in _candidates(explicit):
        tried.append(path)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            continue
        out = subprocess.run([path, "version"], capture_output=True, text=True)
        match = re.match(r"ulpcheck (\S+) python-protocol (\d+)", out.stdout)
        if not match:
            raise pytest.UsageError(f"{path} does not say its version (`{path} version`: {out.stdout or out.stderr})"
                                    " — a CLI older than this Python package; rebuild it")
        if int(match.group(2)) != _package.PROTOCOL:
            raise pytest.UsageError(
                f"{path} (ulpcheck {match.group(1)}) speaks python-protocol {match.group(2)}, this package "
                f"({_package.__file__}) {_package.PROTOCOL}: install the package and the CLI from one checkout")
        return os.path.abspath(path), out.stdout.strip()
    raise pytest.UsageError("no ulpcheck CLI found (tried: " + ", ".join(tried) +
                            "); build it (ci/setup) and set ULPCHECK_BIN or --ulpcheck-bin, or put it on PATH")


@functools.lru_cache(maxsize=None)
def _visible_gpus():
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them: its
    own list where it is set, else nvidia-smi's indices, else none known."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return tuple(name.strip() for name in listed.split(",") if name.strip())
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(line.strip() for line in done.stdout.splitlines() if line.strip()) if done.returncode == 0 else ()


def gpu_of_worker(worker, gpus):
    """The GPU an xdist worker ("gw3") drives: its index modulo the GPUs, so
    `pytest -n <GPUs>` puts one worker on each; None where no GPU is known."""
    match = re.fullmatch(r"gw(\d+)", worker or "")
    if not gpus or not match:
        return None
    return gpus[int(match.group(1)) % len(gpus)]


def _is_multi_rank(path, kernel, op):
    """Whether `kernel` of the kernels file `path` (or `op`) is of a
    multi-rank op, as the op's table says."""
    op = op or next((v["op"] for v in describe(str(path)) if v["name"] == kernel), None)
    return op in _OPS and _OPS[op].multi_rank


@contextlib.contextmanager
def _gpu_turn(backend, env, path, kernel, op):
    """Under pytest-xdist, each worker's checks run on one GPU of their own
    (CUDA_VISIBLE_DEVICES set in `env`; worker i on GPU i mod the GPUs), and
    take that GPU's lock, so two workers never drive one GPU at once; a check
    of a multi-rank op (a rank per GPU) takes every GPU's lock, in one order,
    and sees every GPU; where no GPU is known, one machine-wide lock.
    Host-only checks run side by side."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if backend == "host" or worker is None:
        yield None
        return
    gpus = _visible_gpus()
    # With one GPU a multi-rank check has no other GPU to see: the file is not described.
    gpu = None if len(gpus) > 1 and _is_multi_rank(path, kernel, op) else gpu_of_worker(worker, gpus)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    held = [gpu] if gpu is not None else sorted(gpus) if gpus else ["all"]
    with contextlib.ExitStack() as stack:
        for name in held:
            name = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
            f = stack.enter_context(open(Path(tempfile.gettempdir()) / f"ulpcheck-gpu-{os.getuid()}-{name}.lock", "w"))
            fcntl.flock(f, fcntl.LOCK_EX)
            stack.callback(fcntl.flock, f, fcntl.LOCK_UN)
        yield gpu


def failure_report(stdout, python, gpu=None):
    """The CLI's report of each failure (from its FAILED line to its repro
    line), the repro prefixed with the interpreter the check ran with (and
    the GPU, where the check was pinned to one)."""
    blocks, block = [], None
    for line in stdout.splitlines():
        if line.startswith("FAILED "):
            block = [line]
        elif block is not None:
            if line.lstrip().startswith("reproduce: "):
                command = line.split("reproduce: ", 1)[1]
                pinned = f"CUDA_VISIBLE_DEVICES={shlex.quote(gpu)} " if gpu is not None else ""
                block.append(f"  reproduce: {pinned}ULPCHECK_PYTHON={shlex.quote(python)} {command}")
                blocks.append("\n".join(block))
                block = None
            else:
                block.append(line)
    return blocks


@functools.lru_cache(maxsize=None)
def describe(path):
    """The variants the kernels file at `path` registers, as the CLI learns
    them (python -m ulpcheck.worker --describe, by this interpreter)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(_package.__file__).resolve().parents[1]),
                                                       os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "ulpcheck.worker", "--describe", "--python", path],
                          capture_output=True, text=True, env=env)
    described = json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else None
    if not isinstance(described, list):
        error = described.get("error") if isinstance(described, dict) else (done.stderr or done.stdout)[-2000:]
        raise pytest.UsageError(f"ulpcheck cannot describe {path}: {error}")
    return described


# The properties that apply to a variant of every single-rank op; name others
# (fused_vs_unfused, rank_consistency) in cells(properties=...).
CELL_PROPERTIES = ("accuracy", "batch_invariance", "determinism", "memory_safety")


def cells(kernels, kernel=None, properties=CELL_PROPERTIES):
    """pytest.param(kernel, property, dtype) for each variant the kernels file
    registers (or the one named), property and dtype the variant declares;
    `kernels` relative to the calling test file. The file is described as
    the CLI describes it (python -m ulpcheck.worker --describe), by this
    interpreter, at collection time."""
    path = Path(kernels)
    if not path.is_absolute():
        path = Path(inspect.stack()[1].filename).resolve().parent / path
    described = describe(str(path))
    variants = [v for v in described if kernel is None or v["name"] == kernel]
    if not variants:
        raise pytest.UsageError(f"{path} registers no variant named {kernel!r}")
    return [pytest.param(v["name"], p, d, id=f"{v['name']}-{p}-{d}")
            for v in variants for p in properties for d in v["dtypes"]]


class Result:
    """A check that passed: the CLI's command line and its output."""

    def __init__(self, command, stdout):
        self.command, self.stdout = command, stdout


class Checker:
    def __init__(self, request):
        self._request = request
        config = request.config
        self._cli, self.version = find_cli(config.getoption("--ulpcheck-bin"))
        self.seed = config.getoption("--ulpcheck-seed") or DEFAULT_SEED
        self._html_dir = config.getoption("--ulpcheck-html")

    def check(self, kernels, *, kernel, op=None, cases=300, properties=(), dtypes=(), backend=None, tier=None,
              args=()):
        """Runs every property (or `properties`) on `kernel` of the kernels
        file `kernels` (relative to the test file) over `cases` generated
        cases; fails the test on a failure or a check that judged too little."""
        path = Path(kernels)
        if not path.is_absolute():
            path = Path(str(self._request.node.fspath)).parent / path
        command = [self._cli, "run", "--python", str(path.resolve()), "--kernel", kernel, "--cases", str(cases),
                   "--seed", str(self.seed), "--no-corpus", "--no-save", "--quiet"]
        if op:
            command += ["--op", op]
        for option, values in (("--property", properties), ("--dtype", dtypes)):
            if values:
                command += [option, *([values] if isinstance(values, str) else values)]
        if backend:
            command += ["--backend", backend]
        if tier:
            command += ["--tier", tier]
        if self._html_dir:
            os.makedirs(self._html_dir, exist_ok=True)
            name = re.sub(r"[^A-Za-z0-9_.-]+", "_", self._request.node.nodeid) + ".html"
            html = os.path.abspath(os.path.join(self._html_dir, name))
            command += ["--html", html]
            # On the test's report (pytest-xdist carries it to the controller; --junitxml writes it).
            self._request.node.user_properties.append(("ulpcheck_html", html))
        command += list(args)
        # The worker the CLI starts runs this very interpreter (its torch, its libraries).
        env = dict(os.environ, ULPCHECK_PYTHON=sys.executable)
        with _gpu_turn(backend, env, path.resolve(), kernel, op) as gpu:
            done = subprocess.run(command, capture_output=True, text=True, env=env)
        shown = " ".join(shlex.quote(c) for c in command)
        if done.returncode == _PASSED:
            return Result(shown, done.stdout)
        if done.returncode == _PROPERTY_FAILED:
            blocks = failure_report(done.stdout, sys.executable, gpu)
            pytest.fail(f"ulpcheck: {kernel} failed\n\n" + "\n\n".join(blocks or [done.stdout]), pytrace=False)
        if done.returncode == _JUDGED_TOO_LITTLE:
            pytest.fail(f"ulpcheck: {kernel} judged too little (exit 7: nothing judged, or a cell below its "
                        f"target)\n{shown}\n\n{done.stdout[-4000:]}", pytrace=False)
        pytest.fail(f"ulpcheck exited {done.returncode}\n{shown}\n\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}",
                    pytrace=False)


@pytest.fixture
def ulpcheck(request):
    """Runs ulpcheck on your kernels: ulpcheck.check("kernels.py", kernel="my_rms_norm")."""
    return Checker(request)


def pytest_terminal_summary(terminalreporter, config):
    reports = sorted({value for outcome in terminalreporter.stats.values() for report in outcome
                      for name, value in getattr(report, "user_properties", ()) if name == "ulpcheck_html"})
    if reports:
        terminalreporter.write_sep("-", "ulpcheck HTML reports")
        for html in reports:
            terminalreporter.write_line(html)
