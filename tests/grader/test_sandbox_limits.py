# hw4p1: instructor-only
"""The sandbox's limits and choices (autograder/judging/isolation/sandbox.py), fast: the rlimits
worked out by hand and read back by the started child (a stand-in interpreter that reports its
arguments and getrlimit), the tree's cgroup limits read back from a cgroup tree laid out in a
temporary folder, the worker's flags for each cgroup found, the modes tried in order, the probe's
answer parsed, and the feedback's lines.

    .venv/bin/python -m pytest -q tests/grader/test_sandbox_limits.py
"""
import dataclasses
import json
import os
import resource
import sys

import pytest

from autograder.judging.isolation import cgroups, processes, sandbox, sandbox_modes

GIB = 2**30
LIMITS = ("RLIMIT_CORE", "RLIMIT_FSIZE", "RLIMIT_AS", "RLIMIT_NOFILE", "RLIMIT_NPROC",
          "RLIMIT_CPU")
# An interpreter in the worker's place: with --probe it answers PROBE on its result pipe, writes
# its soft limits to probe.json in its folder, prints OUTPUT and exits with EXIT; otherwise it writes its
# arguments and soft limits to its result pipe as JSON.
FAKE_PYTHON = """#!{python}
import json, os, resource, sys, time
args = sys.argv[1:]
fd = int(args[args.index("--result-fd") + 1])
limits = {{name: resource.getrlimit(getattr(resource, name))[0] for name in {limits!r}}}
if "--probe" in args:
    open("probe.json", "w").write(json.dumps(limits))
    print({output!r})
    os.write(fd, {probe!r})
    sys.exit({exit})
if "--sleep" in args:
    time.sleep(30)
try:  # the request pipe's end, if any: readable
    readable = os.read(int(args[args.index("--request-fd") + 1]), 0) == b""
except (ValueError, OSError):
    readable = False
os.write(fd, json.dumps({{"args": args, "limits": limits, "cwd": os.getcwd(),
                         "request_readable": readable}}).encode())
"""


def fake_python(folder, probe: bytes = b"ok landlock=0 seccomp=0", exit: int = 0,
                output: str = "") -> str:
    """The path of a FAKE_PYTHON script in ``folder`` answering ``probe`` with status ``exit``,
    printing ``output`` as it does."""
    path = folder / f"python-{probe.hex()}-{exit}-{len(output)}"
    path.write_text(FAKE_PYTHON.format(python=sys.executable, probe=probe, exit=exit,
                                       limits=LIMITS, output=output))
    path.chmod(0o755)
    return str(path)


def layout(root) -> sandbox_modes.Layout:
    """Empty worker folders under ``root`` (made when missing)."""
    folders = [root / name for name in ("runtime", "pylib", "student", "input", "tmp")]
    for folder in folders:
        folder.mkdir(exist_ok=True)
    return sandbox_modes.Layout(*folders)


class RecordedCgroup(cgroups.WorkerCgroup):
    """A cgroup holding ``controllers`` whose joining writes to /dev/null and whose removal is
    recorded: which controllers the worker's flags follow from, without a cgroup tree."""

    removed = False

    def join_fds(self) -> list[int]:
        return [os.open(os.devnull, os.O_WRONLY) for _ in self.paths]

    def remove(self) -> None:
        self.removed = True


def test_rlimits_by_value():
    """Each rlimit worked out by hand: no core, 64 MiB files, 4 GiB of address space, 256 open
    files, 64 tasks plus those beside, the CPU seconds truncated plus 5."""
    limits = sandbox.Limits()
    assert limits.rlimits(7.9, 3) == {resource.RLIMIT_CORE: 0, resource.RLIMIT_FSIZE: 67108864,
                                      resource.RLIMIT_AS: 4294967296,
                                      resource.RLIMIT_NOFILE: 256, resource.RLIMIT_NPROC: 67,
                                      resource.RLIMIT_CPU: 12}
    assert limits.rlimits(30.0)[resource.RLIMIT_NPROC] == 64
    assert (limits.tree_memory, limits.tree_cpus) == (4294967296, 1.0)


def test_the_tree_cgroup_gets_the_limits_values(tmp_path, monkeypatch):
    """Limits.tree_cgroup writes its processes, tree memory and CPUs into a cgroup (v2, laid out
    in a temporary folder), each in its own file; capped_controllers names what was created and
    removes it; no controller: None and nothing capped."""
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(cgroups, "OWN_CGROUP", tmp_path / "own")
    monkeypatch.setattr(cgroups.time, "sleep", lambda seconds: None)  # a folder rmdir refuses
    (tmp_path / "own").write_text("0::/\n")
    (tmp_path / "cgroup.controllers").write_text("memory pids cpu")
    limits = sandbox.Limits(processes=9, tree_memory=3 * GIB, tree_cpus=0.5)
    cgroup = limits.tree_cgroup()
    folder = cgroup.paths["pids"]
    assert {name: (folder / name).read_text() for name in ("pids.max", "memory.max", "cpu.max")
            } == {"pids.max": "9", "memory.max": "3221225472", "cpu.max": "50000 100000"}
    assert sandbox.capped_controllers(limits) == {"pids", "memory", "cpu"}
    (tmp_path / "cgroup.controllers").write_text("memory")
    assert sandbox.capped_controllers(limits) == {"memory"}
    (tmp_path / "cgroup.controllers").write_text("")
    assert sandbox.capped_controllers(limits) == frozenset()


@pytest.mark.parametrize("fresh, beside", [(True, 0), (False, 40)])
def test_the_child_runs_under_the_limits(tmp_path, monkeypatch, fresh, beside):
    """The started worker reads back each rlimit (its RLIMIT_NPROC with the judge's uid's tasks
    on top unless the mode draws a fresh uid), its input folder in its arguments, its result
    pipe, and runs in its tmp folder."""
    counted = []
    monkeypatch.setattr(sandbox, "uid_tasks", lambda uid: counted.append(uid) or 40)
    mode = dataclasses.replace(sandbox_modes.MODES["none"], fresh_uid=fresh)
    box = sandbox.Sandbox.of(mode, layout(tmp_path), fake_python(tmp_path))
    run = box.run(["--folder", "{input}"], timeout=7.9)
    report = json.loads(run.result)
    assert report["limits"] == {"RLIMIT_CORE": 0, "RLIMIT_FSIZE": 64 * 2**20,
                                "RLIMIT_AS": 4 * GIB, "RLIMIT_NOFILE": 256,
                                "RLIMIT_NPROC": 64 + beside, "RLIMIT_CPU": 12}
    assert counted == ([] if fresh else [os.getuid()])
    args = report["args"]
    assert args[args.index("--folder") + 1] == str(tmp_path / "input")
    assert "--request-fd" not in args and "--writable" not in args
    assert report["cwd"] == str(tmp_path / "tmp")


@pytest.mark.parametrize("controllers, single", [(None, True), (("pids",), True),
                                                 (("memory", "cpu"), True),
                                                 (("pids", "memory"), False),
                                                 (("pids", "memory", "cpu"), False)])
def test_one_process_unless_pids_and_memory_cap_the_tree(tmp_path, monkeypatch, controllers,
                                                         single):
    """--single-process unless both the pids and the memory cgroup cap the tree; the cgroup is
    removed after the run; --writable /tmp only where the mode has its own /tmp."""
    cgroup = None if controllers is None else RecordedCgroup(dict.fromkeys(controllers, tmp_path))
    monkeypatch.setattr(sandbox.Limits, "tree_cgroup", lambda self: cgroup)
    monkeypatch.setattr(sandbox, "uid_tasks", lambda uid: 0)
    own_view = dataclasses.replace(sandbox_modes.MODES["none"], own_view=True)
    box = sandbox.Sandbox.of(own_view, layout(tmp_path), fake_python(tmp_path))
    args = json.loads(box.run(["--x"], timeout=10).result)["args"]
    assert ("--single-process" in args) == single, args
    assert args[args.index("--writable") + 1] == "/tmp"
    assert cgroup is None or cgroup.removed


def test_a_dialogue_gets_the_request_pipe(tmp_path, monkeypatch):
    """With a dialogue the worker gets --request-fd and the dialogue a conversation with it."""
    monkeypatch.setattr(sandbox, "uid_tasks", lambda uid: 0)
    box = sandbox.Sandbox.of(sandbox_modes.MODES["none"], layout(tmp_path), fake_python(tmp_path))
    conversations = []
    run = box.run(["--x"], timeout=10, dialogue=conversations.append)
    assert json.loads(run.result)["request_readable"]  # the pipe's read end, passed on
    assert [type(c) for c in conversations] == [processes.Conversation]


def test_the_wall_clock_limit_bounds_the_run(tmp_path, monkeypatch):
    """wall_timeout, where given, ends the run before its CPU timeout."""
    monkeypatch.setattr(sandbox, "uid_tasks", lambda uid: 0)
    box = sandbox.Sandbox.of(sandbox_modes.MODES["none"], layout(tmp_path), fake_python(tmp_path))
    run = box.run(["--sleep"], timeout=60, wall_timeout=0.5)
    assert run.timed_out and run.seconds < 10, run


def modes(**records) -> dict:
    """Mode records named by keyword, in order, each a copy of 'none' with the given fields."""
    return {name: dataclasses.replace(sandbox_modes.MODES["none"], name=name, **fields)
            for name, fields in records.items()}


def test_the_first_mode_whose_probe_passes_is_chosen(tmp_path, monkeypatch):
    """Modes ruled out (a refusal, a missing command, a failed probe) are passed over with their
    reason; the first that passes is chosen with the layers its probe found."""
    monkeypatch.setattr(sandbox, "uid_tasks", lambda uid: 0)
    monkeypatch.setattr(sandbox, "MODES", modes(
        refused={"refusal": lambda: "refused here", "own_layers_only": False},
        missing={"command": "no-such-sandbox-command", "package": "pkg",
                 "own_layers_only": False},
        chosen={"own_layers_only": False}, later={"own_layers_only": False}))
    python = fake_python(tmp_path, b"ok landlock=3 seccomp=1")
    box, notes = sandbox.choose(layout(tmp_path), python)
    assert (box.mode.name, box.landlock, box.seccomp) == ("chosen", 3, 1)
    assert box.capped == sandbox.capped_controllers(box.limits)
    assert notes == ["refused: refused here",
                     "missing: no no-such-sandbox-command command (Debian package pkg)"]
    probed = json.loads((tmp_path / "tmp" / "probe.json").read_text())
    assert probed["RLIMIT_CPU"] == 25  # the probe's 20 s, plus 5
    failing = fake_python(tmp_path, b"ok landlock=3 seccomp=1", exit=1)
    box, notes = sandbox.choose(layout(tmp_path), failing)
    assert box is None and [note.split(":")[0] for note in notes] == [
        "refused", "missing", "chosen", "later"]
    assert notes[2] == "chosen: its probe failed: 1"
    talkative = fake_python(tmp_path, b"no", output="x" + "y" * 300)
    _, notes = sandbox.choose(layout(tmp_path), talkative)
    assert notes[2] == "chosen: its probe failed: " + "y" * 300  # the output's last 300 chars


def test_a_wanted_mode_is_tried_alone(tmp_path, monkeypatch):
    """A wanted mode that fails gives no sandbox, though a later mode would pass."""
    monkeypatch.setattr(sandbox, "uid_tasks", lambda uid: 0)
    records = modes(refused={"refusal": lambda: "refused here"}, plain={})
    monkeypatch.setattr(sandbox, "MODES", records)
    python = fake_python(tmp_path, b"ok landlock=2 seccomp=0")
    box, notes = sandbox.choose(layout(tmp_path), python, wanted=records["refused"])
    assert box is None and notes == ["refused: refused here"]
    box, notes = sandbox.choose(layout(tmp_path), python, wanted=records["plain"])
    assert box.mode.name == "plain" and notes == []


@pytest.mark.parametrize("probe, allowed, chosen", [
    (b"ok landlock=0 seccomp=0", False, False), (b"ok landlock=0 seccomp=0", True, True),
    (b"ok landlock=1 seccomp=0", False, True), (b"ok landlock=0 seccomp=1", False, True)])
def test_own_layers_only_needs_a_working_layer(tmp_path, monkeypatch, probe, allowed, chosen):
    """The plain child process is chosen only where its probe shows Landlock or seccomp working,
    or with allow_unisolated."""
    monkeypatch.setattr(sandbox, "uid_tasks", lambda uid: 0)
    monkeypatch.setattr(sandbox, "MODES", modes(plain={}))
    allow = {"allow_unisolated": True} if allowed else {}  # refused by default
    box, notes = sandbox.choose(layout(tmp_path), fake_python(tmp_path, probe), **allow)
    assert (box is not None) == chosen, notes
    assert chosen or "no isolation layer works here" in notes[0]


def probe(returncode, result: bytes) -> processes.Run:
    return processes.Run(returncode, 0.1, "", result)


def test_an_unprobed_sandbox_claims_no_layer():
    box = sandbox.Sandbox.of(sandbox_modes.MODES["none"], sandbox_modes.Layout(*["/x"] * 5))
    assert (box.landlock, box.seccomp, box.capped) == (0, 0, frozenset())
    with pytest.raises(dataclasses.FrozenInstanceError):  # as chosen, for every run
        box.landlock = 6


@pytest.mark.parametrize("answer, layers", [(b"ok seccomp=1", (0, 1)), (b"ok landlock=4", (4, 0))])
def test_a_layer_the_probe_does_not_name_is_absent(tmp_path, monkeypatch, answer, layers):
    monkeypatch.setattr(sandbox, "uid_tasks", lambda uid: 0)
    monkeypatch.setattr(sandbox, "MODES", modes(plain={}))
    box, _ = sandbox.choose(layout(tmp_path), fake_python(tmp_path, answer))
    assert (box.landlock, box.seccomp) == layers


def test_probe_answers():
    """The probe's fields as integers; a failed or malformed probe: None."""
    assert sandbox.probe_layers(probe(0, b"ok landlock=7 seccomp=1")) == {"landlock": 7,
                                                                         "seccomp": 1}
    assert sandbox.probe_layers(probe(0, b"ok")) == {}
    for failed in (probe(1, b"ok landlock=7"), probe(None, b"ok landlock=7"),
                   probe(0, b"no landlock=7"), probe(0, b"ok landlock=seven"),
                   probe(0, b"ok landlock")):
        assert sandbox.probe_layers(failed) is None, failed


def described(mode: str, landlock=0, seccomp=0, capped=("pids", "memory", "cpu"), **fields):
    record = dataclasses.replace(sandbox_modes.MODES[mode], **fields)
    return sandbox.Sandbox(record, sandbox_modes.Layout(*["/nonexistent"] * 5), "python",
                           landlock=landlock, seccomp=seccomp,
                           capped=frozenset(capped)).describe()


def test_the_summary_warns_only_where_nothing_isolates():
    """The plain child process without Landlock is UNISOLATED (its seccomp filter does not
    confine reads); with Landlock, or in any other mode, the mode's own summary."""
    assert described("none", seccomp=1).summary == sandbox_modes.UNISOLATED
    assert described("none", landlock=1).summary == sandbox_modes.MODES["none"].summary
    assert described("setpriv").summary == sandbox_modes.MODES["setpriv"].summary
    assert described("bwrap").mode == "bwrap"
    with pytest.raises(dataclasses.FrozenInstanceError):  # what the report records, once
        described("bwrap").mode = "none"


def test_the_layers_line():
    """Landlock's signal scoping is named from ABI 6 on; the writable /tmp's size in MiB where
    the mode has its own; seccomp named where installed."""
    five, six = described("bwrap", landlock=5).layers, described("bwrap", landlock=6).layers
    assert "no signal outside its domain" in six and "no signal" not in five
    assert "only its private 64 MiB /tmp" in five and "Landlock ABI 5" in five
    assert "writes no file" in described("none", landlock=1).layers
    assert described("none").layers.startswith("no Landlock on this kernel; ")
    assert "a seccomp filter (no ptrace" in described("none", seccomp=1).layers


def test_the_cap_note_names_each_missing_cgroup():
    """None where all three cap the tree; each missing controller named, with what bounds the
    worker instead (its seccomp filter, else rlimits), 'is' for one and 'are' for two."""
    assert described("bwrap").cap_note is None
    one = described("bwrap", capped=("memory", "cpu")).cap_note
    assert one.startswith("no pids cgroup") and "processes is bounded per process" in one
    two = described("bwrap", capped=("cpu",)).cap_note
    assert "no pids or memory cgroup" in two and "processes and memory are bounded" in two
    filtered = described("bwrap", seccomp=1, capped=("pids", "cpu")).cap_note
    assert filtered.startswith("no memory cgroup") and "its seccomp filter" in filtered
    cpu = described("bwrap", capped=("pids", "memory")).cap_note
    assert cpu.startswith("no cpu cgroup") and ";" not in cpu
    assert described("bwrap", capped=()).cap_note.count(";") == 1


def test_the_interpreter_is_the_real_file():
    """The worker runs the interpreter's real file, not a virtual environment's link."""
    assert sandbox.python_executable() == os.path.realpath(sys.executable)


def test_the_sandbox_is_made_readable_from_its_top(tmp_path):
    """The folder itself and its folders 755, its files 644, whatever they were."""
    top = tmp_path / "sandbox"
    (top / "inner").mkdir(parents=True)
    (top / "inner" / "code.py").write_text("")
    for path, bits in ((top, 0o700), (top / "inner", 0o700), (top / "inner" / "code.py", 0o600)):
        path.chmod(bits)
    sandbox.make_readable(top)
    assert [path.stat().st_mode & 0o777 for path in (top, top / "inner", top / "inner" / "code.py")
            ] == [0o755, 0o755, 0o644]
