"""A harness that writes the lines it is given: ``python tests/harness_script.py LINE...``.

It reads the door's ``task`` line, writes each argument as one line of its
stdout (the JSON exactly as given; ``@task`` is replaced by the task line
it read, as a JSON string), then waits for stdin to close.
"""
import json
import sys


def main(lines):
    task = sys.stdin.readline()
    for line in lines:
        sys.stdout.write(line.replace('"@task"', json.dumps(task.strip())) + "\n")
        sys.stdout.flush()
    sys.stdin.read()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
