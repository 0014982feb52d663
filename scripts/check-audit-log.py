#!/usr/bin/python3
"""Checks audit lines against docs/audit.schema.json (JSON Schema draft 2020-12).

usage: check-audit-log.py SCHEMA FILE...   (FILE: one JSON object a line; '-' is stdin)
Exits 1 and names every line that does not match, with why.
"""
import json
import sys

import jsonschema


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        schema = json.load(f)
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    validator = validator_class(schema)
    bad = 0
    for name in sys.argv[2:]:
        stream = sys.stdin if name == "-" else open(name)
        for number, line in enumerate(stream, 1):
            where = f"{name}:{number}"
            try:
                record = json.loads(line)
            except ValueError as e:
                print(f"{where}: not JSON ({e}): {line.rstrip()}")
                bad += 1
                continue
            errors = sorted(validator.iter_errors(record), key=lambda e: list(e.path))
            for e in errors:
                path = "/".join(str(p) for p in e.path) or "(line)"
                print(f"{where}: {path}: {e.message}: {line.rstrip()}")
            bad += bool(errors)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
