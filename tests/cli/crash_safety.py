"""Helpers of test_crash_safety.sh: kill a command at a chosen moment, then check what it left.

  crash_safety.py launch TRIGGER OFFSET PID_FILE -- COMMAND...
      Runs COMMAND and SIGKILLs it OFFSET seconds after TRIGGER: 'start' (the launch), 'never' (no kill), or a
      file path whose name may hold @PID@ for the command's process id: the moment that file is created or opened
      (inotify on its folder, else polling; so the kill lands inside the write that follows unless the write is
      quicker than the kill). Writes the process id to PID_FILE; exits with the command's status, 128 + N for
      signal N (137: killed), as a shell reports it.
  crash_safety.py check DIR
      Every file in DIR under a final name is whole: a safetensors header parses and its data section ends exactly
      at the end of the file, a .json file parses, an HDF5 file opens and every dataset in it reads. Temporaries
      (NAME.tmp, NAME.tmp.PID) are listed as 'tmp NAME', not checked; a training state's step is printed as
      'step NAME N'. Exit 1 with 'bad NAME: why' lines when a final file is incomplete.
  crash_safety.py log LOG.h5
      Prints 'last_step N' and 'last_eval N': the last train and validation steps of a training log.
"""
import ctypes
import json
import os
import re
import select
import signal
import struct
import subprocess
import sys
import time

TEMP = re.compile(r"^(?P<base>.+)\.tmp(\.[0-9]+)?$")
IN_MODIFY, IN_OPEN, IN_CREATE = 0x2, 0x20, 0x100


def inotify(folder):
    """A non-blocking inotify descriptor watching FOLDER for files created, opened or written; None if refused."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, AttributeError):
        return None
    if fd < 0:
        return None
    if libc.inotify_add_watch(fd, folder.encode(), IN_CREATE | IN_OPEN | IN_MODIFY) < 0:
        os.close(fd)
        return None
    return fd


def wait_for_file(child, watch, path, started_ns):
    """Returns once PATH is created or opened after the launch, or the child has ended."""
    name = os.path.basename(path).encode()
    while child.poll() is None:
        if watch is None:  # no inotify here: poll for the file, written after the launch
            try:
                if os.stat(path).st_mtime_ns >= started_ns:
                    return
            except FileNotFoundError:
                pass
            time.sleep(0.0002)
            continue
        if not select.select([watch], [], [], 0.05)[0]:
            continue
        events = os.read(watch, 1 << 16)
        at = 0
        while at < len(events):
            _, _, _, length = struct.unpack_from("iIII", events, at)
            if events[at + 16 : at + 16 + length].rstrip(b"\0") == name:
                return
            at += 16 + length


def launch(trigger, offset, pid_file, command):
    watch = None
    if trigger not in ("start", "never"):
        watch = inotify(os.path.dirname(trigger) or ".")
    started_ns = time.time_ns()
    child = subprocess.Popen(command)
    with open(pid_file, "w") as f:
        f.write("%d\n" % child.pid)
    if trigger not in ("start", "never"):
        wait_for_file(child, watch, trigger.replace("@PID@", str(child.pid)), started_ns)
    if trigger != "never":
        if offset > 0:
            time.sleep(offset)
        try:
            child.send_signal(signal.SIGKILL)
        except ProcessLookupError:
            pass
    status = child.wait()
    return 128 - status if status < 0 else status


def check_safetensors(path):
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            return "shorter than the 8-byte header length"
        (n,) = struct.unpack("<Q", head)
        if 8 + n > size:
            return "header length %d past the end of the file (%d bytes)" % (n, size)
        header = json.loads(f.read(n).decode("utf-8"))
    step = header.get("__metadata__", {}).get("step")
    if step is not None:
        print("step", os.path.basename(path), step)
    end = 0
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, stop = t["data_offsets"]
        if not 0 <= begin <= stop:
            return "tensor %s: bad offsets" % name
        end = max(end, stop)
    if 8 + n + end != size:
        return "data section ends at %d, file is %d bytes" % (8 + n + end, size)
    return None


def check_hdf5(path):
    import h5py

    with h5py.File(path, "r") as f:
        datasets = []
        f.visititems(lambda name, obj: datasets.append(obj) if isinstance(obj, h5py.Dataset) else None)
        for d in datasets:
            d[()]
        if not datasets and not len(f.attrs):
            return "no dataset and no attribute"
    return None


def check_file(path):
    try:
        if path.endswith(".safetensors"):
            return check_safetensors(path)
        if path.endswith(".json"):
            with open(path, encoding="utf-8") as f:
                json.load(f)
            return None
        if path.endswith(".h5"):
            return check_hdf5(path)
        return None
    except Exception as e:  # a truncated file fails in any of a dozen ways: each is a finding
        return "%s: %s" % (type(e).__name__, e)


def check(folder):
    bad = 0
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        if TEMP.match(name):
            print("tmp", name)
            continue
        why = check_file(path)
        if why:
            print("bad %s: %s" % (name, why))
            bad += 1
    return 1 if bad else 0


def log(path):
    import h5py

    if not os.path.isfile(path):
        print("no training log", path)
        return 1
    with h5py.File(path, "r") as f:
        print("last_step", int(f["train/step"][-1]) if len(f["train/step"]) else 0)
        print("last_eval", int(f["eval/step"][-1]) if "eval" in f and len(f["eval/step"]) else -1)
    return 0


def main(argv):
    if len(argv) >= 6 and argv[1] == "launch" and argv[5] == "--":
        return launch(argv[2], float(argv[3]), argv[4], argv[6:])
    if len(argv) == 3 and argv[1] == "check":
        return check(argv[2])
    if len(argv) == 3 and argv[1] == "log":
        return log(argv[2])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
