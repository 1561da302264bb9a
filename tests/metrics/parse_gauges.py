#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# Reads print_gauges' output with prometheus_client's text parser (Debian's
# python3-prometheus-client) and checks the gauges at the state print_gauges sets up: every
# gauge family typed, a read-write lock's series told apart by side="read" / side="write", and
# each value what that state must give.
#   parse_gauges.py <print_gauges>
import subprocess
import sys

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    sys.exit("FAILED: no prometheus_client module in " + sys.executable +
             " (Debian: apt-get install python3-prometheus-client)")

EXPECTED = {
    ("dlock_holds", (("lock", "orders"),)): 2,
    ("dlock_holds", (("lock", "config"), ("side", "read"))): 2,
    ("dlock_holds", (("lock", "config"), ("side", "write"))): 0,
    ("dlock_waiting_threads", (("lock", "orders"),)): 1,
    ("dlock_waiting_threads", (("lock", "config"), ("side", "read"))): 0,
    ("dlock_waiting_threads", (("lock", "config"), ("side", "write"))): 1,
    ("dlock_waiting_threads", (("lock", "partner-api"),)): 1,
    ("dlock_semaphore_permits_in_use", (("lock", "partner-api"),)): 2,
    ("dlock_semaphore_capacity", (("lock", "partner-api"),)): 3,
}
GAUGES = {name for name, _ in EXPECTED}

text = subprocess.run([sys.argv[1]], check=True, capture_output=True, text=True).stdout
families = {family.name: family for family in text_string_to_metric_families(text)}
errors = []

untyped = [name for name, family in families.items() if family.type == "untyped"]
if untyped:
    errors.append(f"samples outside their family: {untyped}")
for name in sorted(GAUGES):
    if name not in families:
        errors.append(f"no family {name}")
    elif families[name].type != "gauge":
        errors.append(f"{name} is a {families[name].type}")

seen = {}
for name in GAUGES & set(families):
    for sample in families[name].samples:
        key = (sample.name, tuple(sorted(sample.labels.items())))
        if key in seen:
            errors.append(f"{key} twice")
        seen[key] = sample.value
for key, want in EXPECTED.items():
    got = seen.get(key)
    if got != want:
        errors.append(f"{key[0]}{dict(key[1])} is {got}, expected {want}")
unexpected = sorted(set(seen) - set(EXPECTED))
if unexpected:
    errors.append(f"series nobody expected: {unexpected}")
# The counters of the same three, one series each (a read-write lock's count both sides).
acquisitions = {s.labels["lock"]: s.value for s in families["dlock_acquisitions"].samples}
if acquisitions != {"orders": 2, "config": 2, "partner-api": 1}:
    errors.append(f"dlock_acquisitions_total: {acquisitions}")

if errors:
    print(text)
    sys.exit("FAILED:\n  " + "\n  ".join(errors))
print(f"parsed {len(families)} families; {len(seen)} gauge series as expected")
