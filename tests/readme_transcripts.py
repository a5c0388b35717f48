#!/usr/bin/env python3
"""Runs the transcripts shown in Markdown files and compares what they print, line for line.

A transcript is one of:
  - a ``` block whose first line starts with "$ ": a shell session; each "$ " line (with its
    "\\" continuations) is a command, the lines up to the next command are what it prints
    (standard output, then standard error). A command with " ... " in it is abbreviated prose:
    the session is checked up to it.
  - a ``` block right after an HTML comment "<!-- transcript: COMMAND -->": what COMMAND prints.
  - a ```python block right after which comes a ``` block: what the Python code prints
    (PYTHONPATH holds the build's Python package).
In the expected lines, a line that is "..." alone stands for any number of printed lines. Exit
codes 0 and 1 (a plan that does not fit is still an answer) are accepted, 2 and above are not.

Usage: readme_transcripts.py BUILD_DIR PYTHON FILE.md...   (run from the repository root; PYTHON
is the interpreter the build's module is for, "-" to skip the Python transcripts)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^```(\w*)\s*$")
MARKER = re.compile(r"^<!-- transcript: (.*) -->\s*$")


def blocks(lines):
    """Yields (line number, language, content lines, the line before the fence)."""
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        j = i + 1
        while j < len(lines) and not FENCE.match(lines[j]):
            j += 1
        before = lines[start - 1] if start > 0 else ""
        yield start + 1, m.group(1), lines[start + 1:j], before
        i = j + 1


def matches(expected, actual):
    """Line-for-line equality where an expected "..." line stands for any run of lines."""
    if not expected:
        return not actual
    if expected[0].strip() == "...":
        return any(matches(expected[1:], actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and expected[0] == actual[0] and matches(expected[1:], actual[1:])


def run(command, cwd, env):
    p = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    return p.returncode, (p.stdout + p.stderr).splitlines()


def sessions(content):
    """Splits a "$ " block into (command, expected output lines)."""
    out = []
    i = 0
    while i < len(content):
        line = content[i]
        if not line.startswith("$ "):
            i += 1
            continue
        command = line[2:]
        while command.endswith("\\") and i + 1 < len(content):
            i += 1
            command = command[:-1] + " " + content[i].strip()
        i += 1
        expected = []
        while i < len(content) and not content[i].startswith("$ "):
            expected.append(content[i])
            i += 1
        out.append((command, expected))
    return out


def main():
    build, python, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    root = os.getcwd()
    work = tempfile.mkdtemp(prefix="transcripts-")
    try:
        # the commands' relative paths: the repository's folders, and build/ the build under test
        for name in os.listdir(root):
            if name not in ("build", ".git"):
                os.symlink(os.path.join(root, name), os.path.join(work, name))
        os.symlink(os.path.abspath(build), os.path.join(work, "build"))
        env = dict(os.environ, PYTHONPATH=os.path.join(os.path.abspath(build), "python"))
        checked = failed = 0
        for path in files:
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
            all_blocks = list(blocks(lines))
            for k, (number, language, content, before) in enumerate(all_blocks):
                cases = []
                marker = MARKER.match(before)
                if marker:
                    cases = [(marker.group(1), content)]
                elif language == "" and content and content[0].startswith("$ "):
                    for command, expected in sessions(content):
                        if " ... " in f" {command} ":
                            break
                        cases.append((command, expected))
                elif language == "python" and python != "-" and k + 1 < len(all_blocks):
                    nxt = all_blocks[k + 1]
                    if nxt[0] == number + len(content) + 2 and nxt[1] == "":
                        script = os.path.join(work, f"transcript-{number}.py")
                        with open(script, "w", encoding="utf-8") as f:
                            f.write("\n".join(content) + "\n")
                        cases = [(f"{python} {script}", nxt[2])]
                for command, expected in cases:
                    checked += 1
                    rc, actual = run(command, work, env)
                    if rc > 1 or not matches(expected, actual):
                        failed += 1
                        print(f"FAIL {path}:{number}: {command}\n  exit {rc}; expected:")
                        print("\n".join("    " + e for e in expected))
                        print("  printed:")
                        print("\n".join("    " + a for a in actual))
        print(f"{checked} transcripts checked, {failed} differ")
        return 1 if failed or checked == 0 else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
