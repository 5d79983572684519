#!/usr/bin/env python3
"""The skip gate: fails when any test was skipped without a declared reason (tests/skips_allowed.txt).

A skipped test reads as green in CTest, so a missing ../shared, Python module or CPU feature could turn hundreds of
checks into nothing while CI passes. This reads every report a test run leaves (GoogleTest's XML per executable,
pytest's JUnit XML, CTest's JUnit XML for the shell tests), lists each skip with its message, and exits 1 when one
is not allowed here: an entry of the allowlist matches the test's name and message and its condition holds on
this machine (`cpu-lacks FLAG`: /proc/cpuinfo has no such flag; `always`).

    python3 scripts/skip_gate.py REPORT_DIR_OR_FILE... [--allow tests/skips_allowed.txt]
"""
import argparse
import glob
import os
import re
import sys
import xml.etree.ElementTree as ET


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def read_allowlist(path):
    """Entries `CONDITION | NAME_REGEX | MESSAGE_REGEX | why`, one per line, fields apart by ' | ' (a space each
    side, so a regular expression may hold '|'); a line starting with # is a comment."""
    entries = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = [p.strip() for p in re.split(r"\s+\|\s+", line)]
            if len(parts) != 4 or not parts[3]:
                sys.exit(f"{path}:{number}: expected 'CONDITION | NAME_REGEX | MESSAGE_REGEX | why', got '{line}'")
            condition = parts[0].split()
            if not (condition == ["always"] or (len(condition) == 2 and condition[0] == "cpu-lacks")):
                sys.exit(f"{path}:{number}: condition: expected 'always' or 'cpu-lacks FLAG', got '{parts[0]}'")
            try:
                entries.append((condition, re.compile(parts[1]), re.compile(parts[2]), parts[3], f"{path}:{number}"))
            except re.error as e:
                sys.exit(f"{path}:{number}: bad regular expression: {e}")
    return entries


def skips_in(path):
    """(test name, message) of every skipped test case in a GoogleTest, pytest or CTest XML report."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        sys.exit(f"{path}: not an XML test report: {e}")
    found, cases = [], 0
    for case in root.iter("testcase"):
        cases += 1
        name = case.get("name", "")
        suite = case.get("classname", "")
        full = name if not suite or name.startswith(suite) else f"{suite}.{name}"
        skipped = case.find("skipped")
        if skipped is not None or case.get("result") == "skipped" or case.get("status") == "notrun":
            message = (skipped.get("message") if skipped is not None else "") or ""
            if not message and skipped is not None:
                message = (skipped.text or "").strip()
            if not message or message.startswith("SKIP_"):  # CTest's reason; the shell test's words are in its output
                out = case.find("system-out")
                lines = [l for l in (out.text or "").splitlines() if "skipped" in l.lower()] if out is not None else []
                message = lines[0].strip() if lines else message
            message = re.sub(r"^\S+:\d+\s+", "", message.strip())  # GoogleTest puts FILE:LINE first
            found.append((full, " ".join(message.split())))
    return found, cases


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", help="XML reports, or folders searched for *.xml")
    parser.add_argument("--allow", default=os.path.join(os.path.dirname(__file__), "..", "tests", "skips_allowed.txt"))
    parser.add_argument("--cpu-flags", help="comma-separated flags to judge by instead of /proc/cpuinfo's (to check "
                        "the allowlist for another CPU)")
    args = parser.parse_args()

    files = []
    for r in args.reports:
        files += sorted(glob.glob(os.path.join(r, "**", "*.xml"), recursive=True)) if os.path.isdir(r) else [r]
    if not files:
        sys.exit(f"skip gate: no XML test reports under {' '.join(args.reports)}: did the tests run?")
    allow = read_allowlist(args.allow)
    flags = set(args.cpu_flags.split(",")) if args.cpu_flags is not None else cpu_flags()

    skipped, cases = [], 0
    for f in files:
        found, n = skips_in(f)
        skipped += found
        cases += n
    allowed, refused = [], []
    for name, message in skipped:
        why = next((e for e in allow if e[1].search(name) and e[2].search(message)
                    and (e[0] == ["always"] or e[0][1] not in flags)), None)
        (allowed if why else refused).append((name, message, why))

    print(f"skip gate: {cases} test cases in {len(files)} reports, {len(skipped)} skipped, "
          f"{len(allowed)} allowed, {len(refused)} not")
    reasons = {}
    for name, message, why in allowed:
        reasons.setdefault(why[3], []).append(name)
    for reason, names in reasons.items():
        print(f"  allowed ({len(names)}): {reason}")
    for name, message, _ in refused:
        print(f"  NOT ALLOWED: {name}: {message or '(no message)'}")
    if refused:
        print(f"skip gate: FAILED: {len(refused)} skip(s) without a declared reason ({args.allow}): a missing input "
              "is a failure here, not a skip")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
