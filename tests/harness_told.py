"""A harness that writes the lines its task's text lists: ``python tests/harness_told.py``.

It reads the door's ``task`` line, whose ``text`` is a JSON array of strings, writes each
string as one line of its stdout, and exits.
"""
import json
import sys


def main():
    task = json.loads(sys.stdin.readline())
    for line in json.loads(task["text"]):
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
